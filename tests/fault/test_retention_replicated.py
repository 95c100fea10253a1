#!/usr/bin/env python3
"""Retention across three replicas, one of them down while the others delete.

Tags are pushed and replicated to all three; one tag is pulled on replica 2 only. Replica 2 stops
(writing its pull times), replicas 0 and 1 restart with retention policies (expire_tags on app,
keep_last 1 on svc, expire_unpulled_seconds 1 on cold) and apply them: each deletion is made by one
replica only (the repository's owner), and the unpulled rule is skipped while replica 2 cannot be
asked for its pulls. Replica 2 restarts on its old store and converges to the deletions: nothing it
held comes back, anywhere. Once it answers, the never-pulled cold tag goes and the tag pulled on
replica 2 stays (its pull time reaches the owner through the peer protocol's pulls read).

Synchronisation is by polling (tags lists, /readyz, /_berth/v1/status, /metrics), never by fixed
sleeps; BERTH_KEEP=1 prints the replicas' logs.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402

CONVERGE = 60  # seconds: a restarted replica waits 10 s for a peer that is down before it is ready

RETENTION = {"interval_seconds": 1, "policies": [
    {"name": "no-old", "repositories": ["app"], "expire_tags": ["old-*"]},
    {"name": "last-one", "repositories": ["svc"], "keep_last": 1},
    {"name": "cold", "repositories": ["cold"], "expire_unpulled_seconds": 1},
]}
EXPECTED = {"app": ["v1"], "svc": ["s3"], "cold": ["pulled"]}
DELETED = [("app", "old-1"), ("app", "old-2"), ("svc", "s1"), ("svc", "s2")]


def tags(replica, repo):
    r = replica.get(f"/v2/{repo}/tags/list")
    if r.status != 200:
        raise AssertionError(f"tags/list {repo} on {replica.replica_id}: {r}")
    return sorted(r.json()["tags"])


def retention_audits(replica):
    return [line for line in replica.log_lines()
            if line.get("msg") == "audit" and line.get("action", "").startswith("retention delete")]


class RetentionReplicatedTest(unittest.TestCase):
    def setUp(self):
        self.cluster = bt.Cluster(3)
        self.addCleanup(self.cluster.cleanup)
        self.addCleanup(self.print_logs_on_failure)

    def print_logs_on_failure(self):
        result = getattr(getattr(self, "_outcome", None), "result", None)
        failed = result is not None and any(t is self for t, _ in result.failures + result.errors)
        if failed or os.environ.get("BERTH_KEEP"):
            print(f"\n{self.cluster.dump_logs()}", file=sys.stderr)

    def test_deletions_converge_on_a_replica_that_was_down(self):
        c = self.cluster.start()
        for repo, tag in [("app", "old-1"), ("app", "old-2"), ("app", "v1"), ("svc", "s1"), ("svc", "s2"),
                          ("svc", "s3"), ("cold", "pulled"), ("cold", "unpulled")]:
            c[0].push_image(repo, tag)  # in this order: s3 is svc's newest
        c.wait_caught_up()
        for r in c:
            self.assertEqual(tags(r, "app"), ["old-1", "old-2", "v1"], r.replica_id)
            self.assertEqual(tags(r, "svc"), ["s1", "s2", "s3"], r.replica_id)
        self.assertEqual(c[2].get("/v2/cold/manifests/pulled", headers={"Accept": bt.OCI_MANIFEST}).status, 200)

        # Replica 2 goes down (writing the pull it served); 0 and 1 come back with the policies.
        for r in (c[2], c[0], c[1]):
            self.assertEqual(r.stop(), 0, r.replica_id)
        c.config_overrides["retention"] = RETENTION
        for r in (c[0], c[1]):
            r.spawn()
        for r in (c[0], c[1]):
            r.wait_ready()

        def applied_on_survivors():
            return all(tags(r, "app") == ["v1"] and tags(r, "svc") == ["s3"] for r in (c[0], c[1]))
        bt.poll(applied_on_survivors, CONVERGE, 0.2, "replicas 0 and 1 to apply retention")

        # With replica 2 out of reach nobody can tell whether cold's tags were pulled there: kept.
        def skipped():
            return sum(r.metrics().get("berth_retention_unpulled_skipped_total", 0) for r in (c[0], c[1])) >= 1
        bt.poll(skipped, CONVERGE, 0.2, "a round to skip the unpulled rule")
        for r in (c[0], c[1]):
            self.assertEqual(tags(r, "cold"), ["pulled", "unpulled"], r.replica_id)

        # Each deletion was made once, by the repository's owner, and audited there.
        audits = retention_audits(c[0]) + retention_audits(c[1])
        self.assertEqual(sorted((a["repository"], a["reference"]) for a in audits), sorted(DELETED),
                         [(a["replica"], a["repository"], a["reference"]) for a in audits])
        self.assertTrue(all(a["action"] == "retention delete tag" and a["reason"] for a in audits))

        # Replica 2 comes back on its old store: it takes the tombstones, and brings nothing back.
        c[2].start()
        c[2].wait_readyz(CONVERGE)

        def converged():
            return all(tags(r, repo) == want for r in c for repo, want in EXPECTED.items())
        bt.poll(converged, CONVERGE, 0.2, "every replica to hold only what retention kept")
        c.wait_caught_up()
        for r in c:
            for repo, want in EXPECTED.items():
                self.assertEqual(tags(r, repo), want, f"{r.replica_id} {repo}")
            for repo, tag in DELETED + [("cold", "unpulled")]:
                self.assertEqual(r.get(f"/v2/{repo}/manifests/{tag}").status, 404, f"{r.replica_id} {repo}:{tag}")
        audits = [a for r in c for a in retention_audits(r)]
        self.assertEqual(sorted((a["repository"], a["reference"]) for a in audits),
                         sorted(DELETED + [("cold", "unpulled")]))


if __name__ == "__main__":
    unittest.main(verbosity=2)
