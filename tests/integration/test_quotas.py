#!/usr/bin/env python3
"""Quotas per namespace (docs/quotas.md), against the real binary.

- A byte quota refuses the blob upload (monolithic, chunked) and the cross-repository mount that
  would pass it with 403 DENIED naming the quota and the usage; the refused blob is nowhere
  (HEAD 404, no file on disk). A blob already in the namespace counts once: pushing it into
  another repository of the namespace passes at the limit.
- A repository quota refuses the blob upload, mount and manifest PUT that would create one more
  repository; the catalog is unchanged.
- Threads pushing distinct blobs at once into a namespace near its limit: what was accepted
  never passes the quota (and fills it exactly).
- GET /_berth/v1/usage reports every namespace with its usage and limits (null: none), the
  same after a restart; with authentication it needs a signed-in caller and shows the
  namespaces whose every repository the caller may pull from.
- /metrics has usage and limits of the namespaces a rule matches, and the refusals.
"""

import os
import sys
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402

KIB = 1024
QUOTAS = [
    {"namespaces": "team-*", "max_bytes": 100 * KIB},
    {"namespaces": "few", "max_repositories": 2},
    {"namespaces": "race", "max_bytes": 10 * KIB + 500},
    {"namespaces": "free"},  # matched, without limits
]
EMPTY_INDEX = b'{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}'
INDEX = "application/vnd.oci.image.index.v1+json"


def usage_of(b, headers=None):
    r = b.get("/_berth/v1/usage", headers=headers or {})
    if r.status != 200:
        raise AssertionError(f"GET /_berth/v1/usage: {r}")
    return {entry["namespace"]: entry for entry in r.json()["namespaces"]}


