"""The harness of the hostile upstream tests (tests/integration/test_hostile_upstream_*.py): a hostile
upstream registry (hostile_upstream.py) against a real berth proxying it.

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

Most tests try a set of misbehaviours at once, variant k answering for the repositories
library/PREFIX{k}-{i}: pull_variants() is that scaffold, written once.

BERTH_KEEP=1 prints berth's log of every test, not only of failing ones. Standard library only.
"""

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

import berthtest as bt
import hostile_upstream as hu

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
        if bt.failed(self) or os.environ.get("BERTH_KEEP"):
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

    def pull_variants(self, prefix, variant, count, pull, n, path="", workers=None, bad=(), markers=()):
        """The scaffold of a test of `count` misbehaviours at once. Requests under
        /v2/library/{prefix}{k}-{i}/{path} are answered by the behaviour variant(k, req); pull(k, repo)
        runs for repo = f"{prefix}{k}-{i}" with k = i % count, n values of i at once (on `workers`
        threads) and again (hammer) while the upstream misbehaves (bad and markers as while_hostile
        takes them); then berth must let go of the upstream's connections. Returns what pull returned."""
        for k in range(count):
            self.up.on(rf"^/v2/library/{prefix}{k}-\d+/{path}", hu.dispatch(lambda req, k=k: variant(k, req)))

        def pull_one(i):
            k = i % count
            return pull(k, f"{prefix}{k}-{i}")
        with self.while_hostile(bad, markers):
            pulled = self.hammer(pull_one, n, workers)
            self.wait_upstream_released()
        return pulled

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
