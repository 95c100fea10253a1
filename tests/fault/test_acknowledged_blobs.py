#!/usr/bin/env python3
"""A blob acknowledged by a replica that then dies (three real replicas):

1. blob to replica A, A killed before anyone copied it, manifest to replica B: B cannot tell
   whether the blob exists, so it answers 503 UNAVAILABLE with Retry-After (clients retry),
   never 400 MANIFEST_BLOB_UNKNOWN (fatal to docker); once A is back, the same PUT succeeds
   and B serves the blob it copied from A;
2. with every replica up, a manifest whose blob nobody has is still 400 MANIFEST_BLOB_UNKNOWN.

Peers poll each other's change logs only once a minute here, so nothing copies the blob
from A in the background before A dies; the test does not depend on timing.
"""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402


class AcknowledgedBlobs(unittest.TestCase):
    def setUp(self):
        self.cluster = bt.Cluster(n=3, poll_interval_ms=60000)
        self.addCleanup(self.cluster.cleanup)
        self.cluster.start()

    def test_blob_on_a_dead_replica_is_a_retry(self):
        a, b, _ = self.cluster
        img = bt.make_image((300_000,))
        for data in img["blobs"].values():
            a.push_blob("ack/app", data)
        a.kill()

        r = b.put_manifest("ack/app", "v1", img["manifest"])
        self.assertEqual(r.status, 503, r)
        self.assertEqual(r.error_codes(), ["UNAVAILABLE"])
        self.assertEqual(r.header("Retry-After"), "1")
        self.assertEqual(b.get("/v2/ack/app/manifests/v1").status, 404, "nothing stored by the refused PUT")

        a.restart()
        r = bt.poll(lambda: (lambda r: r if r.status == 201 else None)(b.put_manifest("ack/app", "v1", img["manifest"])),
                    30, 0.2, "the manifest PUT to succeed once the replica holding its blob is back")
        self.assertEqual(r.header("Docker-Content-Digest"), img["digest"])
        pulled = bt.pull_image(b, "ack/app", "v1")
        self.assertEqual(pulled["digest"], img["digest"])
        self.assertEqual({d: bt.sha256_digest(v) for d, v in pulled["blobs"].items()},
                         {d: d for d in img["blobs"]}, "B serves the blob it copied from A")

    def test_blob_nobody_has_is_still_refused(self):
        _, b, _ = self.cluster
        img = bt.make_image((1000,))
        r = b.put_manifest("ack/none", "v1", img["manifest"])
        self.assertEqual(r.status, 400, r)
        self.assertEqual(r.error_codes(), ["MANIFEST_BLOB_UNKNOWN"])
        self.assertEqual(json.loads(r.body)["errors"][0]["detail"] in img["blobs"], True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
