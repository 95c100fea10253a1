#!/usr/bin/env python3
"""A hostile upstream registry (hostile_upstream.py) against a real berth proxying it: blobs (silent,
trickled, below min_bytes_per_second, wrong digests and lying lengths) and storms of 5xx and of
silence.

The harness and what every test checks: tests/lib/hostile_case.py.
"""

import os
import sys
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
import hostile_upstream as hu  # noqa: E402
from hostile_case import NS, TWIN, HostileCase, chunked, configure, image_manifest, new_marker  # noqa: E402


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

        def pull(k, repo):
            blobs[repo] = os.urandom(65536)
            got = self.get_blob(f"library/{repo}", bt.sha256_digest(blobs[repo]))
            self.assert_blob_refused(got, f"trickle {k}")
            return repo
        repos = self.pull_variants("trickle", variant, 4, pull, 16, "blobs/")
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

        def pull(k, repo):
            good[repo], bad[repo] = os.urandom(50_000), os.urandom(50_000)
            got = self.get_blob(f"library/{repo}", bt.sha256_digest(good[repo]))
            self.assert_blob_refused(got, f"blob lie {k}")
            self.assertFalse(got.body == bad[repo] or got.body == bad[repo][:25_000], f"blob lie {k}: bad bytes served")
            return repo
        repos = self.pull_variants("blie", variant, 12, pull, 12, "blobs/", bad=list(bad.values()))
        self.assert_not_on_disk(bad=[bad[r] for r in repos] + [bad[r][:25_000] for r in repos])
        self.assert_nothing_cached(blobs=[(f"library/{r}", bt.sha256_digest(good[r])) for r in repos])
        self.assert_served_when_honest(blobs=[(f"library/{repos[0]}", good[repos[0]])])


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
