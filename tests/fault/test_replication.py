#!/usr/bin/env python3
"""Replication fault tests: three real berth replicas (separate temp roots, free loopback ports,
peered with each other) per test.

1. push through one replica, pull the same image from the other two at once;
2. kill -9 one replica during a stream of pushes: every push acknowledged with 201 is served by
   the survivors (and by the victim once it is back);
3. wipe one replica's root and restart it: /readyz says 503 until every blob is on its disk,
   then it serves everything on its own (peers frozen, then killed);
4. partition one replica (a network namespace whose link is cut; a restart without peers where
   network namespaces are not available) while tags move on both sides, heal it, and show the
   three converge to the same tags (last writer wins);
5. a deleted manifest is gone everywhere and stays gone (poll rounds, restarts, a replica that
   missed the delete, a replica re-bootstrapped from a snapshot);
6. a chunked upload whose requests alternate between replicas completes and is served;
7. the peer API refuses requests without the right secret and they change nothing;
8. a sparse manifest (a layer never pushed) replicates with the blobs that were pushed.

Synchronisation is by polling (/readyz, /_berth/v1/status, the registry API) with bounded
timeouts, never by fixed sleeps. Every process (frozen ones too) and temp dir is cleaned up, also
on failure; BERTH_KEEP=1 prints the replicas' logs of a failing test.
"""

import http.client
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402

SEED = int(os.environ.get("BERTH_REPL_SEED", str(random.randrange(1 << 30))))
CONVERGE = 20  # seconds any convergence may take (poll interval is 100 ms)
ACCEPT = ", ".join([bt.OCI_MANIFEST, "application/vnd.docker.distribution.manifest.v2+json"])


def image(rng, layer_sizes, note=""):
    """A random image (deterministic from rng): config + layers + manifest."""
    config = json.dumps({"architecture": "amd64", "os": "linux", "note": note, "nonce": rng.getrandbits(64),
                         "rootfs": {"type": "layers", "diff_ids": []}}).encode()
    layers = [rng.randbytes(n) for n in layer_sizes]
    blobs = {bt.sha256_digest(config): config}
    for layer in layers:
        blobs[bt.sha256_digest(layer)] = layer
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": bt.OCI_MANIFEST,
        "config": {"mediaType": bt.OCI_CONFIG, "digest": bt.sha256_digest(config), "size": len(config)},
        "layers": [{"mediaType": bt.OCI_LAYER, "digest": bt.sha256_digest(x), "size": len(x)} for x in layers],
    }).encode()
    return {"blobs": blobs, "manifest": manifest, "digest": bt.sha256_digest(manifest)}


def push(replica, repo, tag, img):
    """Push blobs + manifest by tag through one replica; returns the manifest PUT response."""
    for data in img["blobs"].values():
        replica.push_blob(repo, data)
    return replica.put_manifest(repo, tag, img["manifest"])


def push_ok(testcase, replica, repo, tag, img):
    r = push(replica, repo, tag, img)
    testcase.assertEqual(r.status, 201, f"PUT {repo}:{tag} on {replica.replica_id}: {r}")
    testcase.assertEqual(r.header("Docker-Content-Digest"), img["digest"])
    return r


def tag_map(replica, repo):
    """{tag: digest} of a repository as one replica serves it (tags/list + HEAD of each tag)."""
    r = replica.get(f"/v2/{repo}/tags/list?n=10000")
    if r.status == 404:
        return {}
    if r.status != 200:
        raise AssertionError(f"tags/list {repo} on {replica.replica_id}: {r}")
    out = {}
    for tag in r.json().get("tags") or []:
        h = replica.head(f"/v2/{repo}/manifests/{tag}", headers={"Accept": ACCEPT})
        out[tag] = h.header("Docker-Content-Digest") if h.status == 200 else f"HTTP {h.status}"
    return out


