#!/usr/bin/env python3
"""Approved base images and lineage across real replicas (docs/policies.md): the lineage index is
written by the batches replication applies too, so a base pushed to one replica approves a build
pushed to another, a base's tag history moved on one replica is known to the others, and every
replica answers the lineage query alike."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402

POLICIES = [{"name": "bases", "repositories": ["tools/**"], "base_images": ["base/debian:bookworm"]}]
CONVERGE = 20


def push(replica, repo, tag, layers, status=201):
    img = bt.image_of(layers)
    for data in img["blobs"].values():
        replica.push_blob(repo, data)
    r = replica.put_manifest(repo, tag, img["manifest"])
    assert r.status == status, (r, r.body[:300])
    return img


class LineageAcrossReplicas(unittest.TestCase):
    def setUp(self):
        self.cluster = bt.Cluster(n=3, config={"policies": POLICIES})
        self.addCleanup(self.cluster.cleanup)
        self.cluster.start()

    def lineage(self, replica):
        r = replica.get("/_berth/v1/lineage?repository=base/debian&reference=bookworm")
        return r.json() if r.status == 200 else None

    def test_a_base_on_one_replica_approves_builds_on_the_others(self):
        c = self.cluster
        old_layer, new_layer = os.urandom(500), os.urandom(500)
        old = push(c[0], "base/debian", "bookworm", [old_layer])
        new = push(c[0], "base/debian", "bookworm", [new_layer])  # the tag moves on; old is untagged
        c.wait_caught_up()
        on_old = push(c[1], "tools/a", "1", [old_layer, os.urandom(300)])  # judged on replica 1
        on_new = push(c[2], "tools/b", "1", [new_layer, os.urandom(300)])
        push(c[2], "tools/c", "1", [os.urandom(500), os.urandom(300)], status=403)
        c.wait_caught_up()
        want = {("tools/a", on_old["digest"], old["digest"], False), ("tools/b", on_new["digest"], new["digest"], True)}
        for replica in c:
            def same():
                answer = self.lineage(replica)
                if not answer or answer["base"]["versions"] != [old["digest"], new["digest"]]:
                    return False
                return {(d["repository"], d["digest"], d["base_digest"], d["current"]) for d in answer["derived"]} == want
            bt.poll(same, CONVERGE, 0.1, f"the lineage on {replica.replica_id}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
