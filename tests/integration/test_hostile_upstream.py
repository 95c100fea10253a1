#!/usr/bin/env python3
"""A hostile upstream registry (hostile_upstream.py) against a real berth proxying it.

Each test starts one berth whose upstreams evil.test and twin.test (the same hostile upstream; two
entries, so each has its own skipped-address state) use fetch_timeout_seconds 1, the minimum. It
pushes a small image to a local repository and caches a mirrored one, then lets the upstream
misbehave while clients pull concurrently. Every test checks, through while_hostile():

- berth stays alive;
- its memory stays bounded: VmRSS and the peak VmHWM under 300 MiB (1 GiB under AddressSanitizer);
- /healthz, /readyz, /v2/, the local image and the cached mirrored image (by tag, by digest, its
  blob) answer right within a second each, all along, while the upstream misbehaves (a prober
  thread; the hostile pulls are repeated until it has finished two rounds meanwhile);
- nothing bad is kept: no file under the root has the bad bytes' digest or a bad manifest's
  marker; afterwards, with the upstream answering 404 to everything, the references pulled are
  not served (assert_nothing_cached); and an honest upstream then gets the right bytes served
  (assert_served_when_honest).

What a client must see is docs/proxy.md's "A hostile or broken upstream": a manifest miss the
upstream fails is 404 MANIFEST_UNKNOWN, a blob's is 404 BLOB_UNKNOWN or a short body (never a
wrong complete one), within fetch_timeout_seconds and a few seconds more.

BERTH_KEEP=1 prints berth's log of every test, not only of failing ones.
"""

import base64
import concurrent.futures
import contextlib
import hashlib
import json
import os
import re
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
import hostile_upstream as hu  # noqa: E402

NS, TWIN = "evil.test", "twin.test"
# fetch_timeout_seconds: its minimum. Under AddressSanitizer berth runs several times slower, and
# a 4 MB tag list fetched beside nineteen misbehaving upstreams on two cores can miss one second:
# there the deadline, and the bound on answers with it, are three seconds.
FETCH_TIMEOUT = 3 if os.environ.get("ASAN_OPTIONS") else 1
ANSWER_BOUND = FETCH_TIMEOUT + 3.0  # seconds a client may wait for an answer about a failing upstream
PROBE_BOUND = 1.0  # seconds any probe may take, whatever the upstream does
# Memory berth may hold at any time, its peak included. AddressSanitizer builds (ctest with
# BERTH_SANITIZE sets ASAN_OPTIONS) keep freed memory in quarantine and add shadow memory.
RSS_LIMIT = (1 << 30) if os.environ.get("ASAN_OPTIONS") else 300 << 20
HONEST_WITHIN = 10  # seconds until an honest upstream is asked again (failed addresses are skipped 2 s)
RELEASE_WITHIN = 8  # seconds until berth lets go of the upstream connections of failed fetches
ACCEPT = ", ".join([bt.OCI_MANIFEST, "application/vnd.oci.image.index.v1+json",
                    "application/vnd.docker.distribution.manifest.v2+json",
                    "application/vnd.docker.distribution.manifest.list.v2+json"])
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
NESTED = b"[" * 4_000_000


# --------------------------------------------------------------------------- client side


class Got:
    """One answer from berth, read on a raw socket (a short body is no exception here)."""

    def __init__(self):
        self.status, self.headers, self.body = None, {}, b""
        self.complete, self.error, self.elapsed = False, None, 0.0

    def header(self, name):
        return self.headers.get(name.lower())

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def codes(self):
        doc = self.json()
        if not isinstance(doc, dict) or not isinstance(doc.get("errors"), list):
            return None
        return [e.get("code") for e in doc["errors"] if isinstance(e, dict)]

    def __repr__(self):
        return (f"<{self.status} after {self.elapsed:.2f}s, {len(self.body)} bytes{'' if self.complete else ' (short)'}"
                f"{', ' + self.error if self.error else ''}: {self.body[:160]!r}>")


def dechunk(raw):
    out, pos = bytearray(), 0
    while True:
        end = raw.find(b"\r\n", pos)
        if end < 0:
            return bytes(out), False
        size = int(raw[pos:end].split(b";")[0], 16)
        if size == 0:
            return bytes(out), True
        out += raw[end + 2:end + 2 + size]
        if len(raw) < end + 2 + size + 2:
            return bytes(out), False
        pos = end + 2 + size + 2