class ReplicationTestCase(unittest.TestCase):
    write_quorum = "quorum"

    def setUp(self):
        self.rng = random.Random(SEED ^ hash(self.id()) & 0xFFFFFFFF)
        self.cluster = bt.Cluster(3, write_quorum=self.write_quorum)
        self.addCleanup(self.cluster.cleanup)
        self.addCleanup(self.print_logs_on_failure)
        self.started = time.monotonic()

    def print_logs_on_failure(self):
        result = getattr(getattr(self, "_outcome", None), "result", None)
        failed = result is not None and any(t is self for t, _ in result.failures + result.errors)
        if failed or os.environ.get("BERTH_KEEP"):
            print(f"\n(BERTH_REPL_SEED={SEED})\n{self.cluster.dump_logs()}", file=sys.stderr)

    def expect_served(self, replica, repo, tag, img, where=""):
        """Manifest by tag and by digest, and every blob, byte-identical on this replica."""
        who = f"{replica.replica_id} {repo}:{tag} {where} (seed {SEED})"
        r = replica.get(f"/v2/{repo}/manifests/{tag}", headers={"Accept": ACCEPT})
        self.assertEqual(r.status, 200, f"tag not served by {who}: {r}")
        self.assertEqual(r.header("Docker-Content-Digest"), img["digest"], f"tag digest on {who}")
        self.assertEqual(r.body, img["manifest"], f"manifest bytes by tag on {who}")
        r = replica.get(f"/v2/{repo}/manifests/{img['digest']}", headers={"Accept": ACCEPT})
        self.assertEqual(r.status, 200, f"manifest by digest not served by {who}: {r}")
        self.assertEqual(r.body, img["manifest"], f"manifest bytes by digest on {who}")
        for digest, data in img["blobs"].items():
            b = replica.get(f"/v2/{repo}/blobs/{digest}")
            self.assertEqual(b.status, 200, f"blob {digest} not served by {who}: {b}")
            self.assertEqual(bt.sha256_digest(b.body), digest, f"blob {digest} corrupt on {who}")
            self.assertEqual(b.body, data, f"blob {digest} bytes on {who}")


# --------------------------------------------------------------------------- 1


class PushPullTest(ReplicationTestCase):
    def test_push_one_pull_two_concurrently(self):
        c = self.cluster.start()
        imgs = {f"v{i}": image(self.rng, [4096, 300 << 10, 1 << 20][: i + 1], f"img{i}") for i in range(3)}
        for tag, img in imgs.items():
            push_ok(self, c[0], "pp/app", tag, img)
        # Right away (no waiting for replication), from both other replicas, at the same moment:
        # two threads per replica, each pulling every image.
        barrier = threading.Barrier(4)
        results, errors = [], []

        def puller(replica):
            try:
                barrier.wait(10)
                for tag in imgs:
                    results.append((replica, tag, bt.pull_image(replica, "pp/app", tag, ACCEPT)))
            except Exception as err:  # noqa: BLE001 - reported below
                errors.append(f"{replica.replica_id}: {err!r}")

        threads = [threading.Thread(target=puller, args=(r,), daemon=True) for r in (c[1], c[2], c[1], c[2])]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
            self.assertFalse(t.is_alive(), "a puller hung")
        self.assertEqual(errors, [])
        self.assertEqual(len(results), 12)
        for replica, tag, got in results:
            img = imgs[tag]
            self.assertEqual(got["status"], 200, f"{replica.replica_id} pp/app:{tag}: {got.get('response')}")
            self.assertEqual(got["digest"], img["digest"], f"{replica.replica_id} {tag}")
            self.assertEqual(got["manifest"], img["manifest"], f"{replica.replica_id} {tag}")
            self.assertEqual(set(got["blobs"]), set(img["blobs"]))
            for digest, data in got["blobs"].items():
                self.assertIsInstance(data, bytes, f"{replica.replica_id} {tag} blob {digest}: {data}")
                self.assertEqual(bt.sha256_digest(data), digest)
                self.assertEqual(data, img["blobs"][digest])
        # And once replicated, each replica holds every blob on its own disk.
        c.wait_caught_up()
        for r in c:
            files = bt.blob_files(r.root)
            for img in imgs.values():
                for digest in img["blobs"]:
                    self.assertIn(digest.split(":")[1], files, f"{r.replica_id} lacks {digest} on disk")


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


# --------------------------------------------------------------------------- 4


