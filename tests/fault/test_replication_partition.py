#!/usr/bin/env python3
"""Replication fault test 4: three real berth replicas; one is partitioned (a network namespace
whose link is cut; a restart without peers where network namespaces are not available) while tags
move on both sides, then healed, and the three converge to the same tags (last writer wins).

The harness (seeded images, what a replica must serve, logs of a failing test) is
tests/lib/replication_case.py's; the other replication tests are test_replication*.py.
"""

import os
import random
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
from replication_case import ACCEPT, CONVERGE, ReplicationTestCase, image, push_ok, tag_map  # noqa: E402


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


if __name__ == "__main__":
    unittest.main(verbosity=2)
