#!/usr/bin/env python3
"""Immutable tags across real replicas (policies[].immutable_tags, docs/ha.md): a new tag is
written only with a majority of replicas promising its digest.

1. Concurrent first pushes of the same tags with different digests on two replicas: for each tag
   at most one 201, and every replica converges on that digest.
2. Two of three replicas frozen: the push answers 503 and writes nothing, the tag is served
   nowhere, and once the peers thaw the refused digest never takes the tag; another digest pushed
   with a majority does, and the refused one is then 403.
3. One replica killed (-9): pushes go on with the other two; restarted, it serves the same tag.
   One replica wiped: it has forgotten its promises, yet a different digest pushed to it is 403.
"""

import os
import sys
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402

POLICIES = [{"repositories": ["prod/**"], "immutable_tags": True}]


def tagged(replica, repo, tag):
    r = replica.request("HEAD", f"/v2/{repo}/manifests/{tag}", headers={"Accept": bt.OCI_MANIFEST})
    return r.header("Docker-Content-Digest") if r.status == 200 else None


def stage(replica, repo, layer=100):
    """An image whose blobs are on the replica; its manifest not pushed yet."""
    image = bt.make_image((layer,))
    for data in image["blobs"].values():
        replica.push_blob(repo, data)
    return image


class ImmutableTagsAcrossReplicas(unittest.TestCase):
    def setUp(self):
        self.cluster = bt.Cluster(n=3, replication={"quorum_timeout_seconds": 3}, config={"policies": POLICIES})
        self.addCleanup(self.cluster.cleanup)
        self.cluster.start()

    def test_concurrent_first_pushes_at_most_one_wins(self):
        c = self.cluster
        repo = "prod/race"
        tags = [f"v{i}" for i in range(12)]
        images = {(tag, side): stage(c[side], repo) for tag in tags for side in (0, 1)}
        c.wait_caught_up()
        answers = {}

        def push(tag, side):
            image = images[(tag, side)]
            answers[(tag, side)] = c[side].put_manifest(repo, tag, image["manifest"]).status

        threads = [threading.Thread(target=push, args=(tag, side)) for tag in tags for side in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        c.wait_caught_up()
        for tag in tags:
            statuses = [answers[(tag, side)] for side in (0, 1)]
            self.assertLessEqual(statuses.count(201), 1, (tag, statuses))
            self.assertTrue(all(s in (201, 403, 503) for s in statuses), (tag, statuses))
            held = {tagged(r, repo, tag) for r in c}
            self.assertEqual(len(held), 1, (tag, held))
            winner = [images[(tag, side)]["digest"] for side in (0, 1) if answers[(tag, side)] == 201]
            if winner:
                self.assertEqual(held, {winner[0]}, tag)
            else:
                self.assertEqual(held, {None}, (tag, "no 201, so no tag"))

    def test_no_majority_writes_nothing_and_the_refused_digest_never_wins(self):
        c = self.cluster
        repo = "prod/frozen"
        first, second = stage(c[0], repo), stage(c[1], repo)
        c.wait_caught_up()
        c[1].freeze()
        c[2].freeze()
        try:
            r = c[0].put_manifest(repo, "v1", first["manifest"])
            self.assertEqual(r.status, 503, r)
            self.assertIn("nothing was written", r.json()["errors"][0]["message"])
            self.assertIsNotNone(r.header("Retry-After"))
            self.assertIsNone(tagged(c[0], repo, "v1"))
        finally:
            c[1].thaw()
            c[2].thaw()
        c.wait_connected()
        r = c[1].put_manifest(repo, "v1", second["manifest"])
        self.assertEqual(r.status, 201, r)
        c.wait_caught_up()
        self.assertEqual({tagged(x, repo, "v1") for x in c}, {second["digest"]})
        for replica in c:
            self.assertEqual(replica.put_manifest(repo, "v1", first["manifest"]).status, 403)
        self.assertEqual({tagged(x, repo, "v1") for x in c}, {second["digest"]})

    def test_killed_and_wiped_replicas(self):
        c = self.cluster
        repo = "prod/faults"
        first, second = stage(c[0], repo), stage(c[0], repo)
        c.wait_caught_up()
        c[2].kill()
        self.assertEqual(c[0].put_manifest(repo, "v1", first["manifest"]).status, 201)
        c[2].restart()
        c.wait_connected()
        c.wait_caught_up()
        self.assertEqual(tagged(c[2], repo, "v1"), first["digest"])

        c[2].kill()
        c[2].wipe()
        c[2].restart()
        c.wait_connected()
        for data in second["blobs"].values():
            c[2].push_blob(repo, data)
        r = c[2].put_manifest(repo, "v1", second["manifest"])
        self.assertEqual(r.status, 403, r)
        c[2].wait_readyz(60)
        c.wait_caught_up()
        self.assertEqual({tagged(x, repo, "v1") for x in c}, {first["digest"]})


if __name__ == "__main__":
    unittest.main(verbosity=2)
