#!/usr/bin/env python3
"""kill -9 at each step of finishing an upload, then restart on the same root.

berth's fault-injection hook: with BERTH_CRASH_AT=<point> in its environment it kills itself with
SIGKILL on reaching that point. The points along finishing an upload (PUT ?digest= of the last
chunk), in order:

  upload.verified   digest checked, before the blob file is committed
  blob.synced       file fsynced, before its rename into blobs/
  blob.renamed      after the rename, before the directory fsync
  blob.dir_synced   after the directory fsync, before the index commit
  upload.committed  index committed, before its sync

For each point: an image is pushed and acknowledged by a berth without the hook; berth is
restarted with the hook, an upload is opened, a chunk PATCHed, and the PUT ?digest= with the
rest kills it (the connection fails, exit by SIGKILL). The disk is checked as the crash left
it, then berth is restarted without the hook on the same root, and:

- the session: before the rename its scratch file is whole, so it survives the restart (README:
  "once a PATCH to it has been acknowledged it survives a restart") with every byte, and
  finishing it gives 201; from the
  rename on its file is gone, so the session is dropped: GET, PATCH, PUT and DELETE on it answer
  404 BLOB_UPLOAD_UNKNOWN (never 500); after the index commit the blob is served as well;
- berth_uploads_in_progress is 0 (the slot is freed) once the session is over;
- pushing the same blob again gives 201 and GET returns its bytes;
- the image acknowledged before the crash is served intact;
- every file under blobs/ holds exactly the bytes its name says (no half blob is visible);
- no "periodic task failed" in any stderr log, and berth_periodic_task_failures_total is
  exported (and zero).

Every process started here is killed in cleanup."""

import http.client
import json
import os
import signal
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402

POINTS = ["upload.verified", "blob.synced", "blob.renamed", "blob.dir_synced", "upload.committed"]
BEFORE_RENAME = {"upload.verified", "blob.synced"}  # the scratch file is still whole in uploads/
AFTER_COMMIT = {"upload.committed"}  # the index holds the blob's link
REPO = "crash/app"
ACKED_REPO = "crash/acked"


class HookedBerth(bt.Berth):
    """A Berth whose environment can carry BERTH_CRASH_AT."""

    crash_at = None

    def _spawn(self):
        self._starts += 1
        args = [bt.BIN, "serve", "--root", self.root, "--listen", f"{self.listen_host}:{self.port}"]
        if self.config:
            path = os.path.join(self.tmp, "config.json")
            with open(path, "w") as f:
                json.dump(self.config, f)
            args += ["--config", path]
        env = {k: v for k, v in os.environ.items() if k != "BERTH_CRASH_AT"}
        if self.crash_at:
            env["BERTH_CRASH_AT"] = self.crash_at
        self.stderr_path = os.path.join(self.tmp, f"stderr.{self._starts}.log")
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self._stderr, start_new_session=True, env=env)

    def all_stderr(self):
        out = []
        for n in range(1, self._starts + 1):
            try:
                with open(os.path.join(self.tmp, f"stderr.{n}.log"), "rb") as f:
                    out.append(f.read().decode("utf-8", "replace"))
            except OSError:
                pass
        return "\n".join(out)


def blob_path(root, digest):
    hexdigest = digest.split(":", 1)[1]
    return os.path.join(root, "blobs", "sha256", hexdigest[:2], hexdigest)


def session_id(location):
    return location.split("?")[0].rstrip("/").rsplit("/", 1)[1]


