#!/usr/bin/env python3
"""Replication fault tests: three real berth replicas per test, one of them killed, wiped or
missing a delete; what was acknowledged survives and what was deleted stays deleted:

2. kill -9 one replica during a stream of pushes: every push acknowledged with 201 is served by
   the survivors (and by the victim once it is back);
3. wipe one replica's root and restart it: /readyz says 503 until every blob is on its disk,
   then it serves everything on its own (peers frozen, then killed);
5. a deleted manifest is gone everywhere and stays gone (poll rounds, restarts, a replica that
   missed the delete, a replica re-bootstrapped from a snapshot).

The harness (seeded images, what a replica must serve, logs of a failing test) is
tests/lib/replication_case.py's; the other replication tests are test_replication*.py.
"""

import http.client
import os
import random
import signal
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
from replication_case import ACCEPT, CONVERGE, SEED, ReplicationTestCase, image, push, push_ok, tag_map  # noqa: E402


# --------------------------------------------------------------------------- 2


class KillDuringPushesTest(ReplicationTestCase):
    PUSHERS = 4

    def test_kill9_one_replica_during_pushes(self):
        c = self.cluster.start()
        survivors, victim = [c[0], c[1]], c[2]
        lock = threading.Lock()
        acked = {}  # (repo, tag) -> img
        survivor_failures, victim_failures = [], []
        stop, killed = threading.Event(), threading.Event()

        def pusher(index, rng):
            repo = f"kill/p{index}"
            n = 0
            while not stop.is_set():
                target = c[(index + n) % 3]
                tag = f"n{n}"
                img = image(rng, [rng.randint(1 << 10, 64 << 10) for _ in range(rng.randint(1, 2))],
                            f"{index}/{n}")
                try:
                    r = push(target, repo, tag, img)
                    ok = r.status == 201 and r.header("Docker-Content-Digest") == img["digest"]
                    failure = None if ok else f"{target.replica_id} {repo}:{tag}: {r}"
                except (OSError, http.client.HTTPException, AssertionError) as err:
                    ok, failure = False, f"{target.replica_id} {repo}:{tag}: {err!r}"
                with lock:
                    if ok:
                        acked[(repo, tag)] = img
                    elif target is victim:
                        victim_failures.append(failure)
                    else:
                        survivor_failures.append(failure)
                n += 1

        threads = [threading.Thread(target=pusher, args=(i, random.Random(self.rng.getrandbits(64))), daemon=True)
                   for i in range(self.PUSHERS)]
        for t in threads:
            t.start()

        def count():
            with lock:
                return len(acked)
        bt.poll(lambda: count() >= 20, 30, 0.01, "20 acknowledged pushes")
        time.sleep(self.rng.uniform(0, 0.2))  # land the kill at an arbitrary point of some request
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        killed.set()
        at_kill = count()
        bt.poll(lambda: count() >= at_kill + 20, 30, 0.01, "20 more acknowledged pushes after the kill")
        stop.set()
        for t in threads:
            t.join(60)
            self.assertFalse(t.is_alive(), "a pusher hung")

        self.assertEqual(victim.proc.returncode, -signal.SIGKILL, "the victim exited before the kill")
        # Pushes through the survivors never fail: two of three is a quorum.
        self.assertEqual(survivor_failures, [], f"pushes through survivors failed (seed {SEED})")
        print(f"  {len(acked)} pushes acknowledged, {len(victim_failures)} failed on the killed replica",
              file=sys.stderr)
        # Every acknowledged push is served by both survivors, right away...
        for (repo, tag), img in sorted(acked.items()):
            for r in survivors:
                self.expect_served(r, repo, tag, img, "after the kill")
        # ...and from their own disks once they have caught up with each other.
        c.wait_caught_up(replicas=survivors)
        for r in survivors:
            files = bt.blob_files(r.root)
            for img in acked.values():
                for digest in img["blobs"]:
                    self.assertIn(digest.split(":")[1], files, f"{r.replica_id} lacks {digest} on disk")
        # The victim comes back, catches up, and serves everything too.
        victim.restart()
        victim.wait_readyz(CONVERGE)
        for (repo, tag), img in sorted(acked.items()):
            self.expect_served(victim, repo, tag, img, "after its restart")


