#!/usr/bin/env python3
"""Hardening of limits and of damaged storage.

- limits.max_header_bytes: the HTTP parser holds no field larger than 64 KiB, so a configured
  limit of 1 MiB is either refused at start (exit code 2, naming max_header_bytes) or, if berth
  takes it, a single header value of 70,000 or 200,000 bytes still gets 431 and berth stays up.
  At the 64 KiB ceiling and at the default, the same heads get 431 too, and a head under the
  limit is served.
- A damaged blob file (truncated to half, emptied, or grown) is repaired by pushing the same
  blob again: the push gets 201, GET returns the full bytes, and the file under
  <root>/blobs/sha256/xx/hex has the right size and hash again (replaced, not patched in place).

Every process started here is killed in the class or test cleanup."""

import hashlib
import http.client
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402


def head_with_header(size, path="/v2/"):
    """A GET whose one X-Big header value is `size` bytes long."""
    return (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ".encode() + b"h" * size + b"\r\n\r\n")


def send_head(port, head, timeout=15):
    """Send a request head on a fresh connection; returns (status, headers, body, closed_after)."""
    with bt.connect(port, timeout) as s:
        try:
            s.sendall(head)
        except (BrokenPipeError, ConnectionResetError):
            pass  # answered early and closed: read the answer
        status, headers, body = bt.RawReader(s).read_response()
        closed = None
        if status >= 400:
            closed, _ = bt.wait_closed(s, 10)
        return status, headers, body, closed


def start_or_exit(b, timeout=bt.READY_TIMEOUT):
    """Spawn berth and wait until it either answers GET /v2/ ("ready") or exits ("exited")."""
    bt.wait_for_binary()
    b.port = bt.free_port()
    b._spawn()
    deadline = time.monotonic() + timeout
    while True:
        if b.proc.poll() is not None:
            return "exited"
        try:
            if b.get("/v2/", timeout=2).status == 200:
                return "ready"
        except (OSError, http.client.HTTPException):
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"berth neither ready nor exited after {timeout}s: {b.stderr()[-2000:]}")
        time.sleep(0.05)


class HeaderLimitTest(unittest.TestCase):
    def berth(self, limit=None):
        b = bt.Berth(config={"limits": {"max_header_bytes": limit}} if limit is not None else None)
        self.addCleanup(b.cleanup)
        return b

    def assert_431(self, b, size):
        try:
            status, headers, body, closed = send_head(b.port, head_with_header(size))
        except ConnectionError as err:
            self.fail(f"{size}-byte header: no answer, connection ended ({err!r}); berth alive: {b.alive()}\n"
                      f"{b.stderr()[-2000:]}")
        self.assertEqual(status, 431, f"{size}-byte header: {status} {body[:200]!r}")
        self.assertTrue(closed, f"{size}-byte header: connection left open after 431")
        self.assertTrue(b.alive(), f"berth exited after a {size}-byte header: {b.stderr()[-2000:]}")
        r = b.get("/v2/", timeout=5)
        self.assertEqual(r.status, 200, f"after a {size}-byte header: {r}")

    def test_one_mebibyte_limit_refused_or_still_431(self):
        b = self.berth(1048576)
        outcome = start_or_exit(b)
        if outcome == "exited":
            code = b.wait(5)
            self.assertEqual(code, 2, f"exit code {code}: {b.stderr()[-2000:]}")
            self.assertIn("max_header_bytes", b.stderr(), b.stderr()[-2000:])
            return
        for size in (70_000, 200_000):
            with self.subTest(size=size):
                self.assert_431(b, size)
        self.assertTrue(b.alive())

    def test_at_the_64k_ceiling(self):
        b = self.berth(65536).start()
        status, _, _, _ = send_head(b.port, head_with_header(60_000))
        self.assertEqual(status, 200, "a 60,000-byte header under a 64 KiB limit was refused")
        for size in (70_000, 200_000):
            with self.subTest(size=size):
                self.assert_431(b, size)

    def test_default_limit(self):
        b = self.berth().start()
        self.assertEqual(send_head(b.port, head_with_header(12_000))[0], 200)
        for size in (70_000, 200_000):
            with self.subTest(size=size):
                self.assert_431(b, size)

    def test_many_oversized_heads_in_parallel(self):
        # Twenty connections each sending a 200,000-byte header at once: each gets 431, berth stays up.
        b = self.berth().start()
        socks = []
        try:
            for _ in range(20):
                socks.append(bt.connect(b.port, 15))
            head = head_with_header(200_000)
            for s in socks:
                s.setblocking(False)
                try:
                    s.send(head[:65536])
                except (BlockingIOError, BrokenPipeError, ConnectionResetError):
                    pass
                s.setblocking(True)
                s.settimeout(15)
            for i, s in enumerate(socks):
                try:
                    s.sendall(head[65536:])
                except (BrokenPipeError, ConnectionResetError):
                    pass
                status, _, _ = bt.RawReader(s).read_response()
                self.assertEqual(status, 431, f"connection {i}")
        finally:
            for s in socks:
                s.close()
        self.assertTrue(b.alive())
        self.assertEqual(b.get("/v2/").status, 200)


