#!/usr/bin/env python3
"""Answers given before the request has all arrived reach the client.

berth refuses some requests from their head alone: a manifest PUT declaring more than
limits.max_manifest_bytes (413), a request head over limits.max_header_bytes (431), a large
blob upload without credentials (401). The client is then still sending. Each case here
sends the whole request from a real socket, as clients do, before reading: every byte must go
out without a reset, and the client must then read the status and the spec's JSON error. The
connection then closes within berth's bounded lingering time.
"""

import json
import os
import select
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402


def send_all_and_read(port, head, body=b"", answer_first=True):
    """Send the head; with answer_first, wait until berth's answer is there to read (it has
    stopped reading the request); send the rest the way clients do, all of it before reading,
    then read the answer. Returns (status, headers, body); a send that fails is the failure
    this file is about."""
    with bt.connect(port, timeout=10) as s:
        s.sendall(head)
        if answer_first:
            readable, _, _ = select.select([s], [], [], 10)
            assert readable, "no answer to the head within 10 s"
        try:
            s.sendall(body)
        except OSError as error:
            raise AssertionError(f"berth reset the connection while the client was still sending: {error!r}")
        return bt.RawReader(s).read_response()


class EarlyAnswers(bt.ServerTest):
    config = {"limits": {"max_manifest_bytes": 1 << 20}}

    def assert_spec_error(self, status, headers, body, want_status, what):
        self.assertEqual(status, want_status, f"{what}: {body[:200]!r}")
        errors = json.loads(body)["errors"]
        self.assertTrue(errors and all(e["code"] in bt.SPEC_ERROR_CODES for e in errors), errors)

    def test_manifest_over_the_limit_while_the_client_sends_it(self):
        big = b'{"schemaVersion":2,"pad":"' + b"x" * (6 << 20) + b'"}'
        head = (f"PUT /v2/early/manifests/big HTTP/1.1\r\nHost: x\r\nContent-Type: {bt.OCI_MANIFEST}\r\n"
                f"Content-Length: {len(big)}\r\n\r\n").encode()
        for attempt in range(3):  # a reset loses the answer only sometimes; every try must read it
            status, headers, body = send_all_and_read(self.b.port, head, big)
            self.assert_spec_error(status, headers, body, 413, f"try {attempt}")
        self.assertEqual(self.b.get("/v2/early/manifests/big").status, 404, "nothing stored")

    def test_request_head_over_a_megabyte(self):
        head = b"GET /v2/ HTTP/1.1\r\nHost: x\r\n"
        rest = b"".join(b"X-Pad-%d: %s\r\n" % (i, b"p" * 1000) for i in range(1100)) + b"\r\n"
        for attempt in range(3):
            status, headers, body = send_all_and_read(self.b.port, head + rest[:20000], rest[20000:])
            self.assert_spec_error(status, headers, body, 431, f"try {attempt}")

    def test_large_upload_without_credentials(self):
        b = bt.serve(self.addCleanup, {"auth": {"htpasswd": "htpasswd"}}, {"alice": "pw"})
        data = os.urandom(6 << 20)
        head = (f"POST /v2/early/blobs/uploads/?digest={bt.sha256_digest(data)} HTTP/1.1\r\nHost: x\r\n"
                f"Content-Type: application/octet-stream\r\nContent-Length: {len(data)}\r\n\r\n").encode()
        # berth reads a little of a body it will refuse before answering: the client just sends.
        status, headers, body = send_all_and_read(b.port, head, data, answer_first=False)
        self.assert_spec_error(status, headers, body, 401, "upload without credentials")
        self.assertIn("www-authenticate", headers)

    def test_the_connection_still_closes(self):
        head = (f"PUT /v2/early/manifests/slow HTTP/1.1\r\nHost: x\r\nContent-Type: {bt.OCI_MANIFEST}\r\n"
                f"Content-Length: {100 << 20}\r\n\r\n").encode()
        with bt.connect(self.b.port) as s:
            s.sendall(head + b"x" * 1000)
            status, _, _ = bt.RawReader(s).read_response()
            self.assertEqual(status, 413)
            started = time.monotonic()
            closed, _ = bt.wait_closed(s, 10)  # a client that never finishes sending
            self.assertTrue(closed, "a lingering connection must end")
            self.assertLess(time.monotonic() - started, 6, "lingering is bounded in time")


if __name__ == "__main__":
    unittest.main(verbosity=2)