# --------------------------------------------------------------------------- 3


class WipeTest(ReplicationTestCase):
    def test_wiped_replica_rebuilds_before_ready(self):
        c = self.cluster.start()
        others, wiped = [c[0], c[1]], c[2]
        imgs = {}
        # ~25 MiB in 3 repositories, pushed through all three replicas, plus a moved tag.
        for i in range(24):
            repo = f"wipe/r{i % 3}"
            img = image(self.rng, [self.rng.randint(4 << 10, 1 << 20), self.rng.randint(4 << 10, 1 << 20)], str(i))
            push_ok(self, c[i % 3], repo, f"t{i}", img)
            imgs[(repo, f"t{i}")] = img
        push_ok(self, c[1], "wipe/r0", "t0", imgs[("wipe/r1", "t1")])  # t0 moves to another image
        imgs[("wipe/r0", "t0")] = imgs[("wipe/r1", "t1")]
        c.wait_caught_up()

        wiped.send_signal(signal.SIGKILL)
        wiped.wait(10)
        wiped.wipe()
        self.assertFalse(os.path.exists(wiped.root))
        wiped.spawn()  # same config: same peers
        seen = []
        deadline = time.monotonic() + 60
        while True:  # poll /readyz from the moment it is spawned
            self.assertTrue(wiped.alive(), f"wiped replica exited: {wiped.stderr()[-2000:]}")
            status = wiped.readyz()
            if status is not None:
                seen.append(status)
            if status == 200:
                break
            self.assertLess(time.monotonic(), deadline, f"/readyz never 200: {seen[-5:]}")
            time.sleep(0.005)
        # The very moment it says ready, every blob is a file under its own root...
        files = bt.blob_files(wiped.root)
        for (repo, tag), img in sorted(imgs.items()):
            for digest, data in img["blobs"].items():
                hexd = digest.split(":")[1]
                self.assertIn(hexd, files, f"blob {digest} of {repo}:{tag} not on disk when /readyz turned 200")
                self.assertEqual(files[hexd], os.path.join(wiped.root, "blobs", "sha256", hexd[:2], hexd))
                self.assertEqual(os.path.getsize(files[hexd]), len(data))
        # ...and everything is served with both peers frozen, so nothing can come by read-through.
        for r in others:
            r.freeze()
        for (repo, tag), img in sorted(imgs.items()):
            self.expect_served(wiped, repo, tag, img, "with its peers frozen, right after /readyz 200")
        for r in others:
            r.thaw()
        self.assertEqual(seen[0], 503, f"/readyz answers before catching up: {seen[:5]}")
        self.assertNotIn(200, seen[:-1])
        # Everything on its own: both others killed.
        for r in others:
            r.send_signal(signal.SIGKILL)
            r.wait(10)
        for (repo, tag), img in sorted(imgs.items()):
            self.expect_served(wiped, repo, tag, img, "with its peers dead")
        for i in range(3):
            self.assertEqual(tag_map(wiped, f"wipe/r{i}"),
                             {t: img["digest"] for (repo, t), img in imgs.items() if repo == f"wipe/r{i}"})
        for (repo, _), img in imgs.items():
            for digest in img["blobs"]:
                self.assertEqual(wiped.head(f"/v2/{repo}/blobs/{digest}").status, 200)
        print(f"  /readyz answered {seen.count(503)}x 503 before 200", file=sys.stderr)


# --------------------------------------------------------------------------- 5