class NetnsPartition:
    """Replica `iso` in its own network namespace, reached by its peers over a data veth pair
    (which `cut` takes down) and by the test over a separate management veth pair. The other
    replicas listen on 0.0.0.0 and reach each other over loopback."""

    def __init__(self, cluster, iso):
        tag = os.urandom(3).hex()
        net = random.randrange(1, 250)
        self.ns = f"berth-{tag}"
        self.data_host, self.data_ns = f"vd{tag}h", f"vd{tag}n"
        self.mgmt_host, self.mgmt_ns = f"vm{tag}h", f"vm{tag}n"
        self.data = (f"10.213.{net}.1", f"10.213.{net}.2")
        self.mgmt = (f"10.214.{net}.1", f"10.214.{net}.2")
        self.created = False
        self.cluster, self.iso = cluster, iso

    @staticmethod
    def ip(*args):
        subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)

    def setup(self):
        ip = self.ip
        ip("netns", "add", self.ns)
        self.created = True
        ip("-n", self.ns, "link", "set", "lo", "up")
        for host, ns, (host_addr, ns_addr) in ((self.data_host, self.data_ns, self.data),
                                              (self.mgmt_host, self.mgmt_ns, self.mgmt)):
            ip("link", "add", host, "type", "veth", "peer", "name", ns)
            ip("link", "set", ns, "netns", self.ns)
            ip("addr", "add", f"{host_addr}/24", "dev", host)
            ip("-n", self.ns, "addr", "add", f"{ns_addr}/24", "dev", ns)
            ip("link", "set", host, "up")
            ip("-n", self.ns, "link", "set", ns, "up")
        for r in self.cluster:
            if r is self.iso:
                r.netns, r.listen_host, r.peer_host, r.host = self.ns, "0.0.0.0", self.data[1], self.mgmt[1]
            else:
                r.listen_host = "0.0.0.0"
        # iso reaches the others at the host end of the data link; they reach each other on loopback.
        self.iso.peers_override = [f"{self.data[0]}:{r.port}" for r in self.cluster if r is not self.iso]

    def cut(self):
        self.ip("link", "set", self.data_host, "down")

    def heal(self):
        self.ip("link", "set", self.data_host, "up")

    def teardown(self):
        if self.created:
            for dev in (self.data_host, self.mgmt_host):
                subprocess.run(["ip", "link", "del", dev], capture_output=True, timeout=10)
            subprocess.run(["ip", "netns", "del", self.ns], capture_output=True, timeout=10)
            self.created = False


