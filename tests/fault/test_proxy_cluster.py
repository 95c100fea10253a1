#!/usr/bin/env python3
"""Registry proxying across three replicas: each replica mirrors docker.io, which is a real CNCF
Distribution (Debian's docker-registry) on loopback behind a pacing TCP relay, so that a fetch is
still running while more clients arrive or while its owner is killed.

1. Single flight across the cluster: 16 concurrent GETs of one uncached blob, spread over the
   three replicas, make exactly one GET at the upstream; every client gets the right bytes.
2. The replica that owns a blob's fetch (found from the relay's connection, mapped to its
   process through /proc) is killed mid-fetch: the other two still serve the blob, right bytes,
   and the owner serves it once restarted.

Skipped as a whole (exit 0) when /usr/bin/docker-registry is not installed. BERTH_KEEP=1 prints
the replicas' logs of a failing test.
"""

import json
import os
import sys
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
import distribution as dist  # noqa: E402

ACCEPT = ", ".join([bt.OCI_MANIFEST, "application/vnd.docker.distribution.manifest.v2+json"])


def metric(m, name, upstream="docker.io"):
    label = f'upstream="{upstream}"'
    return sum(v for k, v in m.items() if (k == name or k.startswith(name + "{")) and label in k)


class ProxyClusterTest(unittest.TestCase):
    def setUp(self):
        self.a = dist.Distribution()
        self.addCleanup(self.a.cleanup)
        self.a.start()
        self.relay = dist.Relay(self.a.port)
        self.addCleanup(self.relay.close)
        self.cluster = bt.Cluster(3, config={"log": {"access": True}, "proxy": {"upstreams": [
            {"host": "docker.io", "url": self.relay.url}]}})
        self.addCleanup(self.cluster.cleanup)
        self.addCleanup(self.print_logs_on_failure)
        self.cluster.start()

    def print_logs_on_failure(self):
        result = getattr(getattr(self, "_outcome", None), "result", None)
        failed = result is not None and any(t is self for t, _ in result.failures + result.errors)
        if failed or os.environ.get("BERTH_KEEP"):
            print(f"\n{self.cluster.dump_logs()}\n--- upstream log (tail):\n{self.a.log()[-3000:]}", file=sys.stderr)

    def manifest(self, replica, repo, ref, img):
        r = replica.get(f"/v2/{repo}/manifests/{ref}?ns=docker.io", headers={"Accept": ACCEPT})
        self.assertEqual(r.status, 200, f"{replica.replica_id}: {r}")
        self.assertEqual(r.body, img["manifest"])
        self.assertEqual(r.header("OCI-Namespace"), "docker.io")

    def fetchers(self, path):
        """The replicas holding (or having held) an upstream connection that asked for path."""
        pids = {r.proc.pid: r for r in self.cluster if r.alive()}
        out = []
        for c in self.relay.connections(path):
            pid = dist.owner_pid(c["client_port"], self.relay.port, list(pids))
            if pid is not None:
                out.append(pids[pid])
        return out

    def test_single_flight_across_replicas(self):
        c, a = self.cluster, self.a
        img = a.push_image("library/shared", "v1", (16 << 20,))
        data = img["layers"][0]
        digest = bt.sha256_digest(data)
        path = f"/v2/library/shared/blobs/{digest}"
        for r in c:
            self.manifest(r, "library/shared", "v1", img)
        before = [r.metrics() for r in c]
        self.relay.set_rate(8 << 20)  # 2 s: all 16 clients arrive while it runs
        results = dist.concurrent_gets([(c[i % 3], f"/v2/library/shared/blobs/{digest}?ns=docker.io")
                                        for i in range(16)])
        for i, r in enumerate(results):
            who = f"client {i} via {c[i % 3].replica_id}"
            self.assertEqual(r.status, 200, f"{who}: {r}")
            self.assertTrue(r.body == data, f"{who}: {len(r.body)} bytes, {bt.sha256_digest(r.body)}")
        bt.poll(lambda: a.requests("GET", path), 10, 0.05, "the upstream's access log line")
        self.assertEqual(len(a.requests("GET", path)), 1, f"upstream GETs of the blob: {a.requests(path=path)}")
        relayed = [q for conn in self.relay.connections(path) for q in conn["requests"]
                   if q[0] == "GET" and q[1].split("?")[0] == path]
        self.assertEqual(len(relayed), 1, relayed)
        after = [r.metrics() for r in c]
        fetched = [metric(y, "berth_proxy_fetched_bytes_total") - metric(x, "berth_proxy_fetched_bytes_total")
                   for x, y in zip(before, after)]
        self.assertEqual(sorted(f >= len(data) for f in fetched), [False, False, True],
                         f"fetched bytes per replica: {fetched}")
        # every replica serves it afterwards (its own copy or read-through), nobody fetches again
        for r in c:
            got = r.get(f"/v2/docker.io/library/shared/blobs/{digest}")
            self.assertEqual(got.status, 200, f"{r.replica_id}: {got}")
            self.assertTrue(got.body == data)
        self.assertEqual(len(a.requests("GET", path)), 1)

    def test_fetch_owner_killed(self):
        c, a = self.cluster, self.a
        img = a.push_image("library/orphan", "v1", (32 << 20,))
        data = img["layers"][0]
        digest = bt.sha256_digest(data)
        path = f"/v2/library/orphan/blobs/{digest}"
        self.manifest(c[0], "library/orphan", "v1", img)
        self.relay.set_rate(2 << 20)  # 16 s for the whole blob: the owner dies long before
        first = threading.Event()
        result = {}

        def client():
            result.update(dist.slow_get(c[0].port, f"{path}?ns=docker.io", first_bytes_event=first))
        t = threading.Thread(target=client)
        t.start()
        self.assertTrue(first.wait(30), "no body bytes reached the client")
        owners = bt.poll(lambda: self.fetchers(path), 10, 0.05, "a replica holding the upstream connection")
        self.assertEqual(len(set(owners)), 1, [r.replica_id for r in owners])
        owner = owners[0]
        print(f"\nfetch owner of {digest[:19]}: {owner.replica_id} (client on berth-0)", file=sys.stderr)
        owner.kill()
        self.relay.set_rate(None)
        t.join(60)
        self.assertFalse(t.is_alive())
        # the interrupted client: a complete answer must be the right one
        if result.get("complete") and result.get("status") == 200:
            self.assertTrue(result["body"] == data, "a complete 200 with wrong bytes")
        else:
            self.assertEqual(result["body"], data[:len(result["body"])], "wrong bytes before the break")
        # the survivors serve it; never a complete wrong answer
        survivors = [r for r in c if r is not owner]
        first_try = {}
        for r in survivors:
            def served(r=r):
                got = r.get(f"{path}?ns=docker.io", timeout=120)
                first_try.setdefault(r.replica_id, got.status)
                if got.status == 200:
                    self.assertTrue(got.body == data, f"{r.replica_id}: 200 with wrong bytes")
                    return True
                return False
            bt.poll(served, 30, 0.2, f"{r.replica_id} to serve the blob after its fetch owner died")
        self.assertEqual(first_try, {r.replica_id: 200 for r in survivors},
                         "a survivor did not serve the blob at the first request after the owner died")
        self.assertGreaterEqual(len(a.requests("GET", path)), 1)
        # the owner, back, serves it too
        owner.restart()
        owner.wait_readyz()
        got = owner.get(f"/v2/docker.io/library/orphan/blobs/{digest}", timeout=120)
        self.assertEqual(got.status, 200, got)
        self.assertTrue(got.body == data)
        self.assertEqual(json.loads(owner.get("/v2/docker.io/library/orphan/manifests/v1",
                                              headers={"Accept": ACCEPT}).body), json.loads(img["manifest"]))


if __name__ == "__main__":
    dist.skip_unless_available("test_proxy_cluster.py")
    unittest.main()
