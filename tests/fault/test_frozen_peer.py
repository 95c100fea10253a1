#!/usr/bin/env python3
"""A frozen peer holds up nothing but the reads that wait for it.

Three replicas; replica 2 is stopped with SIGSTOP (its kernel still accepts connections, so a
peer request to it connects and then hears nothing). While 24 concurrent GETs of absent blobs (or
of absent manifests) go to replica 0, each of which asks the peers (read-through), replica 0
must keep answering GET /healthz, GET /readyz, GET /v2/ and a pull of content pushed to it
earlier, each within 1 s; and every one of the 24 reads must get an answer (404, or 503 since
one peer could not be asked) within 15 s of the burst's start, never a 500 or a hang.

The probes run in a bounded loop while the burst is in flight; nothing waits by sleeping. The
frozen replica is thawed and every process killed in tearDown (Cluster.cleanup)."""

import http.client
import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402

BURST = 24
BURST_DEADLINE = 15.0  # seconds from the burst's start within which every absent read is answered
PROBE_LIMIT = 1.0  # seconds each probe may take
REPO = "frozen/app"


class Burst:
    """BURST concurrent GETs, one thread each; records (status, error codes, seconds) or the exception."""

    def __init__(self, replica, paths):
        self.replica, self.paths = replica, paths
        self.results = [None] * len(paths)
        self.threads = [threading.Thread(target=self._one, args=(i,), daemon=True) for i in range(len(paths))]
        self.started = None

    def _one(self, i):
        start = time.monotonic()
        try:
            r = self.replica.get(self.paths[i], timeout=BURST_DEADLINE + 10)
            self.results[i] = ("answer", r.status, r.error_codes(), time.monotonic() - start)
        except (OSError, http.client.HTTPException) as err:
            self.results[i] = ("error", repr(err), None, time.monotonic() - start)

    def start(self):
        self.started = time.monotonic()
        for t in self.threads:
            t.start()
        return self

    def running(self):
        return sum(t.is_alive() for t in self.threads)

    def join(self, until):
        for t in self.threads:
            t.join(max(0.0, until - time.monotonic()))


class FrozenPeerTest(unittest.TestCase):
    def setUp(self):
        self.cluster = bt.Cluster(3)
        self.addCleanup(self.cluster.cleanup)  # thaws a frozen replica before killing it
        self.cluster.start()
        c = self.cluster
        self.img = c[0].push_image(REPO, "v1", layer_sizes=(64 * 1024, 300 * 1024))
        c.wait_caught_up()  # replica 2 has applied the push before it is frozen
        c[2].freeze()

    def tearDown(self):
        for r in self.cluster:
            r.thaw()

    def timed(self, what, fn):
        start = time.monotonic()
        try:
            result = fn()
        except (OSError, http.client.HTTPException) as err:
            self.fail(f"{what} failed on replica 0 while peers were asked: {err!r}\n{self.cluster.dump_logs()}")
        elapsed = time.monotonic() - start
        self.assertLess(elapsed, PROBE_LIMIT, f"{what} took {elapsed:.2f}s on replica 0 during the burst")
        return result

    def probe_round(self):
        """One of each probe on replica 0, each timed; asserts what each answers."""
        a = self.cluster[0]
        r = self.timed("GET /healthz", lambda: a.get("/healthz", timeout=5))
        self.assertEqual(r.status, 200, r)
        r = self.timed("GET /readyz", lambda: a.get("/readyz", timeout=5))
        self.assertIn(r.status, (200, 503), r)  # a frozen peer may make it not ready; it must still answer
        r = self.timed("GET /v2/", lambda: a.get("/v2/", timeout=5))
        self.assertEqual(r.status, 200, r)
        r = self.timed("GET manifest v1", lambda: a.get(f"/v2/{REPO}/manifests/v1",
                                                        headers={"Accept": bt.OCI_MANIFEST}, timeout=5))
        self.assertEqual((r.status, r.body), (200, self.img["manifest"]), r)
        for digest, data in self.img["blobs"].items():
            r = self.timed(f"GET blob {digest[:19]}", lambda: a.get(f"/v2/{REPO}/blobs/{digest}", timeout=5))
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.body, data, f"blob {digest} served wrong bytes")

    def run_burst(self, paths, allowed):
        a = self.cluster[0]
        burst = Burst(a, paths).start()
        deadline = burst.started + BURST_DEADLINE
        rounds = rounds_in_flight = 0
        # Probe while the burst is in flight (bounded by its deadline), and at least twice.
        while rounds < 2 or (burst.running() and time.monotonic() < deadline):
            in_flight = burst.running()
            self.probe_round()
            rounds += 1
            rounds_in_flight += bool(in_flight)
            time.sleep(0.02)  # pacing, so the probes do not starve the replicas of CPU
        burst.join(deadline)
        late = burst.running()
        self.assertEqual(late, 0, f"{late} of {len(paths)} absent reads unanswered after {BURST_DEADLINE}s\n"
                                  f"{self.cluster.dump_logs()}")
        for path, result in zip(paths, burst.results):
            kind, status, codes, seconds = result
            self.assertEqual(kind, "answer", f"GET {path}: {status} after {seconds:.2f}s")
            self.assertIn(status, allowed, f"GET {path}: {status} {codes} after {seconds:.2f}s")
            self.assertLessEqual(seconds, BURST_DEADLINE, f"GET {path} answered after {seconds:.2f}s")
            if status in (404, 503):
                self.assertIsNotNone(codes, f"GET {path}: {status} without the spec's error body")
        self.assertTrue(a.alive(), "replica 0 exited")
        self.assertTrue(self.cluster[1].alive(), "replica 1 exited")
        slowest = max(r[3] for r in burst.results)
        print(f"  {rounds} probe rounds ({rounds_in_flight} while the burst was in flight); "
              f"slowest absent read {slowest:.2f}s; statuses "
              f"{sorted(set(r[1] for r in burst.results))}", file=sys.stderr)
        # Afterwards too: everything still answers at once.
        self.probe_round()

    def test_absent_blobs_hold_up_nothing_else(self):
        paths = [f"/v2/{REPO}/blobs/{bt.sha256_digest(os.urandom(32))}" for _ in range(BURST)]
        self.run_burst(paths, (404, 503))

    def test_absent_manifests_hold_up_nothing_else(self):
        # Half by tag, half by digest: both are asked of the peers.
        paths = [f"/v2/{REPO}/manifests/absent-{i}" if i % 2 else
                 f"/v2/{REPO}/manifests/{bt.sha256_digest(os.urandom(32))}" for i in range(BURST)]
        self.run_burst(paths, (404, 503))

    def test_absent_reads_in_other_repositories(self):
        # Repositories replica 0 has never heard of, blobs and manifests mixed.
        paths = [f"/v2/frozen/other{i}/blobs/{bt.sha256_digest(os.urandom(32))}" if i % 2 else
                 f"/v2/frozen/other{i}/manifests/latest" for i in range(BURST)]
        self.run_burst(paths, (404, 503))


if __name__ == "__main__":
    unittest.main()