class PartitionTest(ReplicationTestCase):
    write_quorum = "local"  # writes succeed on the isolated side too

    def test_tags_move_on_both_sides_then_converge(self):
        c = self.cluster
        a, b, iso = c[0], c[1], c[2]
        repo = "part/app"
        use_netns = bt.netns_usable()
        if use_netns:
            part = NetnsPartition(c, iso)
            self.addCleanup(part.teardown)
            c.assign_ports()
            c.assign_ports = lambda: None  # the namespace setup needs the ports fixed first
            part.setup()
            c.start()
        else:
            c.start()
        print(f"  partition by {'network namespace' if use_netns else 'restart without peers'}", file=sys.stderr)

        base = {f"t{i}": image(self.rng, [2048, 8192], f"base{i}") for i in range(4)}
        for tag, img in base.items():
            push_ok(self, a, repo, tag, img)
        expected = {tag: img["digest"] for tag, img in base.items()}
        for r in c:
            bt.poll(lambda r=r: tag_map(r, repo) == expected, CONVERGE, 0.05, f"{r.replica_id} has the base tags")

        # ---- partition
        if use_netns:
            part.cut()

            def isolated():
                return (not any(p["reachable"] for p in iso.status()["peers"]) and
                        not any(p["reachable"] for r in (a, b) for p in r.status()["peers"]
                                if p["id"] == iso.replica_id))
            t0 = time.monotonic()
            try:
                bt.poll(isolated, 45, 0.1, "the partition to be seen by both sides")
            except AssertionError:
                raise AssertionError(f"partition not seen: {[r.status()['peers'] for r in c]}") from None
            # (A silent partition is noticed when a pooled connection's request times out, 10 s,
            # and berth retries once, possibly on another stale pooled connection: up to ~20 s.)
            print(f"  partition seen by both sides after {time.monotonic() - t0:.1f}s", file=sys.stderr)
            self.assertEqual(a.metrics().get(f'berth_replication_peer_up{{peer="{iso.address}"}}'), 0)
        else:
            iso.send_signal(signal.SIGKILL)
            iso.wait(10)
            iso.peers_override = []  # no peers: it neither follows nor is followed
            iso.restart()
        imgs = {f"x{i}": image(self.rng, [4096], f"majority{i}") for i in range(3)}
        imgs.update({f"y{i}": image(self.rng, [4096], f"isolated{i}") for i in range(3)})
        # Majority side, then isolated side (later, so its t2 wins), then majority again.
        push_ok(self, a, repo, "t1", imgs["x1"])
        push_ok(self, b, repo, "t2", imgs["x2"])
        push_ok(self, b, repo, "maj", imgs["x0"])
        time.sleep(0.01)  # distinct milliseconds for the hybrid clocks of the two sides
        push_ok(self, iso, repo, "t2", imgs["y2"])
        push_ok(self, iso, repo, "t3", imgs["y1"])
        push_ok(self, iso, repo, "iso", imgs["y0"])
        r = iso.request("DELETE", f"/v2/{repo}/manifests/t0")
        self.assertEqual(r.status, 202, f"DELETE tag t0 on the isolated replica: {r}")
        time.sleep(0.01)
        push_ok(self, a, repo, "t3-late", imgs["x2"])
        push_ok(self, a, repo, "t3", imgs["x2"])  # later than the isolated side's t3: wins

        # While partitioned, neither side sees the other's moves (several poll rounds pass).
        c.wait_caught_up(replicas=[a, b])
        bt.poll(lambda: tag_map(b, repo).get("t3") == imgs["x2"]["digest"], CONVERGE, 0.05, "b follows a")
        self.assertEqual(tag_map(a, repo).get("t2"), imgs["x2"]["digest"], "majority saw the isolated t2")
        self.assertNotIn("iso", tag_map(a, repo), "majority saw the isolated side's new tag")
        self.assertIn("t0", tag_map(a, repo), "majority saw the isolated side's delete")
        iso_tags = tag_map(iso, repo)
        self.assertEqual(iso_tags.get("t1"), base["t1"]["digest"], "isolated side saw the majority's t1")
        self.assertNotIn("maj", iso_tags)

        # ---- heal
        if use_netns:
            part.heal()
        else:
            iso.send_signal(signal.SIGKILL)
            iso.wait(10)
            iso.peers_override = None
            iso.restart()
        if use_netns:
            bt.poll(lambda: a.metrics().get(f'berth_replication_peer_up{{peer="{iso.address}"}}') == 1,
                    CONVERGE, 0.1, "the isolated replica to be up again for A")
        want = {"t1": imgs["x1"]["digest"], "t2": imgs["y2"]["digest"], "t3": imgs["x2"]["digest"],
                "maj": imgs["x0"]["digest"], "iso": imgs["y0"]["digest"], "t3-late": imgs["x2"]["digest"]}

        def converged():
            maps = [tag_map(r, repo) for r in c]
            return maps[0] == maps[1] == maps[2] and maps
        try:
            maps = bt.poll(converged, CONVERGE, 0.1, "the three replicas to agree on every tag")
        except AssertionError:
            raise AssertionError(f"not converged: {[tag_map(r, repo) for r in c]}") from None
        self.assertEqual(maps[0], want, "converged, but not to the last writes")
        # Each tag's manifest (and blobs) are served by every replica.
        by_digest = {img["digest"]: img for img in list(imgs.values()) + list(base.values())}
        for r in c:
            for tag, digest in want.items():
                self.expect_served(r, repo, tag, by_digest[digest], "after healing")
            h = r.head(f"/v2/{repo}/manifests/t0", headers={"Accept": ACCEPT})
            self.assertEqual(h.status, 404, f"deleted tag t0 back on {r.replica_id}")


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


class SparseManifestTest(ReplicationTestCase):
    def setUp(self):
        super().setUp()
        self.cluster = bt.Cluster(3, write_quorum=self.write_quorum, config={"sparse_manifests": ["sparse/**"]})
        self.addCleanup(self.cluster.cleanup)

    def test_sparse_manifest_replicates_with_what_was_pushed(self):
        c = self.cluster.start()
        img = image(self.rng, [4096, 8192], "sparse")
        config, held, absent = list(img["blobs"].items())
        for repo in ("sparse/app", "dense/app"):
            for digest, data in (config, held):
                c[0].push_blob(repo, data)
        r = c[0].put_manifest("dense/app", "v1", img["manifest"])
        self.assertEqual((r.status, r.json()["errors"][0]["code"]), (400, "MANIFEST_BLOB_UNKNOWN"), str(r))
        push = c[0].put_manifest("sparse/app", "v1", img["manifest"])
        self.assertEqual(push.status, 201, str(push))
        c.wait_caught_up()
        for replica in c:
            m = replica.get("/v2/sparse/app/manifests/v1", headers={"Accept": ACCEPT})
            self.assertEqual((m.status, m.body), (200, img["manifest"]), f"{replica.replica_id}: {m}")
            for digest, data in (config, held):
                b = replica.get(f"/v2/sparse/app/blobs/{digest}")
                self.assertEqual((b.status, b.body), (200, data), f"{replica.replica_id} blob {digest}")
            self.assertEqual(replica.head(f"/v2/sparse/app/blobs/{absent[0]}").status, 404)
            self.assertEqual(replica.head("/v2/dense/app/manifests/v1").status, 404)


