#!/usr/bin/env python3
"""Peer protocol versions: a replica and its peers exchange the range of peer-protocol versions
they speak (Berth-Protocol: min-max), so a rolling upgrade never has one misread another.

- berth sends its range and the secret with every peer request, and its answers carry the range.
- A peer request whose range does not overlap berth's is refused with 400 and the spec's error JSON
  naming both ranges; a malformed range too. A request without the header is a berth from before
  versions were exchanged (1-1) and is served.
- A peer (here a stand-in HTTP server on loopback that answers the log like berth does) whose
  answers carry an incompatible range is not followed: /readyz is 503 and names it, the status
  and berth_replication_peer_compatible{peer} say so, and the log has an error line. Once the peer
  speaks a compatible range again, the replica becomes ready.
"""

import http.server
import json
import os
import sys
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402

SECRET = "s3cret-peer-secret-0123456789"
VERSIONS = "Berth-Protocol"
OURS = "1-3"  # replication/protocol.hpp: oldest-version


class StandInPeer:
    """Answers GET /_berth/v1/log as an empty berth would, with a chosen Berth-Protocol range."""

    def __init__(self):
        self.versions = "9-9"
        self.seen = []  # (path, headers) of the requests it got
        peer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                peer.seen.append((self.path, dict(self.headers)))
                body = json.dumps({"replica": "stand-in", "epoch": "e1", "head": 0, "entries": []}).encode()
                self.send_response(200 if self.path.startswith("/_berth/v1/log") else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header(VERSIONS, peer.versions)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class PeerProtocolTest(unittest.TestCase):
    def setUp(self):
        # Each test its own stand-in peer (speaking 9-9) and berth: none depends on another's run.
        self.peer = StandInPeer()
        self.addCleanup(self.peer.stop)
        self.b = bt.Berth()
        self.addCleanup(self.b.cleanup)
        secret_file = os.path.join(self.b.tmp, "peer-secret")
        with open(secret_file, "w") as f:
            f.write(SECRET + "\n")
        self.b.config = {"replica_id": "berth-a", "replication": {
            "peers": [f"127.0.0.1:{self.peer.port}"], "secret_file": secret_file,
            "write_quorum": "local", "poll_interval_ms": 100}}
        self.b.start()

    def peer_get(self, path, versions=None):
        headers = {"Berth-Peer-Secret": SECRET}
        if versions is not None:
            headers[VERSIONS] = versions
        return self.b.request("GET", "/_berth/v1/" + path, headers=headers)

    def test_requests_carry_the_secret_and_versions(self):
        # berth may ask for the peer's status before its log (readiness); every request carries both.
        def asked_for_the_log():
            return any(path.startswith("/_berth/v1/log?after=") for path, _ in list(self.peer.seen))
        bt.poll(asked_for_the_log, 10, 0.05, "berth to ask the stand-in peer for its log")
        for path, headers in list(self.peer.seen):
            with self.subTest(path=path):
                self.assertTrue(path.startswith("/_berth/v1/"), path)
                self.assertEqual(headers.get("Berth-Peer-Secret"), SECRET)
                self.assertEqual(headers.get(VERSIONS), OURS)

    def test_incompatible_requests_are_refused(self):
        ok = self.peer_get("status", "1-1")
        self.assertEqual(ok.status, 200, ok)
        self.assertEqual(ok.header(VERSIONS), OURS)
        legacy = self.peer_get("status")  # no header: a berth from before versions
        self.assertEqual(legacy.status, 200, legacy)
        newer = self.peer_get("status", "1-4")  # a newer replica that still speaks 1
        self.assertEqual(newer.status, 200, newer)
        for versions in ("4-5", "9-9"):
            with self.subTest(versions=versions):
                r = self.peer_get("status", versions)
                self.assertEqual(r.status, 400, r)
                self.assertEqual(r.error_codes(), ["UNSUPPORTED"])
                detail = json.dumps(r.json())
                self.assertIn(versions, detail)
                self.assertIn(OURS, detail)
        for versions in ("x", "3-1", "0-1"):
            with self.subTest(versions=versions):
                r = self.peer_get("status", versions)
                self.assertEqual(r.status, 400, r)
        # The secret is still checked first.
        r = self.b.request("GET", "/_berth/v1/status", headers={VERSIONS: "9-9"})
        self.assertEqual(r.status, 401, r)

    def test_an_incompatible_peer_keeps_the_replica_unready_until_it_is_compatible(self):
        label = f'berth_replication_peer_compatible{{peer="127.0.0.1:{self.peer.port}"}}'

        def unready_for_the_peer():
            r = self.b.get("/readyz")
            return r if r.status == 503 and "incompatible" in r.body.decode() else None
        r = bt.poll(unready_for_the_peer, 15, 0.1, "/readyz to name the incompatible peer")
        self.assertIn("9-9", r.body.decode())
        self.assertEqual(self.b.metrics().get(label), 0.0)
        status = self.peer_get("status", "1-1").json()
        self.assertIn("9-9", status["peers"][0]["incompatible"])
        self.assertFalse(status["ready"])
        errors = [l for l in self.b.log_lines() if l.get("level") == "error" and "incompatible" in l.get("msg", "")]
        self.assertTrue(errors, "an error line for the incompatible peer")

        self.peer.versions = "1-2"  # upgraded to a range that overlaps
        bt.poll(lambda: self.b.get("/readyz").status == 200, 20, 0.1, "/readyz 200 once the peer is compatible")
        self.assertEqual(self.b.metrics().get(label), 1.0)
        self.assertEqual(self.peer_get("status", "1-1").json()["peers"][0]["incompatible"], "")


if __name__ == "__main__":
    unittest.main(verbosity=2)