class UploadCrashPointTest(unittest.TestCase):
    config = None

    def run_point(self, point):
        b = HookedBerth(config=self.config)
        self.addCleanup(b.cleanup)

        # 1. Acknowledged before any crash, by a berth without the hook.
        b.start()
        acked = b.push_image(ACKED_REPO, "v1", layer_sizes=(1000, 700 * 1024 + 3))
        self.assertEqual(b.stop(), 0, b.stderr()[-2000:])

        # 2. With the hook: open an upload, PATCH a chunk, PUT the rest with ?digest=.
        b.crash_at = point
        b.restart()
        data = os.urandom(1536 * 1024 + 77)
        digest = bt.sha256_digest(data)
        cut = 1024 * 1024 + 11
        loc = b.upload_location(REPO)
        sid = session_id(loc)
        r = b.request("PATCH", loc, body=data[:cut], headers={"Content-Range": f"0-{cut - 1}",
                                                               "Content-Type": "application/octet-stream"})
        self.assertEqual(r.status, 202, r)
        loc = bt.location_path(r.header("Location"))
        try:
            r = b.request("PUT", bt.with_query(loc, digest=digest), body=data[cut:],
                          headers={"Content-Type": "application/octet-stream"}, timeout=20)
            self.fail(f"BERTH_CRASH_AT={point}: the PUT was answered ({r}) instead of berth dying")
        except (OSError, http.client.HTTPException):
            pass  # berth died under the request
        try:
            code = b.wait(10)
        except subprocess.TimeoutExpired:
            self.fail(f"BERTH_CRASH_AT={point}: the PUT failed but berth is still running")
        self.assertEqual(code, -signal.SIGKILL, f"BERTH_CRASH_AT={point}: exit {code}: {b.stderr()[-2000:]}")

        # 3. The disk as the crash left it.
        final = blob_path(b.root, digest)
        scratch = os.path.join(b.root, "uploads", sid)
        if point in BEFORE_RENAME:
            self.assertFalse(os.path.exists(final), f"{point}: the blob is in blobs/ before its rename")
            self.assertTrue(os.path.isfile(scratch), f"{point}: the scratch file {scratch} is gone "
                                                     f"({os.listdir(os.path.dirname(scratch))})")
            self.assertEqual(os.path.getsize(scratch), len(data), f"{point}: scratch file not whole")
        else:
            self.assertTrue(os.path.isfile(final), f"{point}: the blob file is not in blobs/ after the rename")
            self.assertEqual(bt.file_sha256(final), digest.split(":")[1], f"{point}: renamed blob damaged")
        self.assert_blob_files_intact(b, point)

        # 4. Restart without the hook, on the same root.
        b.crash_at = None
        b.restart()
        self.assertTrue(b.alive())
        upload_path = f"/v2/{REPO}/blobs/uploads/{sid}"
        if point in BEFORE_RENAME:
            # The session survived with every byte: it can be finished.
            self.assertEqual(self.uploads_in_progress(b), 1, f"{point}: the surviving session is not counted")
            r = b.get(upload_path)
            self.assertEqual(r.status, 204, f"{point}: GET of the surviving session: {r}")
            self.assertEqual(r.header("Range"), f"0-{len(data) - 1}", f"{point}: session offset after restart")
            self.assertEqual(b.get(f"/v2/{REPO}/blobs/{digest}").status, 404,
                             f"{point}: blob visible before its upload was finished")
            r = b.request("PUT", bt.with_query(upload_path, digest=digest), headers={"Content-Length": "0"})
            self.assertEqual(r.status, 201, f"{point}: finishing the surviving session: {r}")
        else:
            # The rename took the session's file: the session is over.
            self.assertEqual(self.uploads_in_progress(b), 0, f"{point}: the dropped session still holds a slot")
        # Either way the session is over now: every verb on it is BLOB_UPLOAD_UNKNOWN.
        for method, path, body, headers in [
            ("GET", upload_path, None, {}),
            ("PATCH", upload_path, b"more", {"Content-Range": f"{len(data)}-{len(data) + 3}",
                                             "Content-Type": "application/octet-stream"}),
            ("PUT", bt.with_query(upload_path, digest=digest), b"", {"Content-Length": "0"}),
            ("DELETE", upload_path, None, {}),
        ]:
            r = b.request(method, path, body=body, headers=headers)
            self.assertEqual(r.status, 404, f"{point}: {method} on the ended session: {r}")
            self.assertEqual(r.error_codes(), ["BLOB_UPLOAD_UNKNOWN"], f"{point}: {method} on the ended session: {r}")
        self.assertEqual(self.uploads_in_progress(b), 0, f"{point}: a slot is still held")

        r = b.get(f"/v2/{REPO}/blobs/{digest}")
        if point in AFTER_COMMIT or point in BEFORE_RENAME:  # committed before the crash, or finished above
            self.assertEqual((r.status, r.body == data), (200, True), f"{point}: blob after restart: {r}")
        else:
            # Renamed but never linked: not served in the repository (yet), and never wrong bytes.
            self.assertIn(r.status, (200, 404), f"{point}: blob after restart: {r}")
            if r.status == 200:
                self.assertEqual(r.body, data, f"{point}: wrong bytes")
            else:
                self.assertEqual(r.error_codes(), ["BLOB_UNKNOWN"], r)

        # 5. Pushing the same blob again works and it is served.
        self.assertEqual(b.push_blob(REPO, data), digest)
        r = b.get(f"/v2/{REPO}/blobs/{digest}")
        self.assertEqual((r.status, len(r.body)), (200, len(data)), f"{point}: GET after the re-push: {r}")
        self.assertEqual(r.body, data, f"{point}: wrong bytes after the re-push")
        self.assertEqual(os.path.getsize(final), len(data))
        # A fresh upload in the same repository works end to end too.
        other = os.urandom(5000)
        self.assertEqual(b.get(f"/v2/{REPO}/blobs/{b.push_blob(REPO, other)}").body, other)

        # 6. What was acknowledged before the crash is intact.
        self.assert_image_served(b, acked, point)
        self.assert_blob_files_intact(b, point)

        # 7. Bookkeeping.
        metrics = b.metrics()
        self.assertEqual(metrics.get("berth_uploads_in_progress"), 0.0, f"{point}: uploads in progress")
        failures = {k: v for k, v in metrics.items() if k.startswith("berth_periodic_task_failures_total")}
        self.assertTrue(failures, f"{point}: no berth_periodic_task_failures_total in /metrics")
        self.assertEqual(sum(failures.values()), 0, f"{point}: periodic task failures: {failures}")
        self.assertNotIn("periodic task failed", b.all_stderr(), f"{point}: {b.all_stderr()[-3000:]}")
        self.assertEqual(b.outside_root(), [])
        self.assertEqual(b.stop(), 0, f"{point}: exit after SIGTERM: {b.stderr()[-2000:]}")

    @staticmethod
    def uploads_in_progress(b):
        return b.metrics().get("berth_uploads_in_progress")

    def assert_image_served(self, b, img, point):
        r = b.get(f"/v2/{ACKED_REPO}/manifests/v1", headers={"Accept": bt.OCI_MANIFEST})
        self.assertEqual((r.status, r.body), (200, img["manifest"]), f"{point}: acknowledged manifest: {r}")
        for d, data in img["blobs"].items():
            r = b.get(f"/v2/{ACKED_REPO}/blobs/{d}")
            self.assertEqual(r.status, 200, f"{point}: acknowledged blob {d}: {r}")
            self.assertEqual(r.body, data, f"{point}: acknowledged blob {d} damaged")

    def assert_blob_files_intact(self, b, point):
        for hexdigest, path in bt.blob_files(b.root).items():
            self.assertEqual(bt.file_sha256(path), hexdigest, f"{point}: {path} does not hold its digest's bytes")


def _make(point):
    def test(self):
        self.run_point(point)
    test.__name__ = "test_crash_at_" + point.replace(".", "_")
    return test


for _point in POINTS:
    setattr(UploadCrashPointTest, "test_crash_at_" + _point.replace(".", "_"), _make(_point))


class UploadCrashPointUnderQuotaTest(UploadCrashPointTest):
    """The same points in a repository under a quota, where the blob is committed under the write
    lock after the quota check (a different order of the same steps)."""

    config = {"quotas": [{"namespaces": "*", "max_bytes": 1 << 30}]}


if __name__ == "__main__":
    unittest.main()