# --------------------------------------------------------------------------- 6


class ForwardToFrozenOwnerTest(ReplicationTestCase):
    def setUp(self):
        super().setUp()
        # One I/O thread on each replica: a forward that blocked it would stall every other request.
        self.cluster = bt.Cluster(3, write_quorum=self.write_quorum, config={"threads": {"io": 1}})
        self.addCleanup(self.cluster.cleanup)

    def test_stalled_forward_holds_up_no_other_request(self):
        c = self.cluster.start()
        a, b = c[0], c[1]
        r = a.start_upload("frozen/app")
        self.assertEqual(r.status, 202, r)
        loc = bt.location_path(r.header("Location"))
        data = self.rng.randbytes(32 << 20)  # far more than the socket buffers between B and A hold
        a.send_signal(signal.SIGSTOP)
        self.addCleanup(lambda: a.send_signal(signal.SIGCONT))
        result = {}

        def patch():
            result["r"] = b.request("PATCH", loc, body=data, timeout=60,
                                    headers={"Content-Range": f"0-{len(data) - 1}",
                                             "Content-Type": "application/octet-stream"})
        t = threading.Thread(target=patch, daemon=True)
        t.start()
        # While B's forward to the frozen owner is stuck, B keeps answering on its only I/O thread.
        deadline, answered = time.monotonic() + 3, 0
        while time.monotonic() < deadline:
            start = time.monotonic()
            g = b.get("/v2/", timeout=5)
            self.assertEqual(g.status, 200, g)
            self.assertLess(time.monotonic() - start, 1.0, "B stalled behind the forward")
            answered += 1
        self.assertTrue(t.is_alive(), "the PATCH finished although its owner is frozen")
        a.send_signal(signal.SIGCONT)
        t.join(60)
        self.assertFalse(t.is_alive(), "the PATCH never finished after the owner woke")
        self.assertEqual(result["r"].status, 202, result["r"])
        self.assertEqual(result["r"].header("Range"), f"0-{len(data) - 1}")
        print(f"  {answered} requests answered by B during the stalled forward", file=sys.stderr)

    def test_owner_dying_mid_forward_is_a_503(self):
        c = self.cluster.start()
        a, b = c[0], c[1]
        r = a.start_upload("frozen/app")
        self.assertEqual(r.status, 202, r)
        loc = bt.location_path(r.header("Location"))
        data = self.rng.randbytes(32 << 20)
        a.send_signal(signal.SIGSTOP)
        result = {}

        def patch():
            result["r"] = b.request("PATCH", loc, body=data, timeout=60,
                                    headers={"Content-Range": f"0-{len(data) - 1}",
                                             "Content-Type": "application/octet-stream"})
        t = threading.Thread(target=patch, daemon=True)
        t.start()
        # Mid-forward: the frozen owner's kernel holds body bytes B already sent on.
        def queued_at_owner():
            out = subprocess.run(["ss", "-Htn", "state", "established", f"( sport = :{a.port} )"],
                                 capture_output=True, text=True).stdout
            return sum(int(line.split()[0]) for line in out.splitlines() if line.split())
        bt.poll(lambda: queued_at_owner() > (32 << 10), 10, 0.05, "B's forward to reach the frozen owner")
        self.assertTrue(t.is_alive(), "the PATCH finished although its owner is frozen")
        a.send_signal(signal.SIGKILL)
        a.wait(10)
        t.join(60)
        self.assertFalse(t.is_alive(), "the PATCH never ended after its owner died")
        self.assertEqual(result["r"].status, 503, result["r"])
        self.assertEqual(result["r"].error_codes(), ["UNAVAILABLE"], result["r"])
        self.assertEqual(b.get("/v2/").status, 200, "B went down with the owner")


