#!/usr/bin/env python3
"""Faults of the S3 blob store on a real Ceph (tests/lib/cephlab.py): radosgw killed and frozen
mid-push and mid-pull, the OSD killed, a replica killed mid-multipart. One lab for the class;
each test puts its blobs under a prefix of its own and leaves every daemon running.

berth waits on the bucket for at most ANSWER_TIMEOUT per request (s3::Config::answer_timeout,
from a request's last byte to the answer's head; net::ClientOptions::idle_timeout for each read
or write making no progress): a client whose request needs one request of a stalled bucket hears
of it within BOUND (ANSWER_TIMEOUT and 10 s).

- radosgw killed while a 30 MiB blob goes up in parts: the push ends at once with a 5xx and an
  OCI error body; /healthz and /readyz answer within a second; a blob acknowledged before (in
  the cache) is served; a push made while radosgw is down fails at once; the blob's key holds
  nothing; radosgw restarted, the failed session (which kept its bytes) closes with a 201, a
  push started over succeeds, and each reads back byte for byte.
- radosgw frozen with a pull half sent and a push's bytes on their way to it (one PUT): the
  push gets a 5xx, and the pull is cut short (never complete with wrong bytes), each within
  BOUND; probes and cached reads stay quick meanwhile; thawed, the push and pull succeed and
  the blob's key never held a partial object.
- radosgw killed mid-pull of a blob the cache does not hold: the body is cut short at once
  (Content-Length not met, the bytes sent right); a fresh pull fails cleanly; restarted, whole.
- The OSD killed mid-pull, and a push made while it is down (radosgw stays up and stalls): the
  same as frozen, and once the OSD is back every acknowledged blob is whole in the bucket.
- A replica killed mid-multipart (radosgw frozen a moment so that the kill lands while parts are
  in flight): the upload stays in the bucket; the replica restarted on its root aborts it once
  abandoned_upload_seconds have passed, counts it, and the blob's key holds nothing.
- Pushes hanging on a frozen radosgw, as many as there are shared workers, hold none of them: a
  cached blob that must be read from the disk is served at once.
"""

import hashlib
import http.client
import os
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
import cephlab  # noqa: E402

SKIP = cephlab.skip_reason()
BUCKET = "berth-faults"
ANSWER_TIMEOUT = 30  # seconds: include/berth/s3/client.hpp answer_timeout, net idle_timeout
BOUND = ANSWER_TIMEOUT + 10  # what a client may wait for its error from a stalled bucket
QUICK = 1.0  # seconds a probe or a cached read may take while the bucket is down
MiB = 1 << 20


def unread_at(port):
    """Bytes sent to 127.0.0.1:port on established connections that its process has not read
    (the frozen radosgw's receive queues), from /proc/net/tcp."""
    total = 0
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            local, state, queues = fields[1], fields[3], fields[4]
            if state == "01" and int(local.split(":")[1], 16) == port:
                total += int(queues.split(":")[1], 16)
    return total


class Outcome:
    """A request run in a thread: its status and body, or the exception, and how long it took."""

    def __init__(self, fn, what):
        self.what, self.status, self.body, self.resp, self.error = what, None, None, None, None
        self.seconds = self.ended = None  # how long it took; when it ended (time.monotonic())
        self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self._t0 = time.monotonic()
        self._thread.start()

    def _run(self, fn):
        try:
            r = fn()
            self.status, self.body, self.resp = r.status, r.body, r
        except Exception as error:  # noqa: BLE001 (kept for the test's assertions)
            self.error = error
        self.ended = time.monotonic()
        self.seconds = self.ended - self._t0

    def running(self):
        return self._thread.is_alive()

    def wait(self, timeout):
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise AssertionError(f"{self.what}: no answer within {timeout} s (a hang)")
        return self

    def __repr__(self):
        return f"<{self.what}: {self.status} {self.body[:200] if self.body else self.error!r} in {self.seconds} s>"


class SlowPull:
    """GET of a blob on a raw socket: reads the head and the body's first bytes, then stops
    reading (berth has the next bytes from the bucket, or waits for room to send them)."""

    def __init__(self, b, path, first=64 << 10):
        self.sock = socket.create_connection(("127.0.0.1", b.port), timeout=BOUND + 20)
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < first:
            chunk = self.sock.recv(first)
            if not chunk:
                break
            data += chunk
        head, self.body = data.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
        self.length = int(headers["content-length"])

    def rest(self):
        """Reads to the end; returns (body, seconds it took)."""
        t0 = time.monotonic()
        try:
            while chunk := self.sock.recv(1 << 20):
                self.body += chunk
        except ConnectionResetError:
            pass
        finally:
            self.sock.close()
        return self.body, time.monotonic() - t0

    def rest_in_thread(self):
        """rest() in a thread: an Outcome whose body is the whole body received."""
        return Outcome(lambda: bt.Resp(self.status, [], self.rest()[0]), "the rest of the pull")


