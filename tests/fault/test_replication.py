#!/usr/bin/env python3
"""Replication fault tests: three real berth replicas (separate temp roots, free loopback ports,
peered with each other) per test, serving what was written through any one of them:

1. push through one replica, pull the same image from the other two at once;
6. a chunked upload whose requests alternate between replicas completes and is served; a forward
   to a frozen owner holds up no other request, and the owner dying mid-forward is a 503;
7. the peer API refuses requests without the right secret and they change nothing;
8. a sparse manifest (a layer never pushed) replicates with the blobs that were pushed;
and a read-through asks a peer that has just restarted, before the reader has polled it again.

Replicas killed, wiped or missing a delete (2, 3, 5) are test_replication_durability.py's; a
partition (4) is test_replication_partition.py's. The harness (seeded images, what a replica must
serve, logs of a failing test) is tests/lib/replication_case.py's.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
from replication_case import ACCEPT, CONVERGE, ReplicationTestCase, image, push_ok, tag_map  # noqa: E402


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


# --------------------------------------------------------------------------- 8


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


if __name__ == "__main__":
    unittest.main(verbosity=2)