class CrossReplicaUploadTest(ReplicationTestCase):
    def test_chunked_upload_alternating_replicas(self):
        c = self.cluster.start()
        a, b, cc = c[0], c[1], c[2]
        repo = "up/app"
        data = self.rng.randbytes(700 << 10)
        cut1, cut2 = 200 << 10, 450 << 10
        digest = bt.sha256_digest(data)

        r = a.start_upload(repo)
        self.assertEqual(r.status, 202, f"POST on A: {r}")
        loc = bt.location_path(r.header("Location"))
        upload_id = loc.split("?")[0].rstrip("/").rsplit("/", 1)[1]
        self.assertTrue(upload_id.startswith(a.replica_id + "_"), f"upload id {upload_id} is not A's")

        r = b.request("PATCH", loc, body=data[:cut1],
                      headers={"Content-Range": f"0-{cut1 - 1}", "Content-Type": "application/octet-stream"})
        self.assertEqual(r.status, 202, f"PATCH chunk 1 on B: {r}")
        self.assertEqual(r.header("Range"), f"0-{cut1 - 1}")
        loc = bt.location_path(r.header("Location"))
        self.assertIn(upload_id, loc)

        g = cc.get(loc)
        self.assertEqual(g.status, 204, f"GET upload status on C: {g}")
        self.assertEqual(g.header("Range"), f"0-{cut1 - 1}")

        r = cc.request("PATCH", loc, body=data[cut1:cut2],
                       headers={"Content-Range": f"{cut1}-{cut2 - 1}", "Content-Type": "application/octet-stream"})
        self.assertEqual(r.status, 202, f"PATCH chunk 2 on C: {r}")
        self.assertEqual(r.header("Range"), f"0-{cut2 - 1}")
        loc = bt.location_path(r.header("Location"))

        # A chunk that does not continue where the session is must be refused wherever it lands.
        r = b.request("PATCH", loc, body=b"x" * 10, headers={"Content-Range": f"{cut1}-{cut1 + 9}"})
        self.assertEqual(r.status, 416, f"out-of-order PATCH on B: {r}")

        r = b.request("PUT", bt.with_query(loc, digest=digest), body=data[cut2:],
                      headers={"Content-Type": "application/octet-stream"})
        self.assertEqual(r.status, 201, f"final PUT on B: {r}")
        self.assertEqual(r.header("Docker-Content-Digest"), digest)
        # The session is finished everywhere.
        self.assertEqual(cc.get(loc).status, 404)
        for rep in c:
            g = rep.get(f"/v2/{repo}/blobs/{digest}")
            self.assertEqual(g.status, 200, f"blob on {rep.replica_id}: {g}")
            self.assertEqual(g.body, data, f"blob bytes on {rep.replica_id}")
        # A manifest referencing it can be pushed through C and pulled from A.
        config = b'{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}'
        cc.push_blob(repo, config)
        manifest = json.dumps({
            "schemaVersion": 2, "mediaType": bt.OCI_MANIFEST,
            "config": {"mediaType": bt.OCI_CONFIG, "digest": bt.sha256_digest(config), "size": len(config)},
            "layers": [{"mediaType": bt.OCI_LAYER, "digest": digest, "size": len(data)}]}).encode()
        r = cc.put_manifest(repo, "v1", manifest)
        self.assertEqual(r.status, 201, f"PUT manifest on C: {r}")
        got = bt.pull_image(a, repo, "v1", ACCEPT)
        self.assertEqual(got["status"], 200)
        self.assertEqual(got["blobs"][digest], data)


# --------------------------------------------------------------------------- read-through