@unittest.skipIf(SKIP, SKIP)
class S3FaultsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cephlab.lab_for_class(cls, BUCKET, retries=3)

    def setUp(self):
        self.addCleanup(self.heal)

    def heal(self):
        """Every daemon running and thawed again, for the next test."""
        for daemon in ("mon", "osd", "radosgw"):
            self.lab.thaw(daemon)
        for daemon in ("osd", "radosgw"):
            if not self.lab.alive(daemon):
                self.lab.restart(daemon)

    def serve(self, prefix, config=None, **store):
        def make(b):
            for name, value in (("access", self.lab.access_key), ("secret", self.lab.secret_key)):
                with open(os.path.join(b.tmp, name), "w") as f:
                    f.write(value + "\n")
            blobs = {"type": "s3", "endpoint": self.lab.endpoint, "bucket": BUCKET, "prefix": prefix,
                     "region": "us-east-1", "access_key_file": os.path.join(b.tmp, "access"),
                     "secret_key_file": os.path.join(b.tmp, "secret"), "path_style": True,
                     "part_size_mib": 5, "parallel_parts": 2}
            blobs.update(store)
            return {"storage": {"blobs": blobs}, **(config or {})}
        return bt.serve(self.addCleanup, make)

    # ---- what every fault must keep

    def push(self, b, repo, data, what="push"):
        """A monolithic push (POST, then PUT with the body) in a thread."""
        location = b.upload_location(repo)
        outcome = Outcome(lambda: b.request("PUT", bt.with_query(location, digest=bt.sha256_digest(data)), body=data,
                                            headers={"Content-Type": "application/octet-stream"},
                                            timeout=2 * BOUND + 30), what)
        outcome.location = location
        return outcome

    def assert_clean_failure(self, outcome, within, since=None):
        """Within `within` seconds of `since` (the request's start by default): a 503 with an
        OCI error body, or the connection closed without an answer; never a success, a 4xx (the
        client's fault) or a hang."""
        since = outcome._t0 if since is None else since
        outcome.wait(max(0, since + within - time.monotonic()) + 5)
        self.assertLess(outcome.ended - since, within, outcome)
        if outcome.error is not None:
            self.assertIsInstance(outcome.error, (http.client.RemoteDisconnected, ConnectionResetError), outcome)
            return
        # The bucket's failure is the server's, for now: 503 UNAVAILABLE, which clients retry.
        self.assertEqual(outcome.status, 503, outcome)
        self.assertEqual(outcome.resp.error_codes(), ["UNAVAILABLE"], f"an OCI error body: {outcome}")

    def assert_quick(self, b, cached=()):
        """Probes answer, and cached blobs are served whole, each within QUICK."""
        def get(path, what):
            t0 = time.monotonic()
            try:
                r = b.get(path, timeout=3)
            except TimeoutError:
                self.fail(f"{what}: no whole answer within 3 s")
            self.assertLess(time.monotonic() - t0, QUICK, what)
            return r
        for path in ("/healthz", "/readyz"):
            self.assertEqual(get(path, path).status, 200, path)
        for repo, digest, data in cached:
            r = get(f"/v2/{repo}/blobs/{digest}", f"cached {digest}")
            self.assertEqual((r.status, hashlib.sha256(r.body).hexdigest()), (200, digest[7:]))

    def key(self, prefix, digest):
        return f"{prefix}blobs/sha256/{digest[7:]}"

    def object_bytes(self, key):
        """The object's bytes straight from the bucket, None when there is none."""
        try:
            return self.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        except self.s3.exceptions.NoSuchKey:
            return None

    def assert_nothing_partial(self, prefix, data):
        """Under the blob's key: no object, or the whole blob (a PUT the gateway took whole
        after berth gave up on it), never part of it."""
        got = self.object_bytes(self.key(prefix, bt.sha256_digest(data)))
        if got is not None:
            self.assertEqual(hashlib.sha256(got).hexdigest(), hashlib.sha256(data).hexdigest(),
                             f"a partial object of {len(got)} bytes for a blob of {len(data)}")

    def assert_whole(self, b, repo, data, prefix=None):
        """The blob reads back byte for byte through berth (and straight from the bucket)."""
        digest = bt.sha256_digest(data)
        r = b.get(f"/v2/{repo}/blobs/{digest}", timeout=60)
        self.assertEqual((r.status, len(r.body)), (200, len(data)))
        self.assertEqual(hashlib.sha256(r.body).hexdigest(), digest[7:])
        if prefix is not None:
            got = self.object_bytes(self.key(prefix, digest))
            self.assertIsNotNone(got, f"{digest} is not in the bucket")
            self.assertEqual(hashlib.sha256(got).hexdigest(), digest[7:])

    # ---- radosgw killed

    def test_radosgw_killed_mid_push(self):
        prefix = "killed-push/"
        b = self.serve(prefix, cache_bytes=16 * MiB)
        acked = os.urandom(MiB)  # acknowledged before the kill, in the cache (half of it at most)
        acked_digest = b.push_blob("app", acked)
        data = os.urandom(30 * MiB)
        push = self.push(b, "app", data)
        # Parts going up: the upload is in the bucket. Frozen, then killed, so that the kill
        # lands with bytes on their way (the push cannot finish between the look and the kill).
        bt.poll(lambda: self.lab.list_multipart_uploads(BUCKET, prefix), 20, 0.01, "the multipart upload begun")
        self.lab.freeze("radosgw")
        bt.poll(lambda: unread_at(self.lab.rgw_port) > 0, 5, 0.01, "part bytes unread by the frozen radosgw")
        self.assertTrue(push.running(), push)
        killed_at = time.monotonic()
        self.lab.kill("radosgw")
        self.assert_clean_failure(push, 5, since=killed_at)
        print(f"\nradosgw killed mid-push: {push} ({push.ended - killed_at:.2f} s after the kill)", file=sys.stderr)
        self.assert_quick(b, [("app", acked_digest, acked)])
        other = os.urandom(2 * MiB)
        self.assert_clean_failure(self.push(b, "app", other, "push while radosgw is down"), 5)
        self.assert_quick(b)

        self.lab.restart("radosgw")
        self.assert_nothing_partial(prefix, data)
        self.assert_nothing_partial(prefix, other)
        # Retried: the failed session kept its bytes, and closing it again uploads them; a client
        # that starts over pushes the whole blob again.
        r = b.get(push.location)
        self.assertEqual((r.status, r.header("Range")), (204, f"0-{len(data) - 1}"))
        r = b.request("PUT", bt.with_query(push.location, digest=bt.sha256_digest(data)), timeout=60)
        self.assertEqual(r.status, 201, r)
        self.assert_whole(b, "app", data, prefix)
        self.assertEqual(b.push_blob("app", other), bt.sha256_digest(other))
        self.assert_whole(b, "app", other, prefix)
        self.assert_whole(b, "app", acked, prefix)

    def test_radosgw_killed_mid_pull(self):
        prefix = "killed-pull/"
        b = self.serve(prefix, cache_bytes=0)
        data = os.urandom(12 * MiB)  # more than one read-ahead (8 MiB): two GETs from the bucket
        digest = b.push_blob("app", data)
        pull = SlowPull(b, f"/v2/app/blobs/{digest}")
        self.assertEqual((pull.status, pull.length), (200, len(data)))
        self.lab.kill("radosgw")
        body, took = pull.rest()
        self.assertLess(took, 5, "the body's end comes at once")
        self.assertLess(len(body), len(data), "cut short, not complete")
        self.assertEqual(body, data[:len(body)], "what was sent is right")
        self.assert_quick(b)
        t0 = time.monotonic()
        r = b.get(f"/v2/app/blobs/{digest}", timeout=BOUND)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertEqual((r.status, r.error_codes()), (503, ["UNAVAILABLE"]), r)

        self.lab.restart("radosgw")
        self.assert_whole(b, "app", data)

    # ---- radosgw frozen

    def check_a_stalled_bucket(self, prefix, stall, heal, what, pushed=None):
        """A bucket that stops answering (stall()) mid-pull and as a push begins: the push gets a
        clean failure and the pull is cut short, each within BOUND; probes and a cached read stay
        quick; healed, nothing partial is under the push's key, it goes through again, and every
        acknowledged blob is whole. pushed(): polled until the push's bytes are on their way."""
        # 16 MiB: a blob of 1 MiB is kept from its push; one of 12 MiB neither then (more than
        # half) nor when read (more than an eighth).
        b = self.serve(prefix, cache_bytes=16 * MiB)
        acked = os.urandom(MiB)
        acked_digest = b.push_blob("app", acked)
        large = os.urandom(12 * MiB)
        large_digest = b.push_blob("app", large)
        pull = SlowPull(b, f"/v2/app/blobs/{large_digest}")
        self.assertEqual((pull.status, pull.length), (200, len(large)))
        stall()
        stalled_at = time.monotonic()
        data = os.urandom(4 * MiB)  # one PUT (less than a part)
        push = self.push(b, "app", data)
        if pushed:
            bt.poll(pushed, 10, 0.01, "the push's bytes on their way")
        rest = pull.rest_in_thread()
        self.assert_quick(b, [("app", acked_digest, acked)])
        self.assertTrue(push.running() and rest.running(), (push, rest))
        self.assert_clean_failure(push, BOUND, since=stalled_at)
        rest.wait(max(0, stalled_at + BOUND - time.monotonic()))
        self.assertLess(len(rest.body), len(large), "cut short, not complete")
        self.assertEqual(rest.body, large[:len(rest.body)], "what was sent is right")
        print(f"\n{what}: push {push}; pull cut short at {len(rest.body)} of {len(large)} bytes "
              f"after {rest.seconds:.1f} s", file=sys.stderr)
        self.assert_quick(b, [("app", acked_digest, acked)])

        heal()
        self.assert_nothing_partial(prefix, data)
        self.assertEqual(b.push_blob("app", data), bt.sha256_digest(data))
        for blob in (acked, large, data):
            self.assert_whole(b, "app", blob, prefix)

    def test_radosgw_frozen_mid_push_and_mid_pull(self):
        self.check_a_stalled_bucket("frozen/", lambda: self.lab.freeze("radosgw"), lambda: self.lab.thaw("radosgw"),
                                    "radosgw frozen", pushed=lambda: unread_at(self.lab.rgw_port) > 0)

    def test_cached_reads_go_on_while_pushes_hang(self):
        # A push's upload to the bucket is planned on the "s3" party's pool: as many pushes as
        # there are shared workers, all hanging on a frozen radosgw, hold none of them, so a cached
        # blob that must come from the disk (not the page cache) is still read at once.
        prefix = "workers/"
        workers = 4
        b = self.serve(prefix, config={"threads": {"workers": workers}}, cache_bytes=16 * MiB)
        acked = os.urandom(MiB)
        acked_digest = b.push_blob("app", acked)
        drop_page_cache(os.path.join(b.root, "blob-cache"))
        self.assert_quick(b, [("app", acked_digest, acked)])  # read from the disk by an idle worker
        self.lab.freeze("radosgw")
        try:
            pushes = [self.push(b, "app", os.urandom(100_000 + i)) for i in range(workers)]
            bt.poll(lambda: unread_at(self.lab.rgw_port) >= workers * 100_000, 10, 0.01,
                    "every push's bytes unread by the frozen radosgw")
            self.assertTrue(all(p.running() for p in pushes))
            self.assert_quick(b, [("app", acked_digest, acked)])  # in the page cache: sendfile at once
            drop_page_cache(os.path.join(b.root, "blob-cache"))
            self.assert_quick(b, [("app", acked_digest, acked)])
        finally:
            self.lab.thaw("radosgw")

    # ---- the OSD killed

    def test_osd_killed(self):
        # radosgw, up, takes the requests and waits for the OSD. (It finishes a PUT too fast for a
        # kill to land in the middle of one: the push begins once the OSD is gone.)
        self.check_a_stalled_bucket("osd/", lambda: self.lab.kill("osd"), lambda: self.lab.restart("osd"),
                                    "OSD killed")

    # ---- a replica killed

    def test_replica_killed_mid_multipart(self):
        prefix = "replica-killed/"
        # 10 s: the least berth allows (a live upload is never aborted)
        b = self.serve(prefix, cache_bytes=0, abandoned_upload_seconds=10, abandoned_sweep_seconds=1)
        data = os.urandom(30 * MiB)
        push = self.push(b, "app", data)
        uploads = bt.poll(lambda: self.lab.list_multipart_uploads(BUCKET, prefix), 20, 0.01,
                          "the multipart upload begun")
        # Frozen, radosgw keeps the parts unread and the upload unfinished until the kill.
        self.lab.freeze("radosgw")
        bt.poll(lambda: unread_at(self.lab.rgw_port) > 0, 5, 0.01, "part bytes unread by the frozen radosgw")
        self.assertTrue(push.running(), push)
        b.kill()
        self.lab.thaw("radosgw")
        push.wait(10)
        self.assertIsNotNone(push.error, push)
        self.assertEqual([u["UploadId"] for u in self.lab.list_multipart_uploads(BUCKET, prefix)],
                         [uploads[0]["UploadId"]], "the killed replica's upload is left")

        b.restart()
        bt.poll(lambda: not self.lab.list_multipart_uploads(BUCKET, prefix), 40, 0.2, "the upload aborted")
        self.assertEqual(b.metrics()["berth_s3_abandoned_uploads_aborted_total"], 1)
        self.assertNotIn(self.key(prefix, bt.sha256_digest(data)), self.lab.keys(BUCKET, prefix))
        self.assertEqual(b.push_blob("app", data), bt.sha256_digest(data))
        self.assert_whole(b, "app", data, prefix)


def drop_page_cache(directory):
    """Evicts the files under directory from the page cache (they are written back first)."""
    for dirpath, _, files in os.walk(directory):
        for name in files:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


if __name__ == "__main__":
    unittest.main()
