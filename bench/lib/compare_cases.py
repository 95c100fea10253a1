"""bench/compare's cases: what each runs (workload, size, clients, how long, which tool, over TLS
or not), how a case is described in --list and the tables, and berth's configuration there."""

import json

MiB = 1 << 20
STATIC_SIZE = 1024  # the nginx reference file
SERVERS = ("berth", "distribution")

# name, workload, size, concurrency, bound; bound is ("seconds", S) or ("ops", N).
# "tool" is berth-bench unless it says wrk (GET only: wrk cannot parse HEAD answers).
# A wrk case GETs one path ("get"): "manifest" (default), "tags" or "blob" of a repository
# that `berth-bench --setup-only --workload W` prepares, or "static": the 1 KiB file of the
# nginx reference server (server="nginx"; such cases run against nginx only).
CASES = [
    dict(name="push-monolithic-1m-c1", workload="push-monolithic", size=1 * MiB, c=1, seconds=4),
    dict(name="push-monolithic-1m-c8", workload="push-monolithic", size=1 * MiB, c=8, seconds=4),
    dict(name="push-post-1m-c8", workload="push-post", size=1 * MiB, c=8, seconds=4),
    dict(name="push-chunked-10m-c1", workload="push-chunked", size=10 * MiB, c=1, seconds=4),
    dict(name="push-monolithic-10m-c1", workload="push-monolithic", size=10 * MiB, c=1, seconds=4),
    dict(name="push-monolithic-10m-c8", workload="push-monolithic", size=10 * MiB, c=8, seconds=4),
    dict(name="push-monolithic-100m-c1", workload="push-monolithic", size=100 * MiB, c=1, ops=5),
    dict(name="push-post-100m-c1", workload="push-post", size=100 * MiB, c=1, ops=5),
    dict(name="push-chunked-100m-c1", workload="push-chunked", size=100 * MiB, c=1, ops=5),
    dict(name="push-monolithic-100m-c8", workload="push-monolithic", size=100 * MiB, c=8, ops=16),
    dict(name="push-chunked-100m-c8", workload="push-chunked", size=100 * MiB, c=8, ops=16),
    dict(name="pull-1m-c1", workload="pull", size=1 * MiB, c=1, seconds=4),
    dict(name="pull-1m-c8", workload="pull", size=1 * MiB, c=8, seconds=4),
    dict(name="pull-1m-c32", workload="pull", size=1 * MiB, c=32, seconds=4),
    dict(name="pull-1m-wrk-c8", workload="pull", size=1 * MiB, c=8, seconds=4, tool="wrk", get="blob"),
    dict(name="pull-10m-c8", workload="pull", size=10 * MiB, c=8, seconds=4),
    dict(name="pull-100m-c1", workload="pull", size=100 * MiB, c=1, seconds=4),
    dict(name="pull-100m-c8", workload="pull", size=100 * MiB, c=8, seconds=4),
    dict(name="pull-100m-c32", workload="pull", size=100 * MiB, c=32, seconds=4),
    dict(name="mixed-1m-c8", workload="mixed", size=1 * MiB, c=8, seconds=4),
    dict(name="manifest-get-c1", workload="manifest-get", size=1024, c=1, seconds=3),
    dict(name="manifest-get-c8", workload="manifest-get", size=1024, c=8, seconds=3),
    dict(name="manifest-get-c32", workload="manifest-get", size=1024, c=32, seconds=3),
    dict(name="manifest-head-c8", workload="manifest-head", size=1024, c=8, seconds=3),
    dict(name="manifest-head-c32", workload="manifest-head", size=1024, c=32, seconds=3),
    dict(name="manifest-get-wrk-c8", workload="manifest-get", size=1024, c=8, seconds=3, tool="wrk"),
    dict(name="manifest-get-wrk-c32", workload="manifest-get", size=1024, c=32, seconds=3, tool="wrk"),
    dict(name="tags-list-c8", workload="tags-list", size=1024, c=8, seconds=3),
    dict(name="tags-list-c32", workload="tags-list", size=1024, c=32, seconds=3),
    dict(name="tags-list-wrk-c8", workload="tags-list", size=1024, c=8, seconds=3, tool="wrk", get="tags"),
    dict(name="tags-list-wrk-c32", workload="tags-list", size=1024, c=32, seconds=3, tool="wrk", get="tags"),
    dict(name="nginx-static-wrk-c8", workload="nginx-static", size=STATIC_SIZE, c=8, seconds=3, tool="wrk",
         get="static", server="nginx"),
    dict(name="nginx-static-wrk-c32", workload="nginx-static", size=STATIC_SIZE, c=32, seconds=3, tool="wrk",
         get="static", server="nginx"),
]