class ReadThroughAfterPeerRestartTest(ReplicationTestCase):
    write_quorum = "local"  # the image exists on one replica only: read-through is the only way

    # Read-through must ask every peer, not only those whose last log poll
    # succeeded: a peer's reachable flag lags up to a poll interval behind it coming back.
    def test_read_through_from_a_peer_that_just_restarted(self):
        c = self.cluster.start()
        holder, reader = c[1], c[2]
        for trial in range(5):
            holder.send_signal(signal.SIGKILL)
            holder.wait(10)
            bt.poll(lambda: not next(p for p in reader.status()["peers"] if p["id"] == holder.replica_id)["reachable"],
                    CONVERGE, 0.02, "the reader to notice the holder is down")
            holder.restart()
            holder.wait_readyz(CONVERGE)
            img = image(self.rng, [2048], f"rt{trial}")
            push_ok(self, holder, "rt/app", f"t{trial}", img)
            flagged_down = not next(p for p in reader.status()["peers"] if p["id"] == holder.replica_id)["reachable"]
            r = reader.get(f"/v2/rt/app/manifests/t{trial}", headers={"Accept": ACCEPT})
            if flagged_down:  # the case under test: the holder is up, the reader has not polled it yet
                self.assertEqual(r.status, 200, f"read-through from the restarted holder: {r}")
                self.assertEqual(r.body, img["manifest"])
                return
            self.assertEqual(r.status, 200, f"read-through: {r}")
        self.skipTest("the reader re-contacted the holder before every GET; the window was not hit")


# --------------------------------------------------------------------------- 7


class PeerAuthTest(ReplicationTestCase):
    def test_peer_api_requires_secret(self):
        c = self.cluster.start()
        repo = "auth/app"
        one, two = image(self.rng, [2048], "one"), image(self.rng, [2048], "two")
        push_ok(self, c[0], repo, "v1", one)
        push_ok(self, c[0], repo, "other", two)
        c.wait_caught_up()
        target = c[1]

        # A real event from the log, re-stamped far in the future and pointing v1 at `two`:
        # applied, it would move the tag everywhere.
        log = target.peer_request("GET", "log?after=0&limit=1000").json()
        tag_events = [json.loads(e["event"]) for e in log["entries"]]
        tag_events = [e for e in tag_events if e["type"] == "tag" and e["tag"] == "v1"]
        self.assertTrue(tag_events, "no tag event in the log")
        forged = dict(tag_events[0], digest=two["digest"], clock=tag_events[0]["clock"] + (3600_000 << 16))
        body = json.dumps({"events": [forged]}).encode()

        def state():
            return ([tag_map(r, repo) for r in c], [r.status()["log_head"] for r in c])
        before = state()
        self.assertEqual(before[0][0]["v1"], one["digest"])

        wrong = [None, "", "x", c.secret[:-1], c.secret + "x", c.secret.upper() if c.secret.upper() != c.secret
                 else "A" * len(c.secret), "0" * len(c.secret)]
        blob = next(iter(one["blobs"]))
        requests = [("GET", "log?after=0"), ("GET", "state?part=links"), ("POST", "apply"), ("GET", "status"),
                    ("GET", f"blobs/{blob}"), ("GET", f"manifests/{one['digest']}?repo={repo}"),
                    ("GET", f"record?repo={repo}&tag=v1"), ("HEAD", "log")]
        for r in c:
            for method, path in requests:
                for secret in wrong:
                    headers = {"Content-Type": "application/json"}
                    if secret is not None:
                        headers[bt.PEER_SECRET_HEADER] = secret
                    resp = r.request(method, "/_berth/v1/" + path, body=body if method == "POST" else None,
                                     headers=headers)
                    what = f"{method} /_berth/v1/{path} on {r.replica_id} with secret {secret!r}"
                    self.assertEqual(resp.status, 401, f"{what}: {resp}")
                    if method != "HEAD":
                        self.assertEqual(resp.error_codes(), ["UNAUTHORIZED"], what)
                    for leak in (one["digest"], blob, "entries", "epoch"):
                        self.assertNotIn(leak.encode(), resp.body, f"{what} leaks {leak}")
        # Nothing changed, on any replica, also after some poll rounds.
        c.wait_caught_up()
        self.assertEqual(state(), before, "a refused peer request changed something")

        # Control: the same body with the right secret is applied (so the refusals mattered).
        resp = target.peer_request("POST", "apply", body=body, headers={"Content-Type": "application/json"})
        self.assertEqual(resp.status, 200, f"apply with the secret: {resp}")
        self.assertEqual(tag_map(target, repo)["v1"], two["digest"])
        bt.poll(lambda: all(tag_map(r, repo)["v1"] == two["digest"] for r in c), CONVERGE, 0.05,
                "the applied tag to reach every replica")


if __name__ == "__main__":
    unittest.main(verbosity=2)
