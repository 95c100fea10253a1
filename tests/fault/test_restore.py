#!/usr/bin/env python3
"""Back from a total loss, and a restore into a live cluster (docs/backup.md), with three real
replicas:

1. every replica killed and wiped: one is restored from a backup taken while it served, the
   other two start empty and bootstrap from it; what the backup held is served by all three;
2. one replica lost while the others run: `berth restore` refuses (its peers answer), restores
   with --as-new-replica, and the replica converges on the cluster's state, with what was pushed
   and deleted after the backup;
3. `berth import --root` into a stopped replica: once it is back, its peers have the images
   (the import wrote the change log as a push would).

Synchronisation is by polling (/readyz, /_berth/v1/status, the registry API), never by sleeps.
"""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402

CONVERGE = 30


class Restore(unittest.TestCase):
    def setUp(self):
        self.cluster = bt.Cluster(3)
        self.addCleanup(self.cluster.cleanup)
        self.cluster.start()
        self.target = os.path.join(self.cluster[0].tmp, "backup-target")

    def backup(self, replica):
        r = bt.run_cli("backup", "--root", replica.root, "--to", self.target, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)

    def restore(self, replica, *extra):
        return bt.run_cli("restore", "--from", self.target, "--root", replica.root, *extra, timeout=120)

    def assertServes(self, replica, img):
        def whole():
            r = replica.get(f"/v2/{img['repo']}/manifests/{img['tag']}", headers={"Accept": bt.OCI_MANIFEST})
            if r.status != 200:
                return False
            return all(replica.get(f"/v2/{img['repo']}/blobs/{d}").body == data for d, data in img["blobs"].items())
        bt.poll(whole, CONVERGE, 0.1, f"{img['repo']}:{img['tag']} on {replica.replica_id}")

    def test_total_loss_restored_from_one_replica(self):
        a = self.cluster[0]
        before = [a.push_image(f"app/r{i}", "v1", layer_sizes=(3000, 5000)) for i in range(4)]
        self.cluster.wait_caught_up()
        self.backup(a)
        a.push_image("app/after", "v1")  # after the backup: lost with the cluster
        for r in self.cluster:
            r.kill()
            r.wipe()
        restored = self.restore(a)
        self.assertEqual(restored.returncode, 0, restored.stderr)  # no peer answers: nothing to refuse
        for r in self.cluster:
            r.spawn()
        for r in self.cluster:
            r.wait_ready()
            r.wait_readyz(CONVERGE)
        for r in self.cluster:
            for img in before:
                self.assertServes(r, img)
            self.assertEqual(r.get("/v2/app/after/manifests/v1", headers={"Accept": bt.OCI_MANIFEST}).status, 404)
        # and the cluster goes on: a push to a bootstrapped replica reaches the restored one
        img = self.cluster[2].push_image("app/new", "v1")
        self.assertServes(a, img)

    def test_a_lost_replica_restored_into_a_live_cluster(self):
        a, b = self.cluster[0], self.cluster[1]
        kept = a.push_image("app/kept", "v1")
        doomed = a.push_image("app/doomed", "v1")
        self.cluster.wait_caught_up()
        self.backup(b)
        later = a.push_image("app/later", "v1")
        self.assertEqual(a.request("DELETE", f"/v2/app/doomed/manifests/{doomed['digest']}").status, 202)
        b.kill()
        b.wipe()
        refused = self.restore(b)
        self.assertEqual(refused.returncode, 1)
        self.assertIn("is running", refused.stderr)
        self.assertIn("--as-new-replica", refused.stderr)
        self.assertFalse(os.path.exists(os.path.join(b.root, "meta")))
        joined = self.restore(b, "--as-new-replica")
        self.assertEqual(joined.returncode, 0, joined.stderr)
        b.restart()
        b.wait_readyz(CONVERGE)
        self.assertServes(b, kept)
        self.assertServes(b, later)
        bt.poll(lambda: b.get("/v2/app/doomed/manifests/v1", headers={"Accept": bt.OCI_MANIFEST}).status == 404,
                CONVERGE, 0.1, "the manifest deleted after the backup gone from the restored replica")
        # what the restored replica writes reaches the others (its new log is followed from its start)
        img = b.push_image("app/from-b", "v1")
        self.assertServes(self.cluster[2], img)

    def test_an_import_into_a_stopped_replica_replicates(self):
        layout = os.path.join(self.cluster[0].tmp, "layout")
        os.makedirs(os.path.join(layout, "blobs", "sha256"))
        images, entries = [], []
        for i in range(3):
            img = bt.image_of([os.urandom(3000), os.urandom(2000)])
            for digest, data in list(img["blobs"].items()) + [(img["digest"], img["manifest"])]:
                with open(os.path.join(layout, "blobs", "sha256", digest.split(":")[1]), "wb") as f:
                    f.write(data)
            entries.append({"mediaType": bt.OCI_MANIFEST, "digest": img["digest"], "size": len(img["manifest"]),
                            "annotations": {"org.opencontainers.image.ref.name": f"carried/r{i}:1"}})
            images.append(dict(img, repo=f"carried/r{i}", tag="1"))
        with open(os.path.join(layout, "index.json"), "w") as f:
            json.dump({"schemaVersion": 2, "manifests": entries}, f)
        a = self.cluster[1]
        a.kill()
        r = bt.run_cli("import", "--root", a.root, layout, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        a.restart()
        for replica in self.cluster:
            for img in images:
                self.assertServes(replica, img)


if __name__ == "__main__":
    unittest.main(verbosity=2)
