#!/usr/bin/env python3
"""Garbage collection and scrubbing.

- Online GC (every second, grace 2 s) racing pushers for ~10 s loses nothing: every manifest
  whose PUT was acknowledged keeps all its blobs, served byte for byte, also after many more
  collections; some pushers wait ~1 s (less than grace) between their blobs and the manifest,
  and some skip uploading a blob the registry already has (HEAD first, as clients do).
- Blobs uploaded but never referenced, and the blobs of deleted manifests, go after grace.
- `berth gc --dry-run` beside a running server lists what it would remove and changes nothing
  (not even the server's copies from peers in progress);
  `berth gc` without --dry-run refuses while the server runs; offline it collects.
- Scrub finds a blob whose file was altered on disk, moves it to <root>/quarantine, stops
  serving it and counts it in berth_scrub_corrupt_total.
- On a replica with peers, scrub gets a lost or corrupt blob back from a peer.
"""

import json
import os
import random
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402

PUSH_SECONDS = 10


def blob_gone(b, repo, digest):
    return b.head(f"/v2/{repo}/blobs/{digest}").status == 404 and digest.split(":")[1] not in bt.blob_files(b.root)


class OnlineGcTest(unittest.TestCase):
    def setUp(self):
        self.b = bt.Berth({"gc": {"interval_seconds": 1, "grace_seconds": 2}, "log": {"access": False}})
        self.addCleanup(self.b.cleanup)
        self.b.start()

    def push_image(self, repo, tag, delay, shared, rng):
        """Blobs (config, a unique layer, the shared layer unless the registry has it), optional
        pause, manifest. Returns the image dict when the manifest PUT was acknowledged, else
        raises with the response."""
        b = self.b
        img = bt.make_image((rng.randint(100, 3000),), rng=rng)
        shared_digest, shared_data = shared
        doc = json.loads(img["manifest"])
        doc["layers"].append({"mediaType": bt.OCI_LAYER, "digest": shared_digest, "size": len(shared_data)})
        img["manifest"] = json.dumps(doc).encode()
        img["digest"] = bt.sha256_digest(img["manifest"])
        for digest, data in img["blobs"].items():
            b.push_blob(repo, data)
        if b.head(f"/v2/{repo}/blobs/{shared_digest}").status != 200:
            b.push_blob(repo, shared_data)
        img["blobs"][shared_digest] = shared_data
        if delay:
            time.sleep(delay)
        r = b.put_manifest(repo, tag, img["manifest"])
        if r.status != 201:
            raise AssertionError(f"manifest PUT {repo}:{tag} refused after its blobs were pushed: {r}")
        img["repo"], img["tag"] = repo, tag
        return img

    def test_gc_racing_pushes(self):
        b = self.b
        shared_data = os.urandom(5000)
        shared = (b.push_blob("race/r0", shared_data), shared_data)
        acknowledged, deleted, orphans, errors = [], [], [], []
        lock = threading.Lock()
        stop_at = time.monotonic() + PUSH_SECONDS

        def pusher(index):
            rng = random.Random(index)
            n = 0
            try:
                while time.monotonic() < stop_at:
                    repo = f"race/r{index}"
                    delay = 1.0 if n % 3 == 0 else 0.0  # < grace
                    img = self.push_image(repo, f"t{n}", delay, shared, rng)
                    with lock:
                        acknowledged.append(img)
                    n += 1
                    if n % 4 == 0:
                        # an unreferenced upload
                        data = os.urandom(rng.randint(10, 2000))
                        with lock:
                            orphans.append((repo, b.push_blob(repo, data)))
                    if n % 5 == 0:
                        # a manifest pushed by digest and deleted again
                        gone = self.push_image(repo, None, 0, shared, rng)
                        r = b.request("DELETE", f"/v2/{repo}/manifests/{gone['digest']}")
                        if r.status != 202:
                            raise AssertionError(f"DELETE manifest: {r}")
                        with lock:
                            deleted.append(gone)
            except Exception as e:  # noqa: BLE001
                with lock:
                    errors.append(f"pusher {index}: {e!r}")

        threads = [threading.Thread(target=pusher, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(PUSH_SECONDS + 60)
        self.assertFalse(errors, "\n".join(errors) + "\n" + b.stderr()[-3000:])
        runs_during = b.metrics().get("berth_gc_runs_total", 0)
        self.assertGreaterEqual(runs_during, PUSH_SECONDS // 2, "GC did not run about every second")
        self.assertGreater(len(acknowledged), 10)
        self.assertTrue(orphans and deleted)

        def verify_acknowledged():
            for img in acknowledged:
                repo, tag = img["repo"], img["tag"]
                r = b.get(f"/v2/{repo}/manifests/{tag}", headers={"Accept": bt.OCI_MANIFEST})
                self.assertEqual(r.status, 200, f"{repo}:{tag}: {r}")
                self.assertEqual(r.body, img["manifest"])
                for digest, data in img["blobs"].items():
                    r = b.get(f"/v2/{repo}/blobs/{digest}")
                    self.assertEqual(r.status, 200, f"blob {digest} of acknowledged {repo}:{tag} lost: {r}")
                    self.assertEqual(r.body, data, f"blob {digest} of {repo}:{tag}")

        verify_acknowledged()
        # what nothing references goes once past grace (+ an interval, + slack)
        shared_hex = shared[0].split(":")[1]
        unique_of_deleted = [(img["repo"], d) for img in deleted for d in img["blobs"] if d != shared[0]]
        for repo, digest in orphans + unique_of_deleted:
            self.assertNotEqual(digest.split(":")[1], shared_hex)
            bt.poll(lambda: blob_gone(b, repo, digest), 15, 0.2, f"unreferenced blob {digest} in {repo} removed")
        for img in deleted:
            self.assertEqual(b.get(f"/v2/{img['repo']}/manifests/{img['digest']}").status, 404)
        # several more collections later, all acknowledged content is still whole
        runs = b.metrics()["berth_gc_runs_total"]
        bt.poll(lambda: b.metrics()["berth_gc_runs_total"] >= runs + 2, 10, 0.2, "two more GC runs")
        verify_acknowledged()
        m = b.metrics()
        self.assertGreater(m["berth_storage_blob_bytes"], 0)
        self.assertTrue(b.alive())
        self.assertNotIn('"level":"error"', b.stderr())


class GcCommandTest(unittest.TestCase):
    """`berth gc` beside a running server: --dry-run only looks; a real run is refused."""

    def test_dry_run_and_refusal(self):
        b = bt.Berth({"gc": {"interval_seconds": 3600, "grace_seconds": 1}})
        self.addCleanup(b.cleanup)
        b.start()
        kept = b.push_image("cmd/kept", "v1")
        orphan_data = os.urandom(3333)
        orphan = b.push_blob("cmd/kept", orphan_data)
        gone = b.push_image("cmd/gone", "v1")
        self.assertEqual(b.request("DELETE", f"/v2/cmd/gone/manifests/{gone['digest']}").status, 202)
        # As a copy from a peer in progress looks: the server's, which a dry run must leave alone.
        with open(os.path.join(b.root, "uploads", "fetch-0123456789abcdef"), "wb") as f:
            f.write(b"a copy from a peer, in progress")
        before = bt.tree(b.root)
        files_before = {k: v for k, v in before.items() if not k.startswith("meta" + os.sep)}

        # Dry runs until everything above is past grace (1 s): each one only looks.
        expected = [f"would remove link cmd/kept@{orphan}", f"would remove blob {orphan} ({len(orphan_data)} bytes)"]
        for digest in gone["blobs"]:
            expected += [f"would remove link cmd/gone@{digest}", f"would remove blob {digest}"]

        def dry_run_lists_all():
            r = bt.run_cli("gc", "--config", b.config_path(), "--root", b.root, "--dry-run")
            self.assertEqual(r.returncode, 0, r.stderr)
            return r.stdout if all(line in r.stdout for line in expected) else None
        out = bt.poll(dry_run_lists_all, 15, 0.2, "a dry run listing the orphan and the deleted image's blobs")
        for digest in kept["blobs"]:
            self.assertNotIn(digest, out)
        self.assertRegex(out.splitlines()[-1], r"^dry run: ")
        self.assertFalse([line for line in out.splitlines() if line.startswith("removed ")])

        # nothing changed: files on disk, and what the server serves
        after = {k: v for k, v in bt.tree(b.root).items() if not k.startswith("meta" + os.sep)}
        self.assertEqual(files_before, after)
        self.assertEqual(b.get(f"/v2/cmd/kept/blobs/{orphan}").body, orphan_data)
        for digest, data in gone["blobs"].items():
            self.assertEqual(b.get(f"/v2/cmd/gone/blobs/{digest}").body, data)

        # without --dry-run: refused while the server runs, and still nothing changed
        r = bt.run_cli("gc", "--config", b.config_path(), "--root", b.root)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("dry-run", r.stderr)
        self.assertNotIn("removed", r.stdout)
        after = {k: v for k, v in bt.tree(b.root).items() if not k.startswith("meta" + os.sep)}
        self.assertEqual(files_before, after)
        self.assertEqual(b.get(f"/v2/cmd/kept/blobs/{orphan}").body, orphan_data)
        self.assertTrue(b.alive())

        # offline, the real run removes what the dry run listed, and only that
        self.assertEqual(b.stop(), 0)
        r = bt.run_cli("gc", "--config", b.config_path(), "--root", b.root)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"removed blob {orphan}", r.stdout)
        b.restart()
        self.assertEqual(b.head(f"/v2/cmd/kept/blobs/{orphan}").status, 404)
        self.assertNotIn(orphan.split(":")[1], bt.blob_files(b.root))
        for digest in gone["blobs"]:
            self.assertTrue(blob_gone(b, "cmd/gone", digest), digest)
        self.assertEqual(b.get("/v2/cmd/kept/manifests/v1").body, kept["manifest"])
        for digest, data in kept["blobs"].items():
            self.assertEqual(b.get(f"/v2/cmd/kept/blobs/{digest}").body, data)


class ScrubTest(unittest.TestCase):
    def test_corrupt_blob_quarantined(self):
        b = bt.Berth({"scrub": {"interval_seconds": 1, "rate_mib_per_second": 64},
                      "gc": {"interval_seconds": 3600, "grace_seconds": 3600}})
        self.addCleanup(b.cleanup)
        b.start()
        img = b.push_image("scrub/repo", "v1", layer_sizes=(65536, 4096))
        victim = bt.sha256_digest(img["layers"][0])
        hex_ = victim.split(":")[1]
        path = bt.blob_files(b.root)[hex_]
        with open(path, "r+b") as f:
            f.seek(1000)
            original = f.read(4)
            f.seek(1000)
            f.write(bytes(x ^ 0xFF for x in original))
        with open(path, "rb") as f:
            corrupt = f.read()
        self.assertNotEqual(bt.sha256_digest(corrupt), victim)

        quarantine = os.path.join(b.root, "quarantine")

        def quarantined():
            if not os.path.isdir(quarantine):
                return False
            return [os.path.join(d, n) for d, _, files in os.walk(quarantine) for n in files if hex_ in n]
        found = bt.poll(quarantined, 20, 0.2, "the corrupt blob in <root>/quarantine")
        with open(found[0], "rb") as f:
            self.assertEqual(f.read(), corrupt)  # kept for inspection, as it was
        self.assertNotIn(hex_, bt.blob_files(b.root))
        r = b.get(f"/v2/scrub/repo/blobs/{victim}")
        self.assertNotEqual(r.body, corrupt)
        self.assertEqual(r.status, 404, r)
        self.assertEqual(b.head(f"/v2/scrub/repo/blobs/{victim}").status, 404)
        bt.poll(lambda: b.metrics().get("berth_scrub_corrupt_total", 0) >= 1, 10, 0.2,
                "berth_scrub_corrupt_total >= 1")
        # the sound blobs are untouched
        for digest, data in img["blobs"].items():
            if digest != victim:
                self.assertEqual(b.get(f"/v2/scrub/repo/blobs/{digest}").body, data)
        self.assertEqual(b.get("/v2/scrub/repo/manifests/v1").body, img["manifest"])
        errors = [line for line in b.log_lines() if line.get("level") == "error"]
        self.assertTrue(any(victim in str(line) for line in errors), errors)
        # pushing the right bytes again heals it
        self.assertEqual(b.push_blob("scrub/repo", img["layers"][0]), victim)
        self.assertEqual(b.get(f"/v2/scrub/repo/blobs/{victim}").body, img["layers"][0])
        # Two more whole scrub passes after the heal (the first may have begun before it): the
        # healed blob is sound, so it stays where it is and nothing more counts as corrupt.
        runs = b.metrics()["berth_scrub_runs_total"]
        bt.poll(lambda: b.metrics()["berth_scrub_runs_total"] >= runs + 2, 20, 0.1, "two more scrub passes")
        self.assertIn(hex_, bt.blob_files(b.root), "the healed blob was taken out of the store again")
        self.assertEqual(b.get(f"/v2/scrub/repo/blobs/{victim}").body, img["layers"][0])
        self.assertEqual(b.metrics()["berth_scrub_corrupt_total"], 1)

    def test_lost_and_corrupt_blobs_come_back_from_a_peer(self):
        cluster = bt.Cluster(n=2, config={"scrub": {"interval_seconds": 1}})
        self.addCleanup(cluster.cleanup)
        cluster.start()
        a, b = cluster.replicas
        img = a.push_image("scrub/peer", "v1", layer_sizes=(40_000, 20_000))
        bt.poll(lambda: b.get("/v2/scrub/peer/manifests/v1").status == 200, 30, what="replicated")
        lost, corrupt = (bt.sha256_digest(layer) for layer in img["layers"])
        files = bt.blob_files(b.root)
        os.remove(files[lost[7:]])
        with open(files[corrupt[7:]], "r+b") as f:
            f.write(b"\0\0\0\0")

        def sound(digest):
            path = bt.blob_files(b.root).get(digest[7:])
            return path and open(path, "rb").read() == img["blobs"][digest]
        bt.poll(lambda: sound(lost) and sound(corrupt), 30, what="both blobs back from the peer")
        metrics = b.metrics()
        self.assertGreaterEqual(metrics["berth_scrub_missing_total"], 1)
        self.assertGreaterEqual(metrics["berth_scrub_repaired_total"], 2)
        self.assertEqual(metrics["berth_scrub_unrepaired_blobs"], 0)


if __name__ == "__main__":
    unittest.main()