def fetch(port, path, method="GET", headers=None, timeout=20):
    """One request on a fresh connection (Connection: close); the answer however it ends."""
    got = Got()
    t0 = time.monotonic()
    deadline = t0 + timeout
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    except OSError as e:
        got.error, got.elapsed = f"connect: {e}", time.monotonic() - t0
        return got
    data, head_end, length = bytearray(), -1, None
    with s:
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        try:
            s.sendall(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n{extra}\r\n".encode())
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    got.error = "timeout"
                    break
                s.settimeout(left)
                chunk = s.recv(262144)
                if not chunk:
                    break
                data += chunk
                if head_end < 0 and b"\r\n\r\n" in data:
                    head_end = data.index(b"\r\n\r\n") + 4
                    m = re.search(rb"\r\ncontent-length:\s*(\d+)", bytes(data[:head_end]), re.I)
                    length = int(m.group(1)) if m else None
                    if method == "HEAD":
                        length = 0
                if length is not None and len(data) - head_end >= length:
                    break
        except socket.timeout:
            got.error = "timeout"
        except OSError as e:
            got.error = repr(e)
    got.elapsed = time.monotonic() - t0
    if head_end < 0:
        got.error = got.error or "no response head"
        return got
    lines = bytes(data[:head_end - 4]).decode("latin-1").split("\r\n")
    got.status = int(lines[0].split(" ")[1])
    for line in lines[1:]:
        k, _, v = line.partition(":")
        got.headers[k.strip().lower()] = v.strip()
    body = bytes(data[head_end:])
    if got.header("transfer-encoding") == "chunked":
        got.body, got.complete = dechunk(body)
    elif length is not None:
        got.body, got.complete = body[:length], len(body) >= length
    else:
        got.body, got.complete = body, got.error is None
    return got


def vm_status(pid):
    """{"VmRSS": bytes, "VmHWM": bytes} of a process."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
    return out


def new_marker(kind="hostile"):
    return f"{kind}-marker-{os.urandom(8).hex()}"


def image_manifest(marker, pad=0):
    """A small OCI image manifest carrying a marker (so its bytes can be looked for on disk)."""
    config = json.dumps({"marker": marker}).encode()
    doc = {"schemaVersion": 2, "mediaType": bt.OCI_MANIFEST,
           "config": {"mediaType": bt.OCI_CONFIG, "digest": bt.sha256_digest(config), "size": len(config)},
           "layers": [], "annotations": {"test.marker": marker}}
    if pad:
        doc["annotations"]["test.pad"] = "p" * pad
    return json.dumps(doc).encode()


def chunked(body, size=1000):
    out = b""
    for i in range(0, len(body), size):
        piece = body[i:i + size]
        out += b"%x\r\n" % len(piece) + piece + b"\r\n"
    return out + b"0\r\n\r\n"


def failed(testcase):
    result = getattr(getattr(testcase, "_outcome", None), "result", None)
    return result is not None and any(t is testcase for t, _ in result.failures + result.errors)


def configure(**overrides):
    """Per-test berth configuration: limits={...}, upstream={...} or upstream=lambda test: {...}."""
    def mark(fn):
        fn.berth_overrides = overrides
        return fn
    return mark


# --------------------------------------------------------------------------- the prober


class Prober(threading.Thread):
    """GETs every probe over and over on fresh connections, timing each, until stopped."""

    def __init__(self, port, probes):
        super().__init__(name="prober", daemon=True)
        self.port, self.probes = port, probes
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.results = []  # (name, started, elapsed, Got, ok)
        self.rounds = []  # (started, ended)

    def run(self):
        while not self.stop_event.is_set():
            started = time.monotonic()
            for name, path, headers, body in self.probes:
                t = time.monotonic()
                got = fetch(self.port, path, headers=headers, timeout=5)
                ok = got.status == 200 and got.complete and (body is None or got.body == body)
                with self.lock:
                    self.results.append((name, t, got.elapsed, got, ok))
            with self.lock:
                self.rounds.append((started, time.monotonic()))
            self.stop_event.wait(0.02)

    def rounds_since(self, t0):
        with self.lock:
            return sum(1 for s, _ in self.rounds if s >= t0)

    def stop(self):
        self.stop_event.set()
        if self.is_alive():
            self.join(15)


# --------------------------------------------------------------------------- the shared checks


class HostileCase(unittest.TestCase):
    def setUp(self):
        bt.wait_for_binary()
        self.up = hu.HostileUpstream(name="evil").start()
        self.addCleanup(self.up.close)
        self.servers = [self.up]
        self.overrides = getattr(getattr(self, self._testMethodName), "berth_overrides", {})
        self.before_berth()
        self.b = bt.Berth()
        self.addCleanup(self.b.cleanup)
        self.b.config = self.berth_config()
        self.b.start()
        self.addCleanup(self.print_logs_on_failure)
        self.prober = None
        self.local = self.b.push_image("local/app", "v1", (600,))
        local_blob = self.local["layers"][0]
        # A mirrored image in the cache: reads of it are hits, whatever the upstream does now.
        self.cached = bt.make_image((700,))
        self.up.add_image("library/cached", "v1", self.cached)
        self.assertEqual(self.get_manifest("library/cached", "v1").body, self.cached["manifest"])
        for digest, data in self.cached["blobs"].items():
            self.assertEqual(self.get_blob("library/cached", digest).body, data)
        self.up.forget()
        cached_layer = self.cached["layers"][0]
        accept = {"Accept": ACCEPT}
        self.probes = [
            ("healthz", "/healthz", None, None),
            ("readyz", "/readyz", None, None),
            ("/v2/", "/v2/", None, None),
            ("local manifest", "/v2/local/app/manifests/v1", accept, self.local["manifest"]),
            ("local blob", f"/v2/local/app/blobs/{bt.sha256_digest(local_blob)}", None, local_blob),
            ("cached manifest by tag", f"/v2/library/cached/manifests/v1?ns={NS}", accept, self.cached["manifest"]),
            ("cached manifest by digest", f"/v2/library/cached/manifests/{self.cached['digest']}?ns={NS}", accept,
             self.cached["manifest"]),
            ("cached blob", f"/v2/library/cached/blobs/{bt.sha256_digest(cached_layer)}?ns={NS}", None, cached_layer),
        ]

    def before_berth(self):
        """Hook: servers the configuration names (token realms, redirect targets)."""

    def server(self, host="127.0.0.1", name="other"):
        """Another hostile server, closed on cleanup."""
        s = hu.HostileUpstream(host=host, name=name).start()
        self.addCleanup(s.close)
        self.servers.append(s)
        return s

    def password_file(self):
        """Upstream credentials mirror / mirror-pw: the password file's path."""
        path = os.path.join(self.b.tmp, "upstream.pw")
        with open(path, "w") as f:
            f.write("mirror-pw\n")
        return path

    def upstream_keys(self):
        keys = self.overrides.get("upstream", {})
        return keys(self) if callable(keys) else dict(keys)

    def berth_config(self):
        entries = [{"host": host, "url": self.up.url, "fetch_timeout_seconds": FETCH_TIMEOUT, **self.upstream_keys()}
                   for host in (NS, TWIN)]
        cfg = {"log": {"access": True}, "proxy": {"upstreams": entries}}
        if "limits" in self.overrides:
            cfg["limits"] = dict(self.overrides["limits"])
        return cfg

    def print_logs_on_failure(self):
        if failed(self) or os.environ.get("BERTH_KEEP"):
            lines = [x for x in self.b.stderr().splitlines() if '"msg":"request"' not in x.replace(" ", "")]
            print(f"\n--- {self.id()}: berth stderr without access lines (tail):\n" + "\n".join(lines[-40:]) +
                  f"\n--- upstream saw {len(self.up.received())} requests, last: {self.up.received()[-10:]}",
                  file=sys.stderr)

    # ---- requests

    def get_manifest(self, repo, ref, ns=NS, timeout=20):
        return fetch(self.b.port, f"/v2/{repo}/manifests/{ref}?ns={ns}", headers={"Accept": ACCEPT}, timeout=timeout)

    def get_blob(self, repo, digest, ns=NS, timeout=20):
        return fetch(self.b.port, f"/v2/{repo}/blobs/{digest}?ns={ns}", timeout=timeout)

    def get_tags(self, repo, query="", ns=NS, timeout=20):
        return fetch(self.b.port, f"/v2/{repo}/tags/list?ns={ns}{query}", timeout=timeout)

    # ---- while the upstream misbehaves

    @contextlib.contextmanager
    def while_hostile(self, bad=(), markers=()):
        """Probes berth all along the body; then asserts the four invariants: alive, memory bounded,
        every probe right within PROBE_BOUND, and no file under the root holding the bad bytes
        (files whose sha256 is a bad blob's) or a bad manifest's marker."""
        self.prober = Prober(self.b.port, self.probes)
        self.addCleanup(self.prober.stop)
        self.prober.start()
        try:
            yield self.prober
        finally:
            self.prober.stop()
        self.assertEqual([e for s in self.servers for e in s.errors], [], "behaviours of the hostile servers failed")
        self.assert_alive()
        p = self.prober
        self.assertGreaterEqual(len(p.rounds), 2, "the prober did not finish two rounds")
        bad_probes = [(name, round(elapsed, 2), got) for name, _, elapsed, got, ok in p.results
                      if not ok or elapsed >= PROBE_BOUND]
        self.assertEqual(bad_probes, [], f"probes wrong or slower than {PROBE_BOUND}s while the upstream misbehaved "
                                         f"({len(p.results)} probes)")
        self.assert_memory_bounded()
        self.assert_not_on_disk(bad, markers)

    def hammer(self, fn, n, workers=None, min_rounds=2, until=None, max_seconds=30):
        """fn(i) for n values of i at once (on `workers` threads); again with the next n values until
        the prober finished min_rounds rounds since the first began (and until() is true). Returns
        every fn's result."""
        assert self.prober is not None, "hammer() belongs inside while_hostile()"
        out, i0, t0 = [], 0, time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(workers or n) as pool:
            while True:
                out += list(pool.map(fn, range(i0, i0 + n)))
                i0 += n
                done = self.prober.rounds_since(t0) >= min_rounds and (until is None or until())
                if done or time.monotonic() - t0 > max_seconds:
                    break
        self.assertGreaterEqual(self.prober.rounds_since(t0), min_rounds,
                                "the prober did not get its rounds in while the hostile pulls ran")
        if until is not None:
            self.assertTrue(until(), f"what the pulls waited for did not happen within {max_seconds}s")
        return out

    def wait_upstream_released(self):
        """Berth closes the upstream connections of the fetches that failed: no behaviour of the
        upstream is still running (holding, trickling, streaming) a while after the answers."""
        try:
            bt.poll(lambda: not self.up.busy(), RELEASE_WITHIN, 0.05, "")
        except AssertionError:
            self.fail(f"berth still holds the upstream connections of failed fetches {RELEASE_WITHIN}s after "
                      f"the answers: {self.up.busy()}")

    # ---- the invariants

    def assert_alive(self):
        self.assertTrue(self.b.alive(), f"berth died: {self.b.stderr()[-3000:]}")

    def assert_memory_bounded(self):
        vm = vm_status(self.b.proc.pid)
        self.assertLess(vm["VmRSS"], RSS_LIMIT, f"berth's RSS is {vm['VmRSS'] >> 20} MiB")
        self.assertLess(vm["VmHWM"], RSS_LIMIT, f"berth's RSS peaked at {vm['VmHWM'] >> 20} MiB")

    def assert_not_on_disk(self, bad=(), markers=()):
        shas = {hashlib.sha256(x).hexdigest(): len(x) for x in bad}
        sizes = set(shas.values())
        needles = [m.encode() for m in markers]
        found = []
        for dirpath, _, files in os.walk(self.b.root):
            for name in files:
                full = os.path.join(dirpath, name)
                try:
                    size = os.path.getsize(full)
                    if size in sizes and bt.file_sha256(full) in shas:
                        found.append((os.path.relpath(full, self.b.root), "bad bytes"))
                    if needles and size < (256 << 20):
                        with open(full, "rb") as f:
                            data = f.read()
                        found += [(os.path.relpath(full, self.b.root), n.decode()) for n in needles if n in data]
                except OSError:
                    continue  # gone meanwhile (a scratch file, a RocksDB file)
        self.assertEqual(found, [], "bad content stored under the root")

    def assert_nothing_cached(self, manifests=(), blobs=()):
        """With the upstream answering 404 to everything, none of these (repo, ref) manifests and
        (repo, digest) blobs is served: a failed fetch kept nothing."""
        self.up.forget()
        for repo, ref in manifests:
            got = self.get_manifest(repo, ref)
            self.assertEqual((got.status, got.codes()), (404, ["MANIFEST_UNKNOWN"]),
                             f"manifest {repo}:{ref} served from the cache after a failed fetch: {got}")
        for repo, digest in blobs:
            got = self.get_blob(repo, digest)
            self.assertEqual((got.status, got.codes()), (404, ["BLOB_UNKNOWN"]),
                             f"blob {repo}@{digest} served from the cache after a failed fetch: {got}")

    def assert_served_when_honest(self, manifests=(), blobs=(), ns=NS):
        """The upstream honest again with (repo, ref, bytes) manifests and (repo, bytes) blobs: each
        is fetched and served right (after a 404 or two while a failed address is skipped)."""
        for repo, ref, data in manifests:
            self.up.add_manifest(repo, ref, data)
        for repo, data in blobs:
            self.up.add_blob(repo, data)
        self.up.clear()

        for repo, ref, data in manifests:
            self.poll_served(lambda: self.get_manifest(repo, ref, ns), data, f"manifest {repo}:{ref}")
        for repo, data in blobs:
            digest = bt.sha256_digest(data)
            self.poll_served(lambda: self.get_blob(repo, digest, ns), data, f"blob {repo}@{digest}")

    def poll_served(self, getter, good, what):
        """Polls getter() until it answers 200 with good (404 meanwhile: an address skipped a moment)."""
        def check():
            got = getter()
            if got.status == 200 and got.complete:
                self.assertEqual(got.body, good, f"{what}: wrong bytes served")
                return True
            self.assertEqual(got.status, 404, f"{what} from an honest upstream: {got}")
            return False
        bt.poll(check, HONEST_WITHIN, 0.1, f"{what} served once the upstream is honest")

    # ---- what a client must see

    def assert_answered(self, got, what=""):
        self.assertIsNotNone(got.status, f"{what}: no answer: {got}")
        self.assertLess(got.elapsed, ANSWER_BOUND, f"{what}: answered after {got.elapsed:.2f}s: {got}")

    def assert_manifest_refused(self, got, what=""):
        self.assert_answered(got, what)
        self.assertEqual((got.status, got.codes()), (404, ["MANIFEST_UNKNOWN"]), f"{what}: {got}")

    def assert_manifest_error(self, got, what=""):
        """Any 4xx/5xx with a spec error body (an upstream's garbage, however it is classified)."""
        self.assert_answered(got, what)
        self.assertTrue(400 <= got.status < 600 and got.codes(), f"{what}: {got}")

    def assert_blob_refused(self, got, what=""):
        """404 BLOB_UNKNOWN, or a 200 whose body ends short: never a whole (wrong) blob."""
        self.assert_answered(got, what)
        if got.status == 200:
            self.assertFalse(got.complete, f"{what}: a whole blob was served: {got}")
        else:
            self.assertEqual((got.status, got.codes()), (404, ["BLOB_UNKNOWN"]), f"{what}: {got}")

    def assert_refused_or_right(self, got, good, kind, what=""):
        """For framing that may be read either way: refused, or exactly the right bytes."""
        if got.status == 200 and got.complete:
            self.assert_answered(got, what)
            self.assertEqual(got.body, good, f"{what}: wrong bytes served")
        elif kind == "manifest":
            self.assert_manifest_refused(got, what)
        else:
            self.assert_blob_refused(got, what)


# --------------------------------------------------------------------------- tests


class TagListTest(HostileCase):
    def test_tag_list_empty_null_or_invalid_with_link(self):
        link = ("Link", '</v2/whatever/tags/list?n=100&last=zzz>; rel="next"')
        variants = {
            # name: (body, expected tags or None for 404 NAME_UNKNOWN, or "either")
            "empty": ({"name": "x", "tags": []}, []),
            "null": ({"name": "x", "tags": None}, []),
            "invalid": ({"name": "x", "tags": [".hidden", "-dash", "a/b", "t" * 129, "", "sp ace", "caf\u00e9",
                                               "nul\u0000", "..", "x" * 5000]}, []),
            "missing": ({"name": "x"}, []),
            "partial": ({"name": "x", "tags": ["v1", ".bad", "v2", "-x"]}, ["v1", "v2"]),
            "types": ({"name": "x", "tags": [1, {}, None, [], True, 2.5]}, "either"),
            "string": ({"name": "x", "tags": "v1"}, "either"),
            "notjson": (b"<html>no tags here</html>", None),
            "array": (b'["v1", "v2"]', None),
            "evil-link": ({"name": "x", "tags": ["a"]}, ["a"]),
        }
        for name, (body, _) in variants.items():
            headers = [link] if name != "evil-link" else [("Link", '<http://169.254.169.254/v2/x/tags/list?last=a>; '
                                                                   'rel="next"')]
            self.up.on(rf"^/v2/library/tags-{name}/tags/list$", hu.json_answer(body, headers=headers))
        names = sorted(variants)

        def pull(i):
            name = names[i % len(names)]
            got = self.get_tags(f"library/tags-{name}", "&n=50")
            expected, what = variants[name][1], f"tag list {name}"
            self.assert_answered(got, what)
            if expected is None or (expected == "either" and got.status == 404):
                self.assertEqual((got.status, got.codes()), (404, ["NAME_UNKNOWN"]), f"{what}: {got}")
                return got
            self.assertEqual(got.status, 200, f"{what}: {got}")
            self.assertEqual(got.json()["tags"], [] if expected == "either" else expected, f"{what}: {got}")
            link_header = got.header("link")
            if not got.json()["tags"]:
                self.assertIsNone(link_header, f"{what}: a Link on an empty page")
            if link_header is not None:
                self.assertTrue(link_header.startswith(f"</v2/{NS}/library/tags-{name}/tags/list?"), link_header)
                self.assertNotIn("169.254", link_header)
            return got
        with self.while_hostile():
            self.hammer(pull, 2 * len(names), workers=10)
        # nothing of it stays: an honest upstream's list is what is served next
        self.up.add_tags("library/tags-empty", ["a", "b"])
        self.up.clear()
        got = self.get_tags("library/tags-empty")
        self.assertEqual((got.status, got.json() and got.json()["tags"]), (200, ["a", "b"]), got)

    def follow(self, repo, query, max_pages=50):
        """GETs a tag list and every Link after it; returns (pages, tags)."""
        path, pages, tags = f"/v2/{repo}/tags/list?ns={NS}{query}", 0, []
        while path and pages < max_pages:
            got = fetch(self.b.port, path)
            self.assert_answered(got, f"page {pages + 1} of {repo}")
            self.assertEqual(got.status, 200, got)
            pages += 1
            tags += got.json()["tags"]
            link = got.header("link")
            path = re.match(r"<([^>]+)>", link).group(1) if link else None
        return pages, tags

    def test_tag_list_ignoring_last_terminates(self):
        page = ("Link", '</v2/x/tags/list?n=2&last=e>; rel="next"')
        self.up.on(r"^/v2/library/sorted-\d+/tags/list$",
                   hu.json_answer({"name": "x", "tags": ["a", "b", "c", "d", "e"]}, headers=[page]))
        self.up.on(r"^/v2/library/unsorted-\d+/tags/list$",
                   hu.json_answer({"name": "x", "tags": ["e", "d", "c", "b", "a", "a", "e"]}, headers=[page]))

        def client(i):
            kind = ("sorted", "unsorted")[i % 2]
            for query in ("&n=2", "&n=3", ""):
                pages, tags = self.follow(f"library/{kind}-{i}", query)
                self.assertLessEqual(pages, 6, f"{kind}{query}: a client paged {pages} times through 5 tags")
                self.assertEqual(len(tags), len(set(tags)), f"{kind}{query}: a tag listed twice: {tags}")
                self.assertLessEqual(set(tags), set("abcde"))
                if kind == "sorted":
                    self.assertEqual(tags, list("abcde"), f"{kind}{query}")
            return pages
        with self.while_hostile():
            self.hammer(client, 8)

    def test_tag_list_nested_huge_and_endless(self):
        huge_tags = [f"t{i:07d}" for i in range(360_000)]  # about 4 MB, under the 4 MiB bound
        huge = json.dumps({"name": "x", "tags": huge_tags}, separators=(",", ":")).encode()
        self.assertLess(len(huge), 4 << 20)
        self.up.on(r"^/v2/library/nested-\d+/tags/list$", hu.json_answer(NESTED))
        self.up.on(r"^/v2/library/objects-\d+/tags/list$", hu.json_answer(b'{"tags":' * 500_000))
        self.up.on(r"^/v2/library/huge-\d+/tags/list$", hu.json_answer(huge))
        self.up.on(r"^/v2/library/endless-\d+/tags/list$", hu.firehose(
            hu.head_bytes(200, [("Content-Type", "application/json"), ("Connection", "close")]) +
            b'{"name":"x","tags":["', b't0000000","'))
        self.up.on(r"^/v2/library/silent-\d+/tags/list$", hu.silent())
        self.up.on(r"^/v2/library/trickle-\d+/tags/list$", hu.trickle_body(
            200, [("Content-Type", "application/json"), ("Content-Length", len(huge))], huge, 0.2, chunk=100))
        kinds = ("nested", "nested", "objects", "huge", "nested", "nested", "objects", "endless", "silent", "trickle")

        def pull(i):
            kind = kinds[i % len(kinds)]
            # the ones that time out on twin.test, whose address they make skipped
            got = self.get_tags(f"library/{kind}-{i}", "&n=100", ns=TWIN if kind in ("silent", "trickle") else NS)
            self.assert_answered(got, kind)
            if kind == "huge":
                self.assertEqual(got.status, 200, got)
                self.assertEqual(got.json()["tags"], huge_tags[:100])
            else:
                self.assertEqual((got.status, got.codes()), (404, ["NAME_UNKNOWN"]), f"{kind}: {got}")
            return got
        with self.while_hostile():
            self.hammer(pull, 2 * len(kinds))
            self.wait_upstream_released()


class ManifestTest(HostileCase):
    def test_nested_and_costly_manifests(self):
        objects = b'{"a":' * 800_000
        wide = b'{"schemaVersion":2,"mediaType":"' + bt.OCI_MANIFEST.encode() + b'","layers":[' + \
            b"{}," * 1_300_000 + b"{}]}"
        variants = [
            ("nested json", NESTED, "application/json", None),
            ("nested oci", NESTED, bt.OCI_MANIFEST, None),
            ("nested docker claimed", NESTED, DOCKER_MANIFEST, bt.sha256_digest(NESTED)),
            ("nested objects", objects, bt.OCI_MANIFEST, None),
            ("wide", wide, bt.OCI_MANIFEST, None),
        ]
        for k, (_, body, media_type, claim) in enumerate(variants):
            self.up.on(rf"^/v2/library/doc{k}-\d+/manifests/", hu.manifest_answer(body, media_type, claim))

        def pull(i):
            k = i % len(variants)
            name, body = variants[k][0], variants[k][1]
            ref = bt.sha256_digest(body) if i % 3 == 0 else f"v{i}"  # by digest too
            got = self.get_manifest(f"library/doc{k}-{i}", ref)
            self.assert_manifest_error(got, f"{name} by {ref}")
            return (f"library/doc{k}-{i}", ref, got.status)
        with self.while_hostile(bad=[NESTED, objects, wide]):
            pulled = self.hammer(pull, 10)
        self.assert_nothing_cached(manifests=[(r, ref) for r, ref, _ in pulled[:10]] +
                                   [("library/doc0-0", bt.sha256_digest(NESTED))])
        good = image_manifest(new_marker("honest"))
        self.assert_served_when_honest(manifests=[("library/doc0-0", "v0", good)])

    @configure(upstream={"check_interval_seconds": 1})
    def test_cached_tags_stay_served(self):
        """A cached tag due for its check while the upstream misbehaves is served as it is ("stale")."""
        wide = b'{"schemaVersion":2,"layers":[' + b"{}," * 1_300_000 + b"{}]}"
        other = image_manifest(new_marker())
        kinds = {  # kind: (ns, behaviour); the ones that time out on twin.test, whose address they make skipped
            "nested": (NS, hu.manifest_answer(NESTED)),
            "costly": (NS, hu.manifest_answer(wide)),
            "not-json": (NS, hu.manifest_answer(b"<html>maintenance</html>")),
            "not-a-manifest": (NS, hu.manifest_answer(b'{"schemaVersion":2,"layers":"none"}')),
            "403": (NS, hu.respond(403, hu.error_body("DENIED"))),
            "lying": (NS, hu.manifest_answer(other, digest="sha256:" + "1" * 64)),
            "oversize": (NS, hu.manifest_answer(image_manifest(new_marker(), pad=5 << 20))),
            "5xx": (NS, hu.respond(503, b"{}")),
            "garbage": (NS, hu.raw(b"SPLAT\r\n\r\n")),
            "silent": (TWIN, hu.silent()),
            "trickle": (TWIN, hu.trickle(hu.head_bytes(200, [("Content-Length", 2)]) + b"{}", 0.3)),
        }
        good = {}
        for kind, (ns, _) in kinds.items():
            good[kind] = image_manifest(new_marker("honest"))
            self.up.add_manifest(f"library/stale-{kind}", "v1", good[kind])
            self.assertEqual(self.get_manifest(f"library/stale-{kind}", "v1", ns).body, good[kind])
        seen = len(self.up.received())
        for kind, (_, behaviour) in kinds.items():
            self.up.on(rf"^/v2/library/stale-{kind}/manifests/", behaviour)
        names = sorted(kinds)

        def pull(i):
            kind = names[i % len(names)]
            got = self.get_manifest(f"library/stale-{kind}", "v1", kinds[kind][0])
            self.assert_answered(got, f"cached tag, upstream {kind}")
            self.assertEqual((got.status, got.body), (200, good[kind]), f"cached tag, upstream {kind}: {got}")
            return got

        def all_checked():  # every kind's tag was asked upstream again (and those answers asserted)
            asked = {r.path.split("/")[3] for r in self.up.received()[seen:]}
            return all(f"stale-{kind}" in asked for kind in kinds)
        with self.while_hostile(bad=[NESTED, wide], markers=[json.loads(other)["annotations"]["test.marker"]]):
            self.hammer(pull, len(names), until=all_checked)
            self.wait_upstream_released()

    def test_silent_manifest(self):
        self.up.on(r"/manifests/", hu.silent())

        def pull(i):
            got = self.get_manifest(f"library/silent-{i}", "v1")
            self.assert_manifest_refused(got, f"silent {i}")
            return got
        with self.while_hostile():
            gots = self.hammer(pull, 16)
            self.wait_upstream_released()
        self.assertGreaterEqual(len(self.up.received(contains="/manifests/v1")), 1, "the upstream was never asked")
        self.assert_nothing_cached(manifests=[(f"library/silent-{i}", "v1") for i in range(len(gots))])
        self.assert_served_when_honest(manifests=[("library/silent-0", "v1", image_manifest(new_marker("honest")))])

    def test_trickling_manifest(self):
        manifests = {}

        def trickled(kind, interval):
            def choose(req):
                data = manifests[req.path.split("/")[3]]
                head = hu.head_bytes(200, [("Content-Type", bt.OCI_MANIFEST), ("Content-Length", len(data))])
                if kind == "body":  # the head at once, the body a byte at a time
                    return hu.trickle_body(200, [("Content-Type", bt.OCI_MANIFEST), ("Content-Length", len(data))],
                                           data, interval)
                if kind == "head":  # the head itself a byte at a time
                    return hu.trickle(head + data, interval)
                return hu.trickle_body(200, [("Content-Type", bt.OCI_MANIFEST), ("Transfer-Encoding", "chunked")],
                                       chunked(data, 1), interval, chunk=6)  # one-byte chunks
            return hu.dispatch(choose)
        kinds = [("body", 0.3), ("body", 1.5), ("head", 0.2), ("chunks", 0.3)]
        for k, (kind, interval) in enumerate(kinds):
            self.up.on(rf"^/v2/library/trickle{k}-\d+/manifests/", trickled(kind, interval))
        markers = []

        def pull(i):
            k = i % len(kinds)
            marker = new_marker("trickled")
            markers.append(marker)
            repo = f"trickle{k}-{i}"
            manifests[repo] = image_manifest(marker)
            got = self.get_manifest(f"library/{repo}", "v1")
            self.assert_manifest_refused(got, f"trickle {kinds[k]}")
            return f"library/{repo}"
        with self.while_hostile(markers=markers):
            repos = self.hammer(pull, 16)
            self.wait_upstream_released()
        self.assert_nothing_cached(manifests=[(r, "v1") for r in repos] +
                                   [(r, bt.sha256_digest(manifests[r.split("/")[1]])) for r in repos])
        self.assert_served_when_honest(manifests=[(repos[0], "v1", manifests[repos[0].split("/")[1]])])

    def test_wrong_digest_and_lying_lengths(self):
        good, bad = {}, {}
        markers = []

        def variant(k, req):
            repo = req.path.split("/")[3]
            g, b = good[repo], bad[repo]
            ct = ("Content-Type", bt.OCI_MANIFEST)
            return [
                hu.manifest_answer(b, digest=bt.sha256_digest(g)),  # by digest: other bytes, a lying claim
                hu.manifest_answer(b),  # by digest: other bytes, no claim
                hu.manifest_answer(b, digest=bt.sha256_digest(g)),  # by tag: bytes not matching the claim
                hu.raw(hu.head_bytes(200, [ct, ("Content-Length", len(g) + 100)]) + g),  # longer, then closed
                hu.raw(hu.head_bytes(200, [ct, ("Content-Length", len(g) + 100)]) + g, then="hold"),  # ... held
                hu.raw(hu.head_bytes(200, [ct, ("Content-Length", len(g) - 10),
                                           ("Docker-Content-Digest", bt.sha256_digest(g))]) + g),  # shorter
                hu.manifest_answer(g, digest="sha256:" + "0" * 64),  # right bytes, another digest claimed
            ][k]
        count = 7
        for k in range(count):
            self.up.on(rf"^/v2/library/lie{k}-\d+/manifests/", hu.dispatch(lambda req, k=k: variant(k, req)))
        by_tag = {2, 3, 6}

        def pull(i):
            k = i % count
            repo = f"lie{k}-{i}"
            marker = new_marker()
            markers.append(marker)
            good[repo], bad[repo] = image_manifest(new_marker("honest")), image_manifest(marker)
            ref = "v1" if k in by_tag else bt.sha256_digest(good[repo])
            got = self.get_manifest(f"library/{repo}", ref)
            self.assert_manifest_refused(got, f"lie {k} by {ref}")
            return f"library/{repo}", ref
        with self.while_hostile(markers=markers):
            pulled = self.hammer(pull, 14)
            self.wait_upstream_released()
        self.assert_nothing_cached(manifests=pulled + [(r, bt.sha256_digest(bad[r.split("/")[1]])) for r, _ in pulled])
        repo0, repo2 = pulled[0][0], pulled[2][0]
        self.assert_served_when_honest(manifests=[(repo0, pulled[0][1], good[repo0.split("/")[1]]),
                                                  (repo2, "v1", good[repo2.split("/")[1]])])

    @configure(limits={"max_manifest_bytes": 65536})
    def test_oversize_manifest(self):
        big = {}
        markers = []

        def variant(k, req):
            data = big[req.path.split("/")[3]]
            ct = ("Content-Type", bt.OCI_MANIFEST)
            return [
                hu.manifest_answer(data),
                hu.raw(hu.head_bytes(200, [ct, ("Transfer-Encoding", "chunked")]) + chunked(data, 8192)),
                hu.raw(hu.head_bytes(200, [ct, ("Connection", "close")]) + data),  # delimited by the close
                hu.firehose(hu.head_bytes(200, [ct, ("Connection", "close")]) + b'{"a":"', b"x"),  # endless
                hu.firehose(hu.head_bytes(200, [ct, ("Transfer-Encoding", "chunked")]), b"1000\r\n" + b" " * 4096 +
                            b"\r\n"),  # endless chunks
                hu.manifest_answer(data, digest=bt.sha256_digest(data)),
            ][k]
        count = 6
        for k in range(count):
            self.up.on(rf"^/v2/library/big{k}-\d+/manifests/", hu.dispatch(lambda req, k=k: variant(k, req)))

        def pull(i):
            k = i % count
            repo = f"big{k}-{i}"
            marker = new_marker()
            markers.append(marker)
            big[repo] = image_manifest(marker, pad=1 << 20)
            ref = bt.sha256_digest(big[repo]) if k == 5 else "v1"
            got = self.get_manifest(f"library/{repo}", ref)
            self.assert_manifest_refused(got, f"oversize {k}")
            return f"library/{repo}", ref
        with self.while_hostile(markers=markers):
            pulled = self.hammer(pull, 12)
            self.wait_upstream_released()
        self.assert_nothing_cached(manifests=pulled)
        # one just under the limit is fetched
        self.assert_served_when_honest(manifests=[(pulled[0][0], "v1", image_manifest(new_marker("honest"),
                                                                                      pad=60000))])

    def test_huge_headers(self):
        good = {}

        def variant(k, req):
            data = good[req.path.split("/")[3]]
            ok_head = [("Content-Type", bt.OCI_MANIFEST), ("Content-Length", len(data))]
            return [
                hu.raw(hu.head_bytes(200, ok_head + [("X-Pad", "a" * 100_000)]) + data),
                hu.raw(hu.head_bytes(200, ok_head + [(f"X-H{j}", "v") for j in range(12_000)]) + data),
                hu.firehose(b"HTTP/1.1 200 OK\r\n", b"X-More: yes\r\n"),
                hu.firehose(b"HTTP/1.1 200 OK\r\nX-Long: ", b"a"),
                hu.firehose(b"HTTP/1.1 200 OK\r\n", b"X-Slow: yes\r\n", pause=0.05),
                hu.raw(b"HTTP/1.1 200 " + b"R" * 100_000 + b"\r\nContent-Length: 2\r\n\r\n{}"),
            ][k]
        count = 6
        for k in range(count):
            self.up.on(rf"^/v2/library/hdr{k}-\d+/(manifests|blobs)/", hu.dispatch(lambda req, k=k: variant(k, req)))
        blobs = {}

        def pull(i):
            k = i % count
            repo = f"hdr{k}-{i}"
            good[repo] = image_manifest(new_marker("honest"))
            blobs[repo] = os.urandom(3000)
            got = self.get_manifest(f"library/{repo}", bt.sha256_digest(good[repo]))
            self.assert_manifest_refused(got, f"headers {k}")
            got = self.get_blob(f"library/{repo}", bt.sha256_digest(blobs[repo]))
            self.assert_blob_refused(got, f"headers {k}, blob")
            return repo
        with self.while_hostile():
            repos = self.hammer(pull, 12)
            self.wait_upstream_released()
        self.assert_nothing_cached(manifests=[(f"library/{r}", bt.sha256_digest(good[r])) for r in repos],
                                   blobs=[(f"library/{r}", bt.sha256_digest(blobs[r])) for r in repos])
        r = repos[0]
        self.assert_served_when_honest(manifests=[(f"library/{r}", bt.sha256_digest(good[r]), good[r])],
                                       blobs=[(f"library/{r}", blobs[r])])

    def test_malformed_http(self):
        content = {}

        def variants(body, ctype):
            n = len(body)
            ok = [("Content-Type", ctype)]
            te = ok + [("Transfer-Encoding", "chunked")]
            H = hu.head_bytes
            # (name, behaviour, strict: must be refused; else refused or exactly right)
            return [
                ("garbage status line", hu.raw(b"SPLAT " + os.urandom(16).hex().encode() + b"\r\n\r\n"), True),
                ("non-numeric status", hu.raw(b"HTTP/1.1 2x0 OK\r\nContent-Length: %d\r\n\r\n" % n + body), True),
                ("status 999", hu.raw(b"HTTP/1.1 999 Odd\r\nContent-Length: %d\r\n\r\n" % n + body), True),
                ("closed mid-header", hu.raw(b"HTTP/1.1 200 OK\r\nContent-Type: appl"), True),
                ("reset mid-header", hu.raw(b"HTTP/1.1 200 OK\r\nContent-Le", then="reset"), True),
                ("reset at once", hu.reset(), True),
                ("closed at once", hu.raw(b""), True),
                ("HTTP/0.9 body only", hu.raw(body), True),
                ("non-hex chunk size", hu.raw(H(200, te) + b"zz\r\n" + body + b"\r\n0\r\n\r\n"), True),
                ("negative chunk size", hu.raw(H(200, te) + b"-5\r\n" + body + b"\r\n0\r\n\r\n"), True),
                ("overflowing chunk size", hu.raw(H(200, te) + b"1" + b"0" * 40 + b"\r\n" + body), True),
                ("chunk longer than its data", hu.raw(H(200, te) + b"%x\r\n" % (n + 1000) + body), True),
                ("chunk without its CRLF", hu.raw(H(200, te) + b"%x\r\n" % n + body + b"XX0\r\n\r\n"), True),
                ("endless 100 Continue", hu.firehose(b"", b"HTTP/1.1 100 Continue\r\n\r\n"), True),
                ("negative Content-Length", hu.raw(H(200, ok + [("Content-Length", -1)]) + body), True),
                ("overflowing Content-Length", hu.raw(H(200, ok + [("Content-Length", "9" * 30)]) + body), True),
                ("two Content-Lengths", hu.raw(H(200, ok + [("Content-Length", n), ("Content-Length", n + 5)]) + body),
                 False),
                ("Content-Length and chunked", hu.raw(H(200, te + [("Content-Length", n + 7)]) + chunked(body)), False),
                ("bare LF", hu.raw(f"HTTP/1.1 200 OK\nContent-Type: {ctype}\nContent-Length: {n}\n\n".encode() + body),
                 False),
                ("NUL in a header", hu.raw(H(200, ok + [("Content-Length", n), ("X-A", "a\x00b")]) + body), False),
                ("folded header", hu.raw(b"HTTP/1.1 200 OK\r\nX-F: a\r\n  b\r\nContent-Length: %d\r\n\r\n" % n + body),
                 False),
            ]
        names = [name for name, _, _ in variants(b"x", "y")]

        def choose(req):
            m = re.match(r"^/v2/library/mal(\d+)-(\d+)/(manifests|blobs)/", req.path)
            body = content[(f"mal{m.group(1)}-{m.group(2)}", m.group(3))]
            ctype = bt.OCI_MANIFEST if m.group(3) == "manifests" else "application/octet-stream"
            return variants(body, ctype)[int(m.group(1))][1]
        self.up.on(r"^/v2/library/mal\d+-\d+/", hu.dispatch(choose))

        def pull(i):
            k = i % len(names)
            repo = f"mal{k}-{i}"
            manifest, blob = image_manifest(new_marker("honest")), os.urandom(2500)
            content[(repo, "manifests")], content[(repo, "blobs")] = manifest, blob
            strict = variants(b"x", "y")[k][2]
            got = self.get_manifest(f"library/{repo}", bt.sha256_digest(manifest))
            if strict:
                self.assert_manifest_refused(got, names[k])
            else:
                self.assert_refused_or_right(got, manifest, "manifest", names[k])
            got = self.get_blob(f"library/{repo}", bt.sha256_digest(blob))
            if strict:
                self.assert_blob_refused(got, names[k] + ", blob")
            else:
                self.assert_refused_or_right(got, blob, "blob", names[k] + ", blob")
            return repo
        with self.while_hostile():
            repos = self.hammer(pull, len(names), workers=12)
            self.wait_upstream_released()
        strict = [r for r in repos if variants(b"x", "y")[int(r[3:].split("-")[0])][2]]
        self.assert_nothing_cached(
            manifests=[(f"library/{r}", bt.sha256_digest(content[(r, "manifests")])) for r in strict],
            blobs=[(f"library/{r}", bt.sha256_digest(content[(r, "blobs")])) for r in strict])
        r = strict[0]
        self.assert_served_when_honest(
            manifests=[(f"library/{r}", bt.sha256_digest(content[(r, "manifests")]), content[(r, "manifests")])],
            blobs=[(f"library/{r}", content[(r, "blobs")])])


    def test_endless_chunk_framing(self):
        """A chunk-size line, a chunk extension or trailers that never end, for manifests and tag lists
        (the upstream stops after 64 MiB: berth should have stopped reading long before)."""
        head = hu.head_bytes(200, [("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")])
        kinds = [("chunk size", hu.firehose(head + b"1", b"0", limit=64 << 20)),
                 ("chunk extension", hu.firehose(head + b"1;", b"a", limit=64 << 20)),
                 ("trailers", hu.firehose(head + b"1\r\n{\r\n0\r\n", b"X-Trailer: y\r\n", limit=64 << 20))]
        for k, (_, behaviour) in enumerate(kinds):
            self.up.on(rf"^/v2/library/endless{k}-\d+/(manifests/|tags/list)", behaviour)

        def pull(i):
            k = i % len(kinds)
            repo, what = f"library/endless{k}-{i}", f"endless {kinds[k][0]}"
            if i % 2:
                self.assert_manifest_refused(self.get_manifest(repo, "v1"), what)
            else:
                got = self.get_tags(repo)
                self.assert_answered(got, what + ", tag list")
                self.assertEqual((got.status, got.codes()), (404, ["NAME_UNKNOWN"]), f"{what}, tag list: {got}")
            return repo
        with self.while_hostile():
            repos = self.hammer(pull, 6)
            self.wait_upstream_released()
        # A bounded reader gives up on one line after kilobytes; the socket buffers hold a few MiB.
        read = sorted(r.sent or 0 for r in self.up.received(contains="/library/endless"))
        self.assertLess(read[-1], 16 << 20, f"berth read {read[-1] >> 20} MiB of one endless chunk line or trailer "
                                            f"(bytes the upstream got written, per request: {read})")
        self.assert_served_when_honest(manifests=[(repos[1], "v1", image_manifest(new_marker("honest")))])


class BlobTest(HostileCase):
    def test_silent_blob(self):
        self.up.on(r"/blobs/", hu.silent())
        blobs = {}

        def pull(i):
            data = os.urandom(4000)
            blobs[i] = data
            got = self.get_blob(f"library/silent-{i}", bt.sha256_digest(data))
            self.assert_blob_refused(got, f"silent {i}")
            return i
        shared = os.urandom(5000)
        shared_digest = bt.sha256_digest(shared)
        start = threading.Barrier(16)

        def same(i):
            start.wait(10)
            got = self.get_blob("library/shared", shared_digest, ns=TWIN)
            self.assert_blob_refused(got, "silent, one blob for sixteen clients")
            return got
        with self.while_hostile(bad=[]):
            # sixteen clients missing one blob: one upstream request (twin.test: not yet skipped)
            self.hammer(same, 16, min_rounds=0)
            asked = len(self.up.received(contains=shared_digest))
            self.assertGreaterEqual(asked, 1, "the upstream was never asked for the shared blob")
            self.assertLessEqual(asked, 2, f"sixteen concurrent misses of one blob made {asked} upstream requests")
            done = self.hammer(pull, 16)
            self.wait_upstream_released()
        self.assertNotIn(shared_digest.split(":")[1], bt.blob_files(self.b.root))
        self.assert_nothing_cached(blobs=[(f"library/silent-{i}", bt.sha256_digest(blobs[i])) for i in done])
        self.assert_served_when_honest(blobs=[("library/silent-0", blobs[0])])

    def test_trickling_blob(self):
        blobs = {}

        def variant(k, req):
            data = blobs[req.path.split("/")[3]]
            head = [("Content-Type", "application/octet-stream"), ("Content-Length", len(data))]
            return [
                hu.trickle_body(200, head, data, 0.3),  # a byte at a time
                hu.trickle_body(200, head, data, 1.5),  # slower than the idle timeout
                hu.trickle(hu.head_bytes(200, head) + data, 0.2),  # the head a byte at a time
                hu.raw(hu.head_bytes(200, head) + data[:len(data) // 2], then="hold"),  # half, then nothing
            ][k]
        count = 4
        for k in range(count):
            self.up.on(rf"^/v2/library/trickle{k}-\d+/blobs/", hu.dispatch(lambda req, k=k: variant(k, req)))

        def pull(i):
            k = i % count
            repo = f"trickle{k}-{i}"
            blobs[repo] = os.urandom(65536)
            got = self.get_blob(f"library/{repo}", bt.sha256_digest(blobs[repo]))
            self.assert_blob_refused(got, f"trickle {k}")
            return repo
        with self.while_hostile():
            repos = self.hammer(pull, 16)
            self.wait_upstream_released()
        stored = bt.blob_files(self.b.root)
        self.assertEqual([r for r in repos if bt.sha256_digest(blobs[r]).split(":")[1] in stored], [],
                         "a blob whose fetch was cut was stored")
        self.assert_nothing_cached(blobs=[(f"library/{r}", bt.sha256_digest(blobs[r])) for r in repos])
        self.assert_served_when_honest(blobs=[(f"library/{repos[0]}", blobs[repos[0]])])

    @configure(upstream={"min_bytes_per_second": 20000})
    def test_blob_below_min_bytes_per_second(self):
        slow, steady = {}, {}
        head = [("Content-Type", "application/octet-stream"), ("Content-Length", 100_000)]
        self.up.on(r"^/v2/library/slow-\d+/blobs/",
                   hu.dispatch(lambda req: hu.trickle_body(200, head, slow[req.path.split("/")[3]], 0.2, chunk=1000)))
        self.up.on(r"^/v2/library/steady-\d+/blobs/",
                   hu.dispatch(lambda req: hu.trickle_body(200, head, steady[req.path.split("/")[3]], 0.1, chunk=5000)))

        def pull(i):
            kind = ("slow", "steady")[i % 2]
            repo, data = f"{kind}-{i}", os.urandom(100_000)
            (slow if kind == "slow" else steady)[repo] = data
            got = self.get_blob(f"library/{repo}", bt.sha256_digest(data))
            if kind == "slow":  # 5 kB/s: cut once the first fetch_timeout is over
                self.assert_blob_refused(got, "5 kB/s")
            else:  # 50 kB/s: slower than the first fetch_timeout allows, above min_bytes_per_second
                self.assertEqual((got.status, got.complete), (200, True), f"50 kB/s: {got}")
                self.assertEqual(got.body, data)
            return repo
        with self.while_hostile():
            repos = self.hammer(pull, 8)
            self.wait_upstream_released()
        stored = bt.blob_files(self.b.root)
        for r in repos:
            data = (slow if r.startswith("slow") else steady)[r]
            self.assertEqual(bt.sha256_digest(data).split(":")[1] in stored, r.startswith("steady"), r)
        self.assert_nothing_cached(blobs=[(f"library/{r}", bt.sha256_digest(slow[r])) for r in repos if r in slow])
        r = next(r for r in repos if r in slow)
        self.assert_served_when_honest(blobs=[(f"library/{r}", slow[r])])

    @configure(limits={"max_blob_bytes": 1 << 20})
    def test_wrong_digest_and_lying_lengths(self):
        good, bad = {}, {}

        def variant(k, req):
            repo = req.path.split("/")[3]
            g, b = good[repo], bad[repo]
            ct = ("Content-Type", "application/octet-stream")
            n = len(g)
            return [
                hu.respond(200, b, [ct]),  # other bytes, same length
                hu.respond(200, b[:n // 2], [ct]),  # other bytes, other length
                hu.raw(hu.head_bytes(200, [ct, ("Content-Length", n + 100)]) + g),  # longer, then closed
                hu.raw(hu.head_bytes(200, [ct, ("Content-Length", n + 100)]) + g, then="hold"),  # ... then held
                hu.raw(hu.head_bytes(200, [ct, ("Content-Length", n - 100)]) + g),  # shorter than the body
                hu.raw(hu.head_bytes(200, [ct, ("Transfer-Encoding", "chunked")]) + chunked(g)),  # no length
                hu.raw(hu.head_bytes(200, [ct, ("Connection", "close")]) + g),  # delimited by the close
                hu.raw(hu.head_bytes(200, [ct, ("Content-Length", 1 << 40)]) + g),  # a terabyte
                hu.firehose(hu.head_bytes(200, [ct, ("Content-Length", 2 << 20)]), b"z"),  # over max_blob_bytes
                hu.respond(206, g, [ct, ("Content-Range", f"bytes 0-{n - 1}/{n}")]),  # partial content
                hu.respond(200, b, [ct, ("Content-Encoding", "gzip")]),  # "encoded"
                hu.firehose(hu.head_bytes(200, [ct, ("Content-Length", 900_000)]), os.urandom(4096),
                            limit=900_000 + len(hu.head_bytes(200, [ct, ("Content-Length", 900_000)]))),  # random
            ][k]
        count = 12
        for k in range(count):
            self.up.on(rf"^/v2/library/blie{k}-\d+/blobs/", hu.dispatch(lambda req, k=k: variant(k, req)))

        def pull(i):
            k = i % count
            repo = f"blie{k}-{i}"
            good[repo], bad[repo] = os.urandom(50_000), os.urandom(50_000)
            got = self.get_blob(f"library/{repo}", bt.sha256_digest(good[repo]))
            self.assert_blob_refused(got, f"blob lie {k}")
            self.assertFalse(got.body == bad[repo] or got.body == bad[repo][:25_000], f"blob lie {k}: bad bytes served")
            return repo
        with self.while_hostile(bad=list(bad.values())):
            repos = self.hammer(pull, 12)
            self.wait_upstream_released()
        self.assert_not_on_disk(bad=[bad[r] for r in repos] + [bad[r][:25_000] for r in repos])
        self.assert_nothing_cached(blobs=[(f"library/{r}", bt.sha256_digest(good[r])) for r in repos])
        self.assert_served_when_honest(blobs=[(f"library/{repos[0]}", good[repos[0]])])


class RedirectTest(HostileCase):
    def before_berth(self):
        self.silent_host = self.server(name="silent")
        self.silent_host.on(r".*", hu.silent())
        self.cdn = self.server(name="cdn")

    def test_hostile_redirects(self):
        good = {}
        cdn, silent = self.cdn.url, self.silent_host.url

        def variant(k, req):
            path = req.path
            hop = int(req.q("hop", "0"))
            return [
                hu.redirect(path),  # to itself, forever
                hu.redirect(f"{path}?hop={hop + 1}"),  # ever further
                hu.redirect(lambda r: f"{self.up.url}{path}?hop={1 - hop}"),  # ping-pong, absolute
                hu.redirect(f"{cdn}{path}?hop=0"),  # a 7-hop chain on the cdn (below)
                hu.redirect("ftp://127.0.0.1/blob"),
                hu.redirect("file:///etc/passwd"),
                hu.redirect("javascript:alert(1)"),
                hu.redirect("http://"),
                hu.redirect("http://127.0.0.1:0/x"),
                hu.redirect("http://[::1"),
                hu.redirect(""),
                hu.redirect("../elsewhere"),
                hu.redirect(f"{silent}/v2/x"),  # to a host that never answers
                hu.redirect("/" + "l" * 100_000),  # a Location over the head limit
                hu.redirect(f"http://user:pw@127.0.0.1:{self.cdn.port}/x"),
            ][k]
        count = 15
        for k in range(count):
            self.up.on(rf"^/v2/library/redir{k}-\d+/", hu.dispatch(lambda req, k=k: variant(k, req)))
        # the cdn: seven hops before the content (berth follows five)
        self.cdn.on(r".*", hu.dispatch(lambda req: hu.redirect(f"{req.path}?hop={int(req.q('hop', '0')) + 1}")
                                       if int(req.q("hop", "0")) < 7 else self.cdn.honest))

        def pull(i):
            k = i % count
            repo = f"redir{k}-{i}"
            manifest, blob = image_manifest(new_marker("honest")), os.urandom(3000)
            good[repo] = (manifest, blob)
            self.cdn.add_manifest(f"library/{repo}", bt.sha256_digest(manifest), manifest)
            self.cdn.add_blob(f"library/{repo}", blob)
            got = self.get_manifest(f"library/{repo}", bt.sha256_digest(manifest))
            self.assert_manifest_refused(got, f"redirect {k}")
            got = self.get_blob(f"library/{repo}", bt.sha256_digest(blob))
            self.assert_blob_refused(got, f"redirect {k}, blob")
            return repo
        with self.while_hostile():
            repos = self.hammer(pull, count)
            self.wait_upstream_released()
        loops = self.up.received(contains="/library/redir0-")
        self.assertLessEqual(len(loops), 2 * 6 * (len(repos) // count + 1), "a redirect loop was followed too far")
        self.assert_nothing_cached(manifests=[(f"library/{r}", bt.sha256_digest(good[r][0])) for r in repos],
                                   blobs=[(f"library/{r}", bt.sha256_digest(good[r][1])) for r in repos])
        # one hop to the cdn is followed: what was refused above was refused for its redirects
        self.up.on(r"^/v2/library/control/", hu.dispatch(lambda req: hu.redirect(f"{cdn}{req.path}")))
        self.cdn.clear()
        manifest, blob = image_manifest(new_marker("honest")), os.urandom(3000)
        self.cdn.add_manifest("library/control", "v1", manifest)
        self.cdn.add_blob("library/control", blob)
        self.poll_served(lambda: self.get_manifest("library/control", "v1"), manifest, "manifest behind a redirect")
        self.poll_served(lambda: self.get_blob("library/control", bt.sha256_digest(blob)), blob, "blob behind a redirect")

    @configure(upstream=lambda t: {"username": "mirror", "password_file": t.password_file()})
    def test_redirect_never_carries_authorization(self):
        img = bt.make_image((3000, 4000))
        self.cdn.add_image("library/app", "v1", img)
        # the registry wants Basic credentials, then sends every blob to the cdn
        self.up.on(r"/blobs/", hu.basic_protected(hu.dispatch(
            lambda req: hu.redirect(f"{self.cdn.url}{req.path}", status=307))))
        self.up.on(r"/manifests/", hu.basic_protected(hu.dispatch(lambda req: self.cdn.honest)))

        def pull(i):
            got = self.get_manifest("library/app", "v1", timeout=10)
            self.assertEqual((got.status, got.body), (200, img["manifest"]), got)
            for digest, data in img["blobs"].items():
                got = self.get_blob("library/app", digest)
                self.assertEqual((got.status, got.complete, got.body), (200, True, data), f"blob {digest}: {got}")
            return got
        with self.while_hostile():
            self.hammer(pull, 4)
        creds = "Basic " + base64.b64encode(b"mirror:mirror-pw").decode()
        self.assertTrue(any(r.header("Authorization") == creds for r in self.up.received(contains="/blobs/")),
                        "the registry itself never got the credentials")
        at_cdn = self.cdn.received(contains="/blobs/")
        self.assertTrue(at_cdn, "no blob was redirected to the cdn")
        self.assertEqual([r for r in at_cdn if r.header("Authorization")], [], "Authorization went to another host")


class TokenTest(HostileCase):
    """The upstream asks for a Bearer token from a realm on another host (the token server)."""

    TOKEN = "good-token"
    CREDS = "Basic " + base64.b64encode(b"mirror:mirror-pw").decode()

    def before_berth(self):
        host = self.overrides.get("token_host", "127.0.0.1")
        try:
            self.tok = self.server(host=host, name="token")
        except OSError as e:
            self.skipTest(f"cannot listen on {host}: {e}")
        self.realm = f"{self.tok.url}/token"

    def protect(self, tokens):
        """The registry behind Bearer tokens (service evil-service); the token server answers
        tokens(scope_repo) -> behaviour."""
        self.up.on(r"^/v2/.+", hu.bearer_protected(self.realm, "evil-service", self.TOKEN, self.up.honest))

        def choose(req):
            m = re.match(r"repository:(.+):pull", req.q("scope", "") or "")
            return tokens(m.group(1) if m else "")
        self.tok.on(r"^/token$", hu.dispatch(choose))

    def creds_sent(self, server):
        return [r for r in server.received() if r.header("Authorization") == self.CREDS]

    @configure(upstream=lambda t: {"username": "mirror", "password_file": t.password_file(),
                                   "token_realms": [f"{t.up.url}/token"]})
    def test_token_realm_not_allowed(self):
        img = bt.make_image((2000,))
        self.protect(lambda repo: hu.json_answer({"token": self.TOKEN}))

        def pull(i):
            repo = f"library/locked-{i}"
            self.up.add_image(repo, "v1", img)
            self.assert_manifest_refused(self.get_manifest(repo, "v1"), "realm outside token_realms")
            self.assert_blob_refused(self.get_blob(repo, bt.sha256_digest(img["layers"][0])), "realm, blob")
            return repo
        with self.while_hostile():
            repos = self.hammer(pull, 8)
        self.assertTrue(self.up.received(contains="/library/locked-"), "the registry was never asked")
        self.assertEqual(self.tok.received(), [], "a token was asked of a realm outside token_realms")
        self.assertEqual(self.creds_sent(self.up) + self.creds_sent(self.tok), [], "the credentials went out")
        # the same registry without tokens: served (what was refused was refused for the realm)
        self.up.clear()
        self.assert_served_when_honest(manifests=[(repos[0], "v1", img["manifest"])])

    @configure(upstream=lambda t: {"username": "mirror", "password_file": t.password_file(),
                                   "token_realms": ["http://127.0.0.1:1/", f"{t.tok.url}/token"]})
    def test_token_realm_allowed(self):
        img = bt.make_image((2000,))
        self.up.add_image("library/open", "v1", img)
        self.protect(lambda repo: hu.json_answer({"token": self.TOKEN, "expires_in": 300}))
        def pull(i):
            got = self.get_manifest("library/open", "v1")
            self.assertEqual((got.status, got.body), (200, img["manifest"]), got)
            for digest, data in img["blobs"].items():
                got = self.get_blob("library/open", digest)
                self.assertEqual((got.status, got.body), (200, data), got)
        with self.while_hostile():
            self.hammer(pull, 4)
        asked = self.tok.received(path="/token")
        self.assertTrue(asked, "the token server was never asked")
        self.assertTrue(all(r.header("Authorization") == self.CREDS for r in asked), asked)
        self.assertTrue(all(r.q("service") == "evil-service" and r.q("scope") == "repository:library/open:pull"
                            for r in asked), [r.target for r in asked])

    @configure(token_host="127.0.0.10", upstream=lambda t: {"username": "mirror", "password_file": t.password_file(),
                                                            "token_realms": ["http://127.0.0.1"]})
    def test_token_realm_prefix_is_no_host_prefix(self):
        """token_realms ["http://127.0.0.1"]: a realm on 127.0.0.10 merely starts with that text."""
        img = bt.make_image((2000,))
        self.up.add_image("library/prefix", "v1", img)
        self.protect(lambda repo: hu.json_answer({"token": self.TOKEN}))
        with self.while_hostile():
            self.hammer(lambda i: self.assert_answered(self.get_manifest("library/prefix", "v1"), "realm elsewhere"), 4)
        self.assertEqual(self.creds_sent(self.tok), [],
                         f"token_realms [\"http://127.0.0.1\"] let the credentials go to {self.realm}")

    @configure(upstream=lambda t: {"username": "mirror", "password_file": t.password_file()})
    def test_hostile_token_answers(self):
        answers = {
            # repository: (token server behaviour, whether the pull works)
            "garbage": (hu.respond(200, b"this is not json", [("Content-Type", "application/json")]), False),
            "huge": (hu.json_answer({"token": "a" * (1 << 20)}), False),
            "endless": (hu.firehose(hu.head_bytes(200, [("Connection", "close")]) + b'{"token":"', b"a"), False),
            "nested": (hu.json_answer(b"[" * 60_000), False),
            "nested-4mb": (hu.json_answer(NESTED), False),
            "long-token": (hu.json_answer({"token": "t" * 20_000}), False),
            "crlf-token": (hu.json_answer({"token": self.TOKEN + "\r\nX-Injected: yes"}), False),
            "empty-token": (hu.json_answer({"token": ""}), False),
            "number-token": (hu.json_answer({"token": 12345}), False),
            "silent": (hu.silent(), False),
            "trickle": (hu.trickle_body(200, [("Content-Length", 40)], b'{"token":"good-token"}' + b" " * 18, 0.3),
                        False),
            "status-500": (hu.respond(500, b"{}"), False),
            "expires-negative": (hu.json_answer({"token": self.TOKEN, "expires_in": -1}), True),
            "expires-huge": (hu.json_answer(b'{"token":"good-token","expires_in":1' + b"0" * 40 + b"}"), True),
            "expires-int64": (hu.json_answer({"token": self.TOKEN, "expires_in": 2 ** 63}), True),
            "expires-string": (hu.json_answer({"token": self.TOKEN, "expires_in": "forever"}), True),
            "access-token": (hu.json_answer({"access_token": self.TOKEN, "expires_in": 0}), True),
        }
        names = sorted(answers)
        img = bt.make_image((1500,))
        self.protect(lambda repo: answers[repo.split("/")[1].rsplit("-", 1)[0]][0])

        def pull(i):
            name = names[i % len(names)]
            repo = f"library/{name}-{i}"
            self.up.add_image(repo, "v1", img)
            got = self.get_manifest(repo, "v1")
            if answers[name][1]:
                self.assert_answered(got, name)
                self.assertEqual((got.status, got.body), (200, img["manifest"]), f"{name}: {got}")
            else:
                self.assert_manifest_refused(got, f"token answer {name}")
            return repo
        with self.while_hostile():
            self.hammer(pull, len(names), workers=9)
            self.wait_upstream_released()
            self.tok.on(r".*", hu.respond(404))
            bt.poll(lambda: not self.tok.busy(), RELEASE_WITHIN, 0.05, "berth to let go of the token server")
        injected = [r for r in self.up.received() if r.header("X-Injected") or "X-Injected" in (r.header("Authorization")
                                                                                              or "")]
        self.assertEqual(injected, [], "a token's CRLF reached the registry")
        self.assertTrue(self.tok.received(path="/token"), "the token server was never asked")


class StormTest(HostileCase):
    def test_5xx_storm(self):
        self.up.on(r".*", hu.status_storm())

        def pull(i):
            if i % 2:
                got = self.get_manifest(f"library/storm-{i}", "v1")
                self.assert_manifest_refused(got, "5xx")
            else:
                got = self.get_blob(f"library/storm-{i}", bt.sha256_digest(b"storm-%d" % i))
                self.assertEqual((got.status, got.codes()), (404, ["BLOB_UNKNOWN"]), got)
                self.assert_answered(got, "5xx blob")
            return got
        errors_before = self.upstream_errors()
        with self.while_hostile():
            self.hammer(pull, 200, workers=50)
        m = self.b.get("/metrics", timeout=5)
        self.assertEqual(m.status, 200, m)
        self.assertGreaterEqual(self.upstream_errors() - errors_before, 200, "failed fetches not counted")
        self.assertGreaterEqual(len(self.up.received(contains="/library/storm-")), 200)
        self.assert_nothing_cached(manifests=[("library/storm-1", "v1")])
        self.assert_served_when_honest(manifests=[("library/storm-1", "v1", image_manifest(new_marker("honest")))])

    def test_silent_storm(self):
        self.up.on(r".*", hu.silent())

        def pull(i):
            if i % 2:
                self.assert_manifest_refused(self.get_manifest(f"library/hung-{i}", "v1"), "silent")
            else:
                self.assert_blob_refused(self.get_blob(f"library/hung-{i}", bt.sha256_digest(b"hung-%d" % i)), "silent")
            return i
        with self.while_hostile():
            self.hammer(pull, 200, workers=50)
            self.wait_upstream_released()
        self.assert_served_when_honest(manifests=[("library/hung-1", "v1", image_manifest(new_marker("honest")))])

    def upstream_errors(self):
        return sum(v for k, v in self.b.metrics().items()
                   if k.startswith("berth_proxy_upstream_errors_total") and f'upstream="{NS}"' in k)


if __name__ == "__main__":
    unittest.main()
