"""berth's OCI distribution-spec conformance suite.

Usage: berth-conformance.pyz http://HOST:PORT [--namespace NAME] [--crossmount NAME]
                             [--only CATEGORY[,CATEGORY...]] [--sparse] [--lenient] [--list] [--verbose]
                             [--ro-repo NAME --ro-tags T,... --ro-manifests D,... --ro-blobs D,...
                              --ro-referrers D,...]
(from a source tree: conformance/run with the same arguments)

Every check is labelled with the strength of the requirement it tests:
  MUST    a MUST/MUST NOT of distribution-spec v1.1 (or of the image-spec), or a
          behaviour the official conformance suite asserts;
  SHOULD  a SHOULD of the spec (including the unreleased additions on main);
  EXT     something the spec leaves optional (MAY) that berth implements.
The exit code is 0 only if no check failed (with --lenient: if no MUST check failed).
Standard library only; all content is generated at runtime in fresh repositories
(except the --ro-* content a read-only registry was preloaded with).
"""

import argparse
import types

from .checklist import MUST
from .checks import CHECKS
from .client import Client
from .runner import run
from .suite import Suite


OPT_IN = ("sparse",)  # categories that run only when asked for (--sparse, --only)


def main():
    categories = list(dict.fromkeys(c.category for c in CHECKS))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", nargs="?", help="registry base URL, e.g. http://127.0.0.1:5000")
    parser.add_argument("--namespace", default="conformance", help="repository prefix (default: conformance)")
    parser.add_argument("--crossmount", help="repository to mount blobs into (default: a fresh one)")
    parser.add_argument("--only", help=f"comma-separated categories: {','.join(categories)} "
                        f"(default: all but {','.join(OPT_IN)})")
    parser.add_argument("--sparse", action="store_true",
                        help="the registry accepts sparse manifests: run the sparse checks and expect acceptance")
    ro = parser.add_argument_group("read-only registry (the official suite's OCI_RO_DATA_*)")
    ro.add_argument("--ro-repo", help="repository holding the preloaded content")
    for kind in ("tags", "manifests", "blobs", "referrers"):
        ro.add_argument(f"--ro-{kind}", default="", metavar="A,B", help=f"comma-separated preloaded {kind}"
                        + (" (subject digests)" if kind == "referrers" else ""))
    parser.add_argument("--lenient", action="store_true", help="exit 0 unless a MUST check fails")
    parser.add_argument("--list", action="store_true", help="list the checks and exit")
    parser.add_argument("--verbose", action="store_true", help="log every request to stderr")
    args = parser.parse_args()

    ro_data = {kind: [v for v in getattr(args, f"ro_{kind}").split(",") if v]
               for kind in ("tags", "manifests", "blobs", "referrers")}
    ro = None
    if args.ro_repo or any(ro_data.values()):
        if not args.ro_repo:
            parser.error("--ro-tags/--ro-manifests/--ro-blobs/--ro-referrers need --ro-repo")
        ro = types.SimpleNamespace(repo=args.ro_repo.strip("/"), **ro_data)
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - set(categories)
        if unknown:
            parser.error(f"unknown categories {sorted(unknown)}; choose from {categories}")
    elif ro:
        wanted = {"base", "readonly"}  # a read-only registry: nothing is pushed
    else:
        wanted = set(categories) - set(OPT_IN)
    if args.sparse or (args.list and not args.only):
        wanted.add("sparse")
    # run (and list) category by category, each in registration order
    selected = sorted((c for c in CHECKS if c.category in wanted), key=lambda c: categories.index(c.category))
    if args.list:
        for c in selected:
            print(f"{c.id} [{c.level}] {c.title}")
        return 0
    if not args.url:
        parser.error("the registry URL is required")
    suite = Suite(Client(args.url, args.verbose), args.namespace.strip("/"), args.crossmount, args.sparse, ro)
    print(f"# berth conformance: {args.url}, repositories {suite.repo('*')}", flush=True)
    failed = run(suite, selected)
    if args.lenient:
        return 1 if failed[MUST] else 0
    return 1 if any(failed.values()) else 0
