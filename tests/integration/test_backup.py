#!/usr/bin/env python3
"""Backups (docs/backup.md) of one real berth while it serves: `berth backup` beside the running
server (the index read-only, from one moment), incremental backups that copy only new blobs, the
server's own backups through POST /_berth/v1/backup, `berth backup verify` finding every kind of
damage, `berth backup prune`, and `berth restore` into an empty root that a new berth then serves,
with pushes going on during the backup and every restored manifest's blobs present."""

import json
import os
import shutil
import sys
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402

SECRET = "backup-secret-0123456789"
INDEX = "application/vnd.oci.image.index.v1+json"


def backups_in(target):
    return sorted(d for d in os.listdir(os.path.join(target, "backups")) if not d.startswith("."))


def blob_files(target):
    out = {}
    for dirpath, _, files in os.walk(os.path.join(target, "blobs")):
        for name in files:
            out[name] = os.path.join(dirpath, name)
    return out


class Backups(unittest.TestCase):
    def setUp(self):
        self.b = bt.Berth()
        self.addCleanup(self.b.cleanup)
        self.target = os.path.join(self.b.tmp, "target")
        with open(os.path.join(self.b.tmp, "backup-secret"), "w") as f:
            f.write(SECRET + "\n")
        self.b.config = {"backup": {"target": "target", "secret_file": "backup-secret", "keep": 2}}
        self.b.start()

    def backup(self, *extra, target=None):
        return bt.run_cli("backup", "--root", self.b.root, "--to", target or self.target, *extra, timeout=120)

    def restore(self, root, *extra, target=None):
        return bt.run_cli("restore", "--from", target or self.target, "--root", root, *extra, timeout=120)

    def serve(self, root):
        restored = bt.Berth(root=root)
        self.addCleanup(restored.cleanup)
        return restored.start()

    def test_backup_beside_the_server_then_restore_serves_every_image(self):
        images = [self.b.push_image(f"app/r{i}", "v1", layer_sizes=(2000, 3000)) for i in range(5)]
        untagged = self.b.push_image("app/r0", None)
        r = self.backup()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("full backup", r.stdout)
        [first] = backups_in(self.target)
        with open(os.path.join(self.target, "backups", first, "backup.json")) as f:
            description = json.load(f)
        self.assertEqual(description["format"], "berth-backup-v1")
        self.assertEqual(description["blobs"]["count"], len(blob_files(self.target)))
        # a second full backup into the same target is refused
        r = self.backup()
        self.assertEqual(r.returncode, 1)
        self.assertIn("--incremental", r.stderr)

        root = os.path.join(self.b.tmp, "restored")
        r = self.restore(root)
        self.assertEqual(r.returncode, 0, r.stderr)
        restored = self.serve(root)
        for img in images + [untagged]:
            ref = img["tag"] or img["digest"]
            got = restored.get(f"/v2/{img['repo']}/manifests/{ref}", headers={"Accept": bt.OCI_MANIFEST})
            self.assertEqual(got.status, 200, img["repo"])
            self.assertEqual(got.body, img["manifest"])
            for digest, data in img["blobs"].items():
                self.assertEqual(restored.get(f"/v2/{img['repo']}/blobs/{digest}").body, data)
        # restoring over a store is refused, and so is a backup the target does not hold
        r = self.restore(root)
        self.assertEqual(r.returncode, 1)
        self.assertIn("holds a store already", r.stderr)
        r = self.restore(os.path.join(self.b.tmp, "elsewhere"), "--backup", "19990101T000000Z")
        self.assertEqual(r.returncode, 1)
        self.assertIn("holds no backup 19990101T000000Z", r.stderr)

    def test_a_server_without_a_backup_secret_takes_none_on_request(self):
        plain = bt.Berth()
        self.addCleanup(plain.cleanup)
        plain.start()
        r = plain.request("POST", "/_berth/v1/backup", headers={"Authorization": "Bearer " + SECRET})
        self.assertEqual(r.status, 405, r)
        self.assertEqual(r.json()["errors"][0]["code"], "UNSUPPORTED")

    def test_incremental_backups_copy_only_new_blobs(self):
        self.b.push_image("app/a", "v1", layer_sizes=(5000,))
        self.assertEqual(self.backup().returncode, 0)
        before = blob_files(self.target)
        new = self.b.push_image("app/b", "v1", layer_sizes=(7000, 9000))
        r = self.backup("--incremental")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("incremental backup", r.stdout)
        self.assertIn(f"{len(new['blobs'])} new", r.stdout)
        after = blob_files(self.target)
        self.assertEqual(set(after) - set(before), {d.split(":")[1] for d in new["blobs"]})
        for name in before:  # the same files, not copies
            self.assertEqual(os.stat(before[name]).st_ino, os.stat(after[name]).st_ino)
        self.assertEqual(len(backups_in(self.target)), 2)

    def test_a_backup_taken_while_pushes_go_on_is_consistent(self):
        stop = threading.Event()
        pushed, errors = [], []

        def pusher(k):
            i = 0
            while not stop.is_set():
                try:
                    pushed.append(self.b.push_image(f"busy/r{i % 7}", f"p{k}-t{i}", layer_sizes=(20000,)))
                except Exception as e:  # noqa: BLE001 - reported below
                    errors.append(e)
                    return
                i += 1

        threads = [threading.Thread(target=pusher, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        bt.poll(lambda: len(pushed) >= 10, 30, what="pushes under way")
        r = self.backup()
        bt.poll(lambda: len(pushed) >= 30, 60, what="pushes after the backup")
        stop.set()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(r.returncode, 0, r.stderr)
        root = os.path.join(self.b.tmp, "restored")
        self.assertEqual(self.restore(root).returncode, 0)
        restored = self.serve(root)
        # every tag the restored index holds is whole: its manifest and every blob it names
        held = 0
        for repo in restored.get("/v2/_catalog?n=1000").json()["repositories"]:
            for tag in restored.get(f"/v2/{repo}/tags/list?n=10000").json()["tags"] or []:
                m = restored.get(f"/v2/{repo}/manifests/{tag}", headers={"Accept": bt.OCI_MANIFEST})
                self.assertEqual(m.status, 200)
                manifest = m.json()
                for d in [manifest["config"]] + manifest["layers"]:
                    self.assertEqual(restored.request("HEAD", f"/v2/{repo}/blobs/{d['digest']}").status, 200)
                held += 1
        self.assertGreaterEqual(held, 10)
        self.assertLess(held, len(pushed))

    def test_the_server_takes_backups_on_request(self):
        img = self.b.push_image("app/a", "v1")
        self.assertEqual(self.b.request("POST", "/_berth/v1/backup").status, 401)
        wrong = {"Authorization": "Bearer " + "x" * len(SECRET)}
        self.assertEqual(self.b.request("POST", "/_berth/v1/backup", headers=wrong).status, 401)
        auth = {"Authorization": "Bearer " + SECRET}
        for round_ in range(3):
            r = self.b.request("POST", "/_berth/v1/backup", headers=auth)
            self.assertIn(r.status, (202, 409), r)
            status = bt.poll(lambda: (lambda s: s if s["state"] in ("succeeded", "failed") else None)(
                self.b.request("GET", "/_berth/v1/backup", headers=auth).json()), 60, what="backup finished")
            self.assertEqual(status["state"], "succeeded", status)
            if round_ == 0:
                self.b.push_image("app/b", "v1")
        # the CronJob's way: berth backup --url, which waits for the backup to end
        url = f"http://127.0.0.1:{self.b.port}"
        r = bt.run_cli("backup", "--url", url, "--secret-file", os.path.join(self.b.tmp, "backup-secret"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["state"], "succeeded")
        wrong_file = os.path.join(self.b.tmp, "wrong-secret")
        with open(wrong_file, "w") as f:
            f.write("not-the-backup-secret\n")
        r = bt.run_cli("backup", "--url", url, "--secret-file", wrong_file)
        self.assertEqual(r.returncode, 1)
        self.assertIn("401", r.stderr)
        self.assertEqual(len(backups_in(self.target)), 2)  # keep: 2
        metrics = self.b.metrics()
        self.assertEqual(metrics['berth_backups_total{result="succeeded"}'], 4)
        self.assertGreater(metrics["berth_backup_last_success_timestamp_seconds"], 0)
        self.assertEqual(bt.run_cli("backup", "verify", self.target).returncode, 0)
        root = os.path.join(self.b.tmp, "restored")
        self.assertEqual(self.restore(root).returncode, 0)
        self.assertEqual(self.serve(root).get("/v2/app/a/manifests/v1", headers={"Accept": bt.OCI_MANIFEST}).body,
                         img["manifest"])

    def test_verify_finds_damage_and_restore_refuses_it(self):
        img = self.b.push_image("app/a", "v1", layer_sizes=(4000,))
        self.assertEqual(self.backup().returncode, 0)
        r = bt.run_cli("backup", "verify", self.target)
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("intact", r.stdout)
        [backup] = backups_in(self.target)
        layer = [d for d in img["blobs"] if img["blobs"][d] == img["layers"][0]][0].split(":")[1]
        path = blob_files(self.target)[layer]
        # a new file in place of the hard link: the live store keeps its bytes
        with open(path + ".tmp", "wb") as f:
            f.write(b"x" + img["layers"][0][1:])
        os.replace(path + ".tmp", path)
        r = bt.run_cli("backup", "verify", self.target)
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"blob {path} holds bytes of", r.stdout)
        r = self.restore(os.path.join(self.b.tmp, "restored"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("damaged in the backup", r.stderr)
        # the store was never touched
        self.assertEqual(self.b.get(f"/v2/app/a/blobs/sha256:{layer}").body, img["layers"][0])

        for damage, words in ((lambda d: open(os.path.join(d, "blobs.txt"), "a").write("junk 1\n"), "blobs.txt"),
                              (lambda d: open(os.path.join(d, "backup.json"), "a").write(" "), "checksum"),
                              (lambda d: os.remove(os.path.join(d, "meta", "CURRENT")), "CURRENT")):
            with self.subTest(words=words):
                copy = os.path.join(self.b.tmp, "copy-" + words)
                shutil.copytree(self.target, copy)
                damage(os.path.join(copy, "backups", backup))
                r = bt.run_cli("backup", "verify", copy)
                self.assertEqual(r.returncode, 1, r.stdout)
                self.assertIn(words, r.stdout)

    def test_prune_keeps_the_newest_and_their_blobs(self):
        old = self.b.push_image("app/old", "v1", layer_sizes=(3000,))
        self.assertEqual(self.backup().returncode, 0)
        self.assertEqual(self.b.request("DELETE", f"/v2/app/old/manifests/{old['digest']}").status, 202)
        kept = self.b.push_image("app/new", "v1")
        # the old image's blobs are still in the store (garbage collection has not run): listed again
        self.assertEqual(self.backup("--incremental").returncode, 0)
        self.assertEqual(self.backup("--incremental").returncode, 0)
        r = bt.run_cli("backup", "prune", self.target, "--keep", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.count("removed backup"), 2)
        self.assertEqual(len(backups_in(self.target)), 1)
        self.assertEqual(bt.run_cli("backup", "verify", self.target).returncode, 0)
        for digest in kept["blobs"]:
            self.assertIn(digest.split(":")[1], blob_files(self.target))
        self.assertEqual(bt.run_cli("backup", "prune", self.target, "--keep", "0").returncode, 2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