class DeleteTest(ReplicationTestCase):
    def gone_everywhere(self, repo, img, tag):
        for r in self.cluster:
            if not r.alive():
                continue
            for ref in (img["digest"], tag):
                h = r.head(f"/v2/{repo}/manifests/{ref}", headers={"Accept": ACCEPT})
                if h.status != 404:
                    return False
            if tag in tag_map(r, repo):
                return False
        return True

    def assert_gone(self, repo, deleted, where):
        for r in self.cluster:
            for tag, img in deleted.items():
                for ref in (img["digest"], tag):
                    g = r.get(f"/v2/{repo}/manifests/{ref}", headers={"Accept": ACCEPT})
                    self.assertEqual(g.status, 404, f"deleted {repo}@{ref} back on {r.replica_id} {where}: {g}")
                    self.assertEqual(g.error_codes(), ["MANIFEST_UNKNOWN"])
                self.assertNotIn(tag, tag_map(r, repo), f"deleted tag {tag} listed on {r.replica_id} {where}")

    def test_delete_is_global_and_final(self):
        c = self.cluster.start()
        repo = "del/app"
        imgs = {t: image(self.rng, [2048, 4096], t) for t in ("d1", "d2", "keep")}
        for tag, img in imgs.items():
            push_ok(self, c[0], repo, tag, img)
        c.wait_caught_up()
        for r in c:
            self.expect_served(r, repo, "d1", imgs["d1"], "before the delete")

        # Delete with all three up, on a replica other than the one the push went through.
        r = c[1].request("DELETE", f"/v2/{repo}/manifests/{imgs['d1']['digest']}")
        self.assertEqual(r.status, 202, f"DELETE: {r}")
        bt.poll(lambda: self.gone_everywhere(repo, imgs["d1"], "d1"), CONVERGE, 0.05, "d1 gone everywhere")

        # Delete while replica 2 is down (a quorum of two acknowledges), then bring it back.
        c[2].send_signal(signal.SIGKILL)
        c[2].wait(10)
        r = c[0].request("DELETE", f"/v2/{repo}/manifests/{imgs['d2']['digest']}")
        self.assertEqual(r.status, 202, f"DELETE with one replica down: {r}")
        c[2].restart()
        c[2].wait_readyz(CONVERGE)
        deleted = {"d1": imgs["d1"], "d2": imgs["d2"]}
        self.assert_gone(repo, deleted, "right after the replica that missed the delete is ready")

        # Several poll rounds later, still gone; the other image is untouched.
        c.wait_connected()
        c.wait_caught_up()
        deadline = time.monotonic() + 10 * c.poll_interval_ms / 1000
        while time.monotonic() < deadline:  # an observation window, not synchronisation
            for r in c:
                self.assertEqual(r.head(f"/v2/{repo}/manifests/{imgs['d1']['digest']}").status, 404)
            time.sleep(0.05)
        c.wait_caught_up()
        self.assert_gone(repo, deleted, "after ten poll rounds")
        for r in c:
            self.expect_served(r, repo, "keep", imgs["keep"], "after the deletes")

        # Restarting the replica that deleted d2 (kill -9) brings nothing back.
        c[0].send_signal(signal.SIGKILL)
        c[0].wait(10)
        c[0].restart()
        c[0].wait_readyz(CONVERGE)
        c.wait_connected()
        c.wait_caught_up()
        self.assert_gone(repo, deleted, "after restarting replica 0")

        # Nor does a replica rebuilt from a peer's snapshot (tombstones travel with it).
        c[1].send_signal(signal.SIGKILL)
        c[1].wait(10)
        c[1].wipe()
        c[1].restart()
        c[1].wait_readyz(CONVERGE)
        c.wait_connected()
        c.wait_caught_up()
        self.assert_gone(repo, deleted, "after replica 1 was wiped and rebuilt")
        for r in c:
            self.expect_served(r, repo, "keep", imgs["keep"], "at the end")


if __name__ == "__main__":
    unittest.main(verbosity=2)