class QuotaTest(unittest.TestCase):
    def setUp(self):
        self.b = bt.serve(self.addCleanup, {"quotas": QUOTAS, "log": {"access": False}})

    def assert_denied(self, r, *words):
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.error_codes(), ["DENIED"], r)
        message = r.json()["errors"][0]["message"]
        for word in words:
            self.assertIn(word, message)
        return message

    def assert_nowhere(self, repo, digest):
        self.assertEqual(self.b.head(f"/v2/{repo}/blobs/{digest}").status, 404)
        self.assertNotIn(digest.split(":")[1], bt.blob_files(self.b.root))

    def upload(self, repo, data, chunked=False):
        """POST+PUT (or POST+PATCH+PUT); returns the final response."""
        loc = self.b.upload_location(repo)
        if chunked:
            r = self.b.request("PATCH", loc, body=data, headers={"Content-Type": "application/octet-stream"})
            self.assertEqual(r.status, 202, r)
            loc = bt.location_path(r.header("Location"))
            return self.b.request("PUT", bt.with_query(loc, digest=bt.sha256_digest(data)))
        return self.b.request("PUT", bt.with_query(loc, digest=bt.sha256_digest(data)), body=data,
                              headers={"Content-Type": "application/octet-stream"})

    def test_byte_quota(self):
        b = self.b
        first, second = os.urandom(60 * KIB), os.urandom(60 * KIB)
        a = b.push_blob("team-a/app", first)

        r = self.upload("team-a/app", second)
        message = self.assert_denied(r, "quota exceeded", "namespace team-a", str(100 * KIB), str(60 * KIB))
        self.assertIn(str(120 * KIB), message)
        self.assert_nowhere("team-a/app", bt.sha256_digest(second))
        r = self.upload("team-a/app", second, chunked=True)
        self.assert_denied(r, "namespace team-a")
        r = b.request("POST", f"/v2/team-a/app/blobs/uploads/?digest={bt.sha256_digest(second)}", body=second,
                      headers={"Content-Type": "application/octet-stream"})
        self.assert_denied(r, "namespace team-a")
        self.assert_nowhere("team-a/app", bt.sha256_digest(second))
        self.assertEqual(os.listdir(os.path.join(b.root, "uploads")), [])  # no session, no scratch file left

        # Stored in another namespace, the blob cannot be mounted in either.
        b.push_blob("team-b/app", second)
        r = b.request("POST", f"/v2/team-a/app/blobs/uploads/?mount={bt.sha256_digest(second)}&from=team-b/app",
                      headers={"Content-Length": "0"})
        self.assert_denied(r, "namespace team-a")
        self.assertEqual(b.head(f"/v2/team-a/app/blobs/{bt.sha256_digest(second)}").status, 404)

        # Deduplicated: the blob team-a holds already fits in another of its repositories.
        self.assertEqual(b.push_blob("team-a/other", first), a)
        r = b.request("POST", f"/v2/team-a/third/blobs/uploads/?mount={a}&from=team-a/app",
                      headers={"Content-Length": "0"})
        self.assertEqual(r.status, 201, r)
        usage = usage_of(b)
        self.assertEqual(usage["team-a"], {"namespace": "team-a", "used_bytes": 60 * KIB, "repositories": 3,
                                           "max_bytes": 100 * KIB, "max_repositories": None})
        self.assertEqual(usage["team-b"]["used_bytes"], 60 * KIB)

        # A namespace no rule matches has no limits.
        b.push_blob("elsewhere/app", os.urandom(200 * KIB))
        self.assertEqual(usage_of(b)["elsewhere"], {"namespace": "elsewhere", "used_bytes": 200 * KIB,
                                                    "repositories": 1, "max_bytes": None,
                                                    "max_repositories": None})

        metrics = b.metrics()
        self.assertEqual(metrics['berth_namespace_used_bytes{namespace="team-a"}'], 60 * KIB)
        self.assertEqual(metrics['berth_namespace_repositories{namespace="team-a"}'], 3)
        self.assertEqual(metrics['berth_namespace_max_bytes{namespace="team-a"}'], 100 * KIB)
        self.assertNotIn('berth_namespace_max_repositories{namespace="team-a"}', metrics)
        self.assertNotIn('berth_namespace_used_bytes{namespace="elsewhere"}', metrics)  # no rule: no series
        self.assertEqual(metrics['berth_quota_denied_total{quota="bytes"}'], 4)

        # The same after a restart: usage lives in the index, it is not recounted on top.
        usage = usage_of(b)
        b.stop()
        b.restart()
        self.assertEqual(usage_of(b), usage)
        self.assertEqual(b.push_blob("team-a/app", os.urandom(40 * KIB))[:7], "sha256:")
        self.assert_denied(self.upload("team-a/app", b"x"), "namespace team-a")

    def test_repository_quota(self):
        b = self.b
        b.push_image("few/a", "v1")
        b.push_image("few/b", "v1")
        shared = b.push_blob("few/a", b"shared")
        catalog = b.get("/v2/_catalog").json()["repositories"]

        self.assert_denied(self.upload("few/c", b"new"), "namespace few", "may hold 2 repositories", "make it 3")
        r = b.request("POST", f"/v2/few/c/blobs/uploads/?mount={shared}&from=few/a", headers={"Content-Length": "0"})
        self.assert_denied(r, "repositories")
        self.assert_denied(b.put_manifest("few/c", "v1", EMPTY_INDEX, INDEX), "repositories")
        self.assertEqual(b.get("/v2/_catalog").json()["repositories"], catalog)
        self.assertEqual(b.get("/v2/few/c/tags/list").status, 404)

        # The repositories it has take more.
        b.push_image("few/a", "v2")
        self.assertEqual(b.put_manifest("few/b", "empty", EMPTY_INDEX, INDEX).status, 201)
        self.assertEqual(usage_of(b)["few"]["repositories"], 2)
        self.assertEqual(b.metrics()['berth_quota_denied_total{quota="repositories"}'], 3)
        self.assertEqual(b.metrics()['berth_namespace_max_repositories{namespace="few"}'], 2)

    def test_concurrent_pushes_at_the_limit(self):
        b = self.b
        quota = QUOTAS[2]["max_bytes"]
        accepted, denied, errors = [], [], []
        lock = threading.Lock()
        barrier = threading.Barrier(8)

        def pusher(index):
            try:
                barrier.wait(10)
                for n in range(4):
                    data = os.urandom(KIB)
                    r = self.upload(f"race/r{index % 3}", data)
                    with lock:
                        if r.status == 201:
                            accepted.append(bt.sha256_digest(data))
                        elif r.status == 403 and r.error_codes() == ["DENIED"]:
                            denied.append(bt.sha256_digest(data))
                        else:
                            errors.append(repr(r))
            except Exception as err:  # noqa: BLE001 - reported below
                errors.append(repr(err))

        threads = [threading.Thread(target=pusher, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertEqual(errors, [])
        self.assertEqual(len(accepted) + len(denied), 32)
        self.assertLessEqual(len(accepted) * KIB, quota)
        self.assertEqual(len(accepted), quota // KIB)  # refused only once no 1 KiB fit any more
        self.assertEqual(usage_of(b)["race"]["used_bytes"], len(accepted) * KIB)
        files = bt.blob_files(b.root)
        for digest in denied:
            self.assertNotIn(digest.split(":")[1], files)


class UsageAuthTest(unittest.TestCase):
    PASSWORDS = {"alice": "alice-pw", "bob": "bob-pw", "root": "root-pw"}

    def setUp(self):
        self.b = bt.serve(self.addCleanup, {"quotas": QUOTAS, "auth": {"htpasswd": "htpasswd", "rules": [
            {"repository": "**", "principals": ["user:root"], "actions": ["pull", "push"]},
            {"repository": "team-a/app", "principals": ["user:alice"], "actions": ["pull"]},
            {"repository": "team-b/**", "principals": ["user:bob"], "actions": ["pull"]},
        ]}}, self.PASSWORDS)

    def auth(self, user):
        return bt.basic_auth(user, self.PASSWORDS[user])

    def test_usage_needs_a_signed_in_caller_and_shows_what_it_may_pull(self):
        b = self.b
        for repo in ("team-a/app", "team-a/lib", "team-b/app"):
            r = b.request("POST", f"/v2/{repo}/blobs/uploads/?digest={bt.sha256_digest(repo.encode())}",
                          body=repo.encode(), headers={**self.auth("root"), "Content-Type": "application/octet-stream"})
            self.assertEqual(r.status, 201, r)
        r = b.get("/_berth/v1/usage")
        self.assertEqual(r.status, 401, r)
        self.assertEqual(r.error_codes(), ["UNAUTHORIZED"])
        self.assertIsNotNone(r.header("WWW-Authenticate"))
        self.assertEqual(b.get("/_berth/v1/usage", headers=bt.basic_auth("alice", "wrong")).status, 401)
        self.assertEqual(sorted(usage_of(b, self.auth("root"))), ["team-a", "team-b"])
        # A namespace's figures count every repository in it: only a caller who may see them all
        # sees them, so alice (team-a/app alone) learns nothing of team-a/lib.
        self.assertEqual(usage_of(b, self.auth("alice")), {})
        bob = usage_of(b, self.auth("bob"))
        self.assertEqual(sorted(bob), ["team-b"])
        self.assertEqual(bob["team-b"]["repositories"], 1)


if __name__ == "__main__":
    unittest.main()
