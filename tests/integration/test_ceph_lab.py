#!/usr/bin/env python3
"""The Ceph lab itself (tests/lib/cephlab.py): a real mon, OSD and radosgw on loopback that the
S3 tests run against. One lab for the class; it starts in seconds, and its phases, start time and
daemons' memory are printed.

- A bucket; an object put, read back, listed and deleted; a multipart upload listed and aborted.
- radosgw killed (SIGKILL) refuses connections, and restarted answers on the same endpoint with
  the objects it had.
- radosgw frozen (SIGSTOP) holds a request until the client's timeout; thawed it answers.
- The OSD killed and restarted: radosgw, which stayed up, serves the objects again.
"""

import os
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
import cephlab  # noqa: E402

SKIP = cephlab.skip_reason()


@unittest.skipIf(SKIP, SKIP)
class CephLabTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.lab = cephlab.CephLab(tempfile.mkdtemp(prefix="berth-ceph-"))
        t0 = time.monotonic()
        cls.lab.start()
        took = time.monotonic() - t0
        rss = ", ".join(f"{name} {size >> 20} MiB" for name, size in sorted(cls.lab.rss().items()))
        print(f"\nceph lab: ready in {took:.1f} s at {cls.lab.endpoint} (phases: {cls.lab.timings}); RSS {rss}",
              file=sys.stderr)

    @classmethod
    def tearDownClass(cls):
        cls.lab.cleanup()

    def setUp(self):
        self.addCleanup(lambda: bt.failed(self) and print(self.lab.log_tails(), file=sys.stderr))
        # every test leaves the daemons running, whatever it did to them
        self.addCleanup(self.revive)
        self.s3 = self.lab.s3()

    def revive(self):
        for daemon in ("osd", "radosgw"):
            self.lab.thaw(daemon)
            if not self.lab.alive(daemon):
                self.lab.restart(daemon)

    def test_objects_round_trip(self):
        self.assertEqual(self.lab.region, "us-east-1")
        self.assertTrue(self.lab.endpoint.startswith("http://127.0.0.1:"), self.lab.endpoint)
        bucket = self.lab.make_bucket("round-trip")
        self.assertEqual(self.lab.make_bucket("round-trip"), bucket, "a second make_bucket is a no-op")
        body = os.urandom(300_000)
        self.s3.put_object(Bucket=bucket, Key="dir/a", Body=body)
        self.assertEqual(self.s3.get_object(Bucket=bucket, Key="dir/a")["Body"].read(), body)
        self.assertEqual(self.lab.keys(bucket, "dir/"), ["dir/a"])
        self.s3.delete_object(Bucket=bucket, Key="dir/a")
        self.assertEqual(self.lab.keys(bucket), [])

        up = self.s3.create_multipart_upload(Bucket=bucket, Key="big/x")["UploadId"]
        self.assertEqual([(u["Key"], u["UploadId"]) for u in self.lab.list_multipart_uploads(bucket, "big/")],
                         [("big/x", up)])
        self.assertEqual(self.lab.list_multipart_uploads(bucket, "other/"), [])
        self.s3.abort_multipart_upload(Bucket=bucket, Key="big/x", UploadId=up)
        self.assertEqual(self.lab.list_multipart_uploads(bucket), [])

    def test_radosgw_killed_and_restarted_answers_again(self):
        bucket = self.lab.make_bucket("rgw-restart")
        self.s3.put_object(Bucket=bucket, Key="k", Body=b"before the kill")
        endpoint = self.lab.endpoint
        self.lab.kill("radosgw")
        self.assertFalse(self.lab.alive("radosgw"))
        with self.assertRaises(Exception):
            self.lab.s3(connect_timeout=2).list_buckets()
        t0 = time.monotonic()
        self.lab.restart("radosgw")
        print(f"\nceph lab: radosgw restarted in {time.monotonic() - t0:.1f} s", file=sys.stderr)
        self.assertEqual(self.lab.endpoint, endpoint)
        self.assertEqual(self.lab.s3().get_object(Bucket=bucket, Key="k")["Body"].read(), b"before the kill")

    def test_radosgw_frozen_holds_requests_until_thawed(self):
        bucket = self.lab.make_bucket("rgw-freeze")
        self.s3.put_object(Bucket=bucket, Key="k", Body=b"x")
        self.lab.freeze("radosgw")
        t0 = time.monotonic()
        with self.assertRaises(Exception):
            self.lab.s3(read_timeout=1).get_object(Bucket=bucket, Key="k")
        self.assertGreaterEqual(time.monotonic() - t0, 0.9, "a frozen radosgw answered")
        self.lab.thaw("radosgw")
        bt.poll(lambda: self.s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"x", 10, 0.1,
                "radosgw answering after the thaw")

    def test_osd_killed_and_restarted_serves_again(self):
        bucket = self.lab.make_bucket("osd-restart")
        self.s3.put_object(Bucket=bucket, Key="k", Body=b"on the osd")
        self.lab.kill("osd")
        self.assertTrue(self.lab.alive("radosgw"))
        t0 = time.monotonic()
        self.lab.restart("osd")
        print(f"\nceph lab: osd restarted in {time.monotonic() - t0:.1f} s", file=sys.stderr)
        self.assertEqual(self.s3.get_object(Bucket=bucket, Key="k")["Body"].read(), b"on the osd")
        self.s3.put_object(Bucket=bucket, Key="k2", Body=b"after")
        self.assertEqual(self.lab.keys(bucket), ["k", "k2"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
