#!/usr/bin/env python3
"""Retention policies on the real binary.

One server, four repositories, one policy each: keep_last (keep/app), expire_tags with keep_tags
(pat/app), expire_unpulled_seconds with one tag pulled by tag and one by digest (pull/app), and
delete_untagged_after_seconds (untag/app). With retention.interval_seconds 0 nothing happens
online: `berth gc --dry-run --config ...` beside the running server lists exactly what the policies
would delete and changes nothing; the pulls it relies on were written when the server stopped
(pull times are kept in memory and flushed in batches). With interval 1 the same deletions happen
online: tags lists, audit lines (policy and reason) and the retention metrics say so, and the
pulled tags stay. A bad policy stops the start with a message naming the key.
"""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402

UNPULLED_SECONDS = 4

POLICIES = [
    {"name": "keep-two", "repositories": ["keep/*"], "keep_last": 2},
    {"name": "no-prs", "repositories": ["pat/*"], "expire_tags": ["pr-*"], "keep_tags": ["pr-keep"]},
    {"name": "cold", "repositories": ["pull/*"], "expire_unpulled_seconds": UNPULLED_SECONDS},
    {"name": "untagged", "repositories": ["untag/*"], "delete_untagged_after_seconds": 1},
]


def tags(b, repo):
    r = b.get(f"/v2/{repo}/tags/list")
    assert r.status == 200, r
    return sorted(r.json()["tags"])


class RetentionTest(unittest.TestCase):
    def setUp(self):
        self.b = bt.Berth({"log": {"access": False},
                           "retention": {"interval_seconds": 0, "policies": POLICIES}})
        self.addCleanup(self.b.cleanup)
        self.b.start()

    def state(self):
        return {repo: tags(self.b, repo) for repo in ("keep/app", "pat/app", "pull/app", "untag/app")}

    def dry_run(self):
        r = bt.run_cli("gc", "--dry-run", "--config", self.b.config_path(), "--root", self.b.root)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_policies_dry_run_then_online(self):
        b = self.b
        for tag in ("t1", "t2", "t3"):  # pushed in this order: t1 is the oldest
            b.push_image("keep/app", tag)
        for tag in ("pr-1", "pr-keep", "main"):
            b.push_image("pat/app", tag)
        for tag in ("unused", "used"):
            b.push_image("pull/app", tag)
        by_digest = b.push_image("pull/app", "by-digest")
        lone = b.push_image("untag/app", None)
        tagged = b.push_image("untag/app", "v1")
        self.assertEqual(b.get("/v2/pull/app/manifests/used", headers={"Accept": bt.OCI_MANIFEST}).status, 200)
        self.assertEqual(b.head(f"/v2/pull/app/manifests/{by_digest['digest']}").status, 200)
        # Pull times reach the index in batches; stopping writes what was noted.
        self.assertEqual(b.stop(), 0)
        b.restart()
        before = self.state()
        self.assertEqual(before["keep/app"], ["t1", "t2", "t3"])

        # Once the unpulled window has passed, the dry run lists what every policy would delete.
        def unpulled_listed():
            out = self.dry_run()
            return out if "pull/app:unused" in out else None
        out = bt.poll(unpulled_listed, UNPULLED_SECONDS + 20, 0.5, "the dry run to find pull/app:unused unpulled")
        would = sorted(line for line in out.splitlines() if line.startswith("would delete "))
        self.assertEqual([line.split(" (")[0] for line in would], sorted([
            "would delete tag keep/app:t1",
            "would delete tag pat/app:pr-1",
            "would delete tag pull/app:unused",
            f"would delete manifest untag/app@{lone['digest']}",
        ]), out)
        self.assertIn("would delete tag keep/app:t1 (keep-two: not among the 2 most recently pushed)", out)
        self.assertIn("would delete tag pat/app:pr-1 (no-prs: matches expire_tags \"pr-*\")", out)
        self.assertIn(f"neither pushed nor pulled for {UNPULLED_SECONDS} s", out)
        self.assertIn("dry run: retention: 3 tags, 1 manifests of 4 repositories (9 tags judged)", out)
        self.assertRegex(out.splitlines()[-1], r"^dry run: ")
        self.assertNotIn("deleted ", out)
        # Nothing changed.
        self.assertEqual(self.state(), before)
        self.assertEqual(b.get(f"/v2/untag/app/manifests/{lone['digest']}").status, 200)
        self.assertTrue(b.alive())

        # Online, every second: the same deletions happen.
        self.assertEqual(b.stop(), 0)
        b.config["retention"]["interval_seconds"] = 1
        b.restart()
        expected = {"keep/app": ["t2", "t3"], "pat/app": ["main", "pr-keep"],
                    "pull/app": ["by-digest", "used"], "untag/app": ["v1"]}
        bt.poll(lambda: self.state() == expected, 20, 0.2, "retention to apply the policies online")
        self.assertEqual(b.get(f"/v2/untag/app/manifests/{lone['digest']}").status, 404)
        self.assertEqual(b.get(f"/v2/untag/app/manifests/{tagged['digest']}").status, 200)
        self.assertEqual(b.get("/v2/keep/app/manifests/t1").status, 404)

        audits = [line for line in b.log_lines() if line.get("msg") == "audit"
                  and line.get("action", "").startswith("retention delete")]
        seen = sorted((a["action"], a["repository"], a["reference"], a["policy"]) for a in audits)
        self.assertEqual(seen, sorted([
            ("retention delete tag", "keep/app", "t1", "keep-two"),
            ("retention delete tag", "pat/app", "pr-1", "no-prs"),
            ("retention delete tag", "pull/app", "unused", "cold"),
            ("retention delete manifest", "untag/app", lone["digest"], "untagged"),
        ]))
        self.assertTrue(all(a["reason"] for a in audits))

        # A round after the one that deleted judges the six tags left, and deletes nothing more.
        def metrics_settled():
            m = b.metrics()
            return m if m.get("berth_retention_last_run_tags_evaluated") == 6 else None
        m = bt.poll(metrics_settled, 10, 0.2, "a retention round over what is left")
        self.assertGreaterEqual(m["berth_retention_runs_total"], 2)
        self.assertEqual(m['berth_retention_deleted_total{kind="tag"}'], 3)
        self.assertEqual(m['berth_retention_deleted_total{kind="manifest"}'], 1)
        self.assertEqual(m["berth_retention_last_run_repositories"], 4)
        self.assertIn("berth_retention_last_run_seconds", m)

    def test_bad_policy_stops_the_start(self):
        path = os.path.join(self.b.tmp, "bad.json")
        for policy, message in [
            ({"repositories": ["a"], "keep_last": 0}, "retention.policies[0].keep_last must be at least 1"),
            ({"repositories": ["a"]}, "retention.policies[0] has no rule"),
            ({"repositories": ["a"], "expire_unpulled_days": -1}, "expire_unpulled_days must be a number of days"),
            ({"repositories": ["a"], "keep_last": 1, "keep": 1}, "unknown key retention.policies[0].keep"),
        ]:
            with self.subTest(policy=policy):
                with open(path, "w") as f:
                    json.dump({"retention": {"policies": [policy]}}, f)
                r = bt.run_cli("serve", "--config", path, "--root", os.path.join(self.b.tmp, "bad-root"),
                               "--listen", f"127.0.0.1:{bt.free_port()}", timeout=10)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(message, r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