# --tls: each case runs as NAME over plain http and as tls-NAME over https, against servers started
# without and with TLS. "reconnect": a new connection per op; "resume": False, a full TLS handshake
# on each (TLS-only: plain http has no session to resume; "plain" names the plain case to compare with).
TLS_CASES = [
    dict(name="pull-100m-c1", workload="pull", size=100 * MiB, c=1, seconds=4),
    dict(name="push-monolithic-100m-c8", workload="push-monolithic", size=100 * MiB, c=8, ops=16),
    dict(name="manifest-get-c8", workload="manifest-get", size=1024, c=8, seconds=3),
    dict(name="manifest-get-reconnect-c8", workload="manifest-get", size=1024, c=8, seconds=3, reconnect=True),
    dict(name="manifest-get-reconnect-noresume-c8", workload="manifest-get", size=1024, c=8, seconds=3,
         reconnect=True, resume=False, plain="manifest-get-reconnect-c8"),
]
# The TLS 1.3 suites berth-bench offers, in the order Go's crypto/tls (docker, containerd, crane) does
# on a CPU with AES instructions. OpenSSL's own default puts AES-256 first, which berth (an OpenSSL
# server, following the client's order) would take while Distribution (Go, its own order) takes
# AES-128: the two would not encrypt alike.
TLS_CIPHERSUITES = "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384"


def tls_cases():
    """TLS_CASES as run: the plain case, then its TLS twin, so the two are measured close together."""
    out = []
    for c in TLS_CASES:
        if "plain" not in c:
            out.append(dict(c))
        out.append(dict(c, name="tls-" + c["name"], tls=True, plain=c.get("plain", c["name"])))
    return out


def berth_config(args, tls=False):
    tls_section = {"tls": {"cert": args.tls_cert, "key": args.tls_key}} if tls else {}
    return {"log": {"access": False}, **json.loads(args.berth_config), **tls_section}


def describe(case):
    size = case["size"]
    size_text = f"{size // MiB} MiB" if size >= MiB else f"{size} B"
    bound = f"{case['ops']} ops" if "ops" in case else f"{case['seconds']} s"
    tool = " (wrk)" if case.get("tool") == "wrk" else ""
    if case.get("server") == "nginx":
        return f"nginx reference: GET of a {size_text} static file, {case['c']} conn{tool}, {bound}/round"
    if case.get("get") == "blob":
        return f"blob GET (no manifest), {size_text}, {case['c']} conn{tool}, {bound}/round"
    blob = "" if case["workload"].startswith(("manifest", "tags")) else f", {size_text}"
    conn = " conn"
    if case.get("reconnect"):
        conn += ", a new connection per op"
        if case.get("tls"):
            conn += (", each with a full TLS handshake" if case.get("resume") is False
                     else ", each resuming the TLS session of the one before")
    over = "https: " if case.get("tls") else ""
    return f"{over}{case['workload']}{blob}, {case['c']}{conn}{tool}, {bound}/round"


def is_reference(case):
    return case.get("server") == "nginx"


def case_servers(case, servers):
    """The servers a case runs against: nginx for the reference cases, the registries otherwise."""
    return ["nginx"] if is_reference(case) else list(servers)