class BlobRepairTest(bt.ServerTest):
    def blob_path(self, digest):
        hexdigest = digest.split(":", 1)[1]
        path = os.path.join(self.b.root, "blobs", "sha256", hexdigest[:2], hexdigest)
        self.assertTrue(os.path.isfile(path), f"no blob file at {path}: {sorted(bt.blob_files(self.b.root))}")
        return path

    def damage(self, path, how, size):
        if how == "half":
            os.truncate(path, size // 2)
        elif how == "empty":
            os.truncate(path, 0)
        elif how == "grown":
            with open(path, "ab") as f:
                f.write(b"\0garbage" * 100)
        else:
            raise ValueError(how)
        self.assertNotEqual(os.path.getsize(path), size)

    def push_again(self, repo, data, how):
        b, digest = self.b, bt.sha256_digest(data)
        if how == "monolithic":
            return b.push_blob(repo, data)
        if how == "chunked":
            loc = b.upload_location(repo)
            cut = len(data) // 3
            r = b.request("PATCH", loc, body=data[:cut], headers={"Content-Range": f"0-{cut - 1}",
                                                                  "Content-Type": "application/octet-stream"})
            self.assertEqual(r.status, 202, r)
            r = b.request("PUT", bt.with_query(bt.location_path(r.header("Location")), digest=digest),
                          body=data[cut:], headers={"Content-Type": "application/octet-stream"})
            self.assertEqual(r.status, 201, f"chunked re-push: {r}")
            return digest
        if how == "single-post":
            r = b.request("POST", f"/v2/{repo}/blobs/uploads/?digest={digest}", body=data,
                          headers={"Content-Type": "application/octet-stream"})
            self.assertIn(r.status, (201, 202), r)
            if r.status == 202:  # single POST not taken: finish the session it opened
                r = b.request("PUT", bt.with_query(bt.location_path(r.header("Location")), digest=digest),
                              body=data, headers={"Content-Type": "application/octet-stream"})
            self.assertEqual(r.status, 201, f"single-POST re-push: {r}")
            return digest
        raise ValueError(how)

    def check_repaired(self, path, data, repos):
        digest = bt.sha256_digest(data)
        for repo in repos:
            r = self.b.get(f"/v2/{repo}/blobs/{digest}")
            self.assertEqual(r.status, 200, f"GET in {repo} after the re-push: {r}")
            self.assertEqual(len(r.body), len(data), f"GET in {repo} served {len(r.body)} of {len(data)} bytes")
            self.assertEqual(r.body, data, f"GET in {repo} served wrong bytes")
            h = self.b.head(f"/v2/{repo}/blobs/{digest}")
            self.assertEqual((h.status, h.header("Content-Length")), (200, str(len(data))), h)
        self.assertEqual(os.path.getsize(path), len(data), "blob file still has the wrong size")
        self.assertEqual(bt.file_sha256(path), hashlib.sha256(data).hexdigest(), "blob file has the wrong hash")

    def run_case(self, damage, repush, other_repo=False):
        repo = f"repair/{damage}-{repush}"
        data = os.urandom(300 * 1024 + 333)
        digest = self.b.push_blob(repo, data)
        path = self.blob_path(digest)
        inode = os.stat(path).st_ino
        self.damage(path, damage, len(data))
        target = repo + "-other" if other_repo else repo
        self.assertEqual(self.push_again(target, data, repush), digest)
        self.check_repaired(path, data, [repo, target] if other_repo else [repo])
        self.assertNotEqual(os.stat(path).st_ino, inode,
                            "the damaged file was patched in place, not replaced atomically")
        self.assertEqual(self.b.outside_root(), [])
        self.assertTrue(self.b.alive())

    def test_truncated_to_half_monolithic(self):
        self.run_case("half", "monolithic")

    def test_emptied_monolithic(self):
        self.run_case("empty", "monolithic")

    def test_grown_monolithic(self):
        self.run_case("grown", "monolithic")

    def test_truncated_to_half_chunked(self):
        self.run_case("half", "chunked")

    def test_emptied_single_post(self):
        self.run_case("empty", "single-post")

    def test_truncated_repaired_by_push_to_another_repository(self):
        self.run_case("half", "monolithic", other_repo=True)

    def test_repaired_file_survives_restart(self):
        b = self.b
        repo = "repair/restart"
        data = os.urandom(200 * 1024 + 7)
        digest = b.push_blob(repo, data)
        path = self.blob_path(digest)
        self.damage(path, "half", len(data))
        self.push_again(repo, data, "monolithic")
        b.stop()
        b.restart()
        self.check_repaired(path, data, [repo])


if __name__ == "__main__":
    unittest.main()
