#!/usr/bin/env python3
"""Quotas across replicas (docs/quotas.md): usage is kept in each replica's index, and replicated
links go through the same accounting as local pushes.

1. Three replicas: what one replica accepted counts on the others once replicated (usage equal
   everywhere); a push on another replica that would pass the quota is refused there, while a
   blob the namespace already holds (pushed into another repository there) still fits. The same
   for the repository count.
2. Two replicas taking pushes into one namespace at the same time: neither accepts more than the
   quota by itself, together they stay within the documented bound (quota + what the other
   accepted before it saw it, at most one quota per replica), and once caught up both report
   the same usage and refuse what adds to a full namespace.

Synchronisation is by polling (/_berth/v1/status, the usage endpoint), never by fixed sleeps.
"""

import os
import sys
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402

KIB = 1024
CONVERGE = 20  # seconds


def usage(replica, ns):
    r = replica.get("/_berth/v1/usage")
    if r.status != 200:
        raise AssertionError(f"usage on {replica.replica_id}: {r}")
    for entry in r.json()["namespaces"]:
        if entry["namespace"] == ns:
            return entry
    return None


def upload(replica, repo, data):
    loc = replica.upload_location(repo)
    return replica.request("PUT", bt.with_query(loc, digest=bt.sha256_digest(data)), body=data,
                           headers={"Content-Type": "application/octet-stream"})


class ReplicatedQuotaTest(unittest.TestCase):
    def start(self, n, quotas):
        self.cluster = bt.Cluster(n, config={"quotas": quotas, "log": {"access": False}})
        self.addCleanup(self.cluster.cleanup)
        self.addCleanup(self.print_logs_on_failure)
        return self.cluster.start()

    def print_logs_on_failure(self):
        result = getattr(getattr(self, "_outcome", None), "result", None)
        if result is not None and any(t is self for t, _ in result.failures + result.errors):
            print(self.cluster.dump_logs(), file=sys.stderr)

    def same_usage_everywhere(self, ns, expected=None):
        def check():
            seen = [usage(r, ns) for r in self.cluster]
            if any(s is None for s in seen) or any(s != seen[0] for s in seen):
                return None
            return seen[0] if expected is None or seen[0]["used_bytes"] == expected else None
        return bt.poll(check, CONVERGE, 0.05, f"usage of {ns} equal on every replica")

    def test_accepted_on_one_counts_on_the_others(self):
        c = self.start(3, [{"namespaces": "team", "max_bytes": 100 * KIB, "max_repositories": 2}])
        first = os.urandom(70 * KIB)
        r = upload(c[0], "team/app", first)
        self.assertEqual(r.status, 201, r)
        c.wait_caught_up()
        seen = self.same_usage_everywhere("team", 70 * KIB)
        self.assertEqual(seen["repositories"], 1)
        self.assertEqual(seen["max_bytes"], 100 * KIB)

        # 70 KiB + 40 KiB > 100 KiB: refused on another replica, which never took the first push.
        second = os.urandom(40 * KIB)
        r = upload(c[1], "team/app", second)
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.error_codes(), ["DENIED"])
        self.assertIn("holds 71680", r.json()["errors"][0]["message"])
        self.assertEqual(c[1].head(f"/v2/team/app/blobs/{bt.sha256_digest(second)}").status, 404)
        self.assertNotIn(bt.sha256_digest(second).split(":")[1], bt.blob_files(c[1].root))

        # The namespace holds the first blob already: in a second repository, on a third replica, it fits.
        r = upload(c[2], "team/lib", first)
        self.assertEqual(r.status, 201, r)
        c.wait_caught_up()
        seen = self.same_usage_everywhere("team", 70 * KIB)
        self.assertEqual(seen["repositories"], 2)
        # A third repository is refused on whichever replica is asked.
        for replica in c:
            r = upload(replica, "team/three", b"small")
            self.assertEqual(r.status, 403, f"{replica.replica_id}: {r}")
            self.assertIn("repositories", r.json()["errors"][0]["message"])
        self.assertEqual(c[0].metrics()['berth_namespace_used_bytes{namespace="team"}'], 70 * KIB)
        self.assertEqual(c[2].metrics()['berth_namespace_repositories{namespace="team"}'], 2)

    def test_pushes_on_two_replicas_at_once(self):
        quota = 8 * KIB
        c = self.start(2, [{"namespaces": "race", "max_bytes": quota}])
        accepted = {r.replica_id: [] for r in c}
        repos = set()  # where something was accepted: the repositories the namespace holds
        errors = []
        lock = threading.Lock()
        barrier = threading.Barrier(4)

        def pusher(replica, index):
            try:
                barrier.wait(10)
                for n in range(8):
                    data = os.urandom(KIB)
                    r = upload(replica, f"race/r{index}", data)
                    if r.status == 201:
                        with lock:
                            accepted[replica.replica_id].append(bt.sha256_digest(data))
                            repos.add(f"race/r{index}")
                    elif r.status != 403 or r.error_codes() != ["DENIED"]:
                        errors.append(f"{replica.replica_id}: {r}")
            except Exception as err:  # noqa: BLE001 - reported below
                errors.append(repr(err))

        threads = [threading.Thread(target=pusher, args=(replica, i))
                   for i, replica in enumerate([c[0], c[0], c[1], c[1]])]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertEqual(errors, [])
        for replica_id, digests in accepted.items():
            self.assertLessEqual(len(digests) * KIB, quota, f"{replica_id} passed the quota by itself")
        total = sum(len(d) for d in accepted.values())
        self.assertLessEqual(total * KIB, 2 * quota)  # the bound for two replicas
        self.assertGreaterEqual(total * KIB, quota)  # each refused only once it saw the namespace full

        c.wait_caught_up()
        seen = self.same_usage_everywhere("race", total * KIB)
        self.assertEqual(seen["repositories"], len(repos))
        for replica in c:
            r = upload(replica, "race/r0", os.urandom(KIB))
            self.assertEqual(r.status, 403, f"{replica.replica_id}: {r}")


if __name__ == "__main__":
    unittest.main()
