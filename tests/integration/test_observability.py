#!/usr/bin/env python3
"""Metrics, access log and audit log.

- /metrics: berth_http_requests_total counts by route, method and status (200s, 404s, 401s,
  201s move the right series by the right amount), the duration histogram is well formed,
  byte counters move by at least the bytes sent, upload and connection gauges.
- Audit lines for pushes and deletes name the principal (htpasswd auth is on).
- Access log lines carry request_id (unique) and principal; every stderr line is JSON.
"""

import json
import os
import re
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402

ALICE = bt.basic_auth("alice", "alice-pw")
BOB = bt.basic_auth("bob", "bob-pw")


def series(m, name, **labels):
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return m.get(f"{name}{{{want}}}", 0.0)


def settled(b, predicate, timeout=5):
    """/metrics once predicate(metrics) holds (counters move after the answer is written)."""
    def check():
        m = b.metrics()
        return m if predicate(m) else None
    return bt.poll(check, timeout, 0.05, "metrics to reach the expected values")


class ObservabilityTest(bt.ServerTest):
    passwords = {"alice": "alice-pw", "bob": "bob-pw"}
    config = {"auth": {"htpasswd": "htpasswd"}}

    @classmethod
    def configure(cls, b):
        cls.started = time.time()
        return super().configure(b)

    def push(self, repo, tag, headers, layer_sizes=(2048,)):
        b = self.b
        img = bt.make_image(layer_sizes)
        for digest, data in img["blobs"].items():
            r = b.request("POST", f"/v2/{repo}/blobs/uploads/?digest={digest}", body=data,
                          headers={**headers, "Content-Type": "application/octet-stream"})
            self.assertEqual(r.status, 201, r)
        r = b.request("PUT", f"/v2/{repo}/manifests/{tag}", body=img["manifest"],
                      headers={**headers, "Content-Type": bt.OCI_MANIFEST})
        self.assertEqual(r.status, 201, r)
        return img

    def test_request_counters(self):
        b = self.b
        before = b.metrics()
        for _ in range(3):
            self.assertEqual(b.get("/v2/obs/none/manifests/nope", headers=ALICE).status, 404)
        for _ in range(2):
            self.assertEqual(b.get("/v2/", headers=ALICE).status, 200)
        for _ in range(4):
            self.assertEqual(b.get("/v2/").status, 401)
        self.assertEqual(b.head("/v2/obs/none/blobs/sha256:" + "0" * 64, headers=ALICE).status, 404)
        img = self.push("obs/counted", "v1", ALICE)
        self.assertEqual(b.get("/v2/obs/counted/manifests/v1", headers=ALICE).status, 200)
        expected = {("manifest", "GET", "404"): 3, ("manifest", "GET", "200"): 1, ("base", "GET", "200"): 2,
                    ("base", "GET", "401"): 4, ("blob", "HEAD", "404"): 1,
                    ("upload_start", "POST", "201"): len(img["blobs"]), ("manifest", "PUT", "201"): 1}

        def delta(m, route, method, status):
            labels = {"route": route, "method": method, "status": status}
            return series(m, "berth_http_requests_total", **labels) - \
                series(before, "berth_http_requests_total", **labels)
        # a request is counted once its answer is written: the last ones may lag a moment
        after = settled(b, lambda m: all(delta(m, *k) >= v for k, v in expected.items()))
        for key, want in expected.items():
            self.assertEqual(delta(after, *key), want, key)
        # every series is a known route, method and status
        for key in after:
            if key.startswith("berth_http_requests_total{"):
                labels = dict(re.findall(r'(\w+)="([^"]*)"', key))
                self.assertEqual(set(labels), {"route", "method", "status"}, key)
                self.assertRegex(labels["status"], r"^(\d{3}|other)$", key)
        # the /metrics requests count themselves too
        self.assertGreaterEqual(series(after, "berth_http_requests_total", route="metrics", method="GET",
                                       status="200"), 1)

    def test_histogram(self):
        b = self.b
        b.get("/v2/obs/none/manifests/nope", headers=ALICE)
        # the count of a route matches its request counter total (once the last one is recorded)
        m = settled(b, lambda m: m.get('berth_http_request_duration_seconds_count{route="manifest"}') ==
                    sum(v for k, v in m.items() if k.startswith('berth_http_requests_total{route="manifest"')))
        text = b.get("/metrics").body.decode()
        self.assertIn("# TYPE berth_http_request_duration_seconds histogram", text)
        for route in ("manifest", "base"):
            buckets = [(k, v) for k, v in m.items()
                       if k.startswith(f'berth_http_request_duration_seconds_bucket{{route="{route}",')]
            self.assertGreater(len(buckets), 3, route)
            les = [re.search(r'le="([^"]+)"', k).group(1) for k, _ in buckets]
            self.assertEqual(les[-1], "+Inf", route)
            bounds = [float(x) for x in les[:-1]]
            self.assertEqual(bounds, sorted(bounds), route)
            counts = [v for _, v in buckets]
            self.assertEqual(counts, sorted(counts), f"{route}: buckets must be cumulative")
            count = m[f'berth_http_request_duration_seconds_count{{route="{route}"}}']
            self.assertEqual(counts[-1], count, route)
            self.assertGreater(count, 0)
            self.assertGreaterEqual(m[f'berth_http_request_duration_seconds_sum{{route="{route}"}}'], 0)

    def test_bytes_and_gauges(self):
        b = self.b
        m0 = b.metrics()
        data = os.urandom(300_000)
        r = b.request("POST", f"/v2/obs/bytes/blobs/uploads/?digest={bt.sha256_digest(data)}", body=data,
                      headers={**ALICE, "Content-Type": "application/octet-stream"})
        self.assertEqual(r.status, 201, r)
        digest = bt.sha256_digest(data)
        m1 = settled(b, lambda m: m["berth_http_received_bytes_total"] - m0["berth_http_received_bytes_total"]
                     >= len(data))
        for _ in range(2):
            self.assertEqual(b.get(f"/v2/obs/bytes/blobs/{digest}", headers=ALICE).body, data)
        m2 = settled(b, lambda m: m["berth_http_sent_bytes_total"] - m1["berth_http_sent_bytes_total"]
                     >= 2 * len(data))
        # open upload sessions
        uploads = m2["berth_uploads_in_progress"]
        r = b.request("POST", "/v2/obs/bytes/blobs/uploads/", headers={**ALICE, "Content-Length": "0"})
        self.assertEqual(r.status, 202, r)
        self.assertEqual(b.metrics()["berth_uploads_in_progress"], uploads + 1)
        r = b.request("DELETE", bt.location_path(r.header("Location")), headers=ALICE)
        self.assertEqual(r.status, 204, r)
        self.assertEqual(b.metrics()["berth_uploads_in_progress"], uploads)
        # open connections: this one, plus two held open
        socks = [bt.connect(b.port) for _ in range(2)]
        try:
            for s in socks:  # a request on each, so the server surely has them
                s.sendall(b"GET /v2/ HTTP/1.1\r\nHost: x\r\n\r\n")
                bt.RawReader(s).read_response()
            self.assertGreaterEqual(b.metrics()["berth_http_connections"], 3)
        finally:
            for s in socks:
                s.close()
        bt.poll(lambda: b.metrics()["berth_http_connections"] <= 1, 10, 0.1, "connections gauge back to 1")
        for name in ("berth_storage_blob_bytes", "berth_gc_runs_total", "berth_scrub_corrupt_total"):
            self.assertIn(name, m2)
        # the change log: every push adds entries; the oldest is as old as this server's first write
        before = b.metrics()
        self.push("obs/log", "v1", ALICE)
        after = b.metrics()
        self.assertGreater(after["berth_changelog_entries"], before["berth_changelog_entries"])
        self.assertGreater(after["berth_changelog_bytes"], 0)
        self.assertLess(after["berth_changelog_oldest_entry_age_seconds"], time.time() - self.started + 5)

    def test_upload_buffer_gauge(self):
        """An upload's receive buffers are counted while its PATCH is read, and given back after the answer."""
        b = self.b
        settled(b, lambda m: m["berth_upload_buffer_bytes"] == 0)
        r = b.request("POST", "/v2/obs/buffers/blobs/uploads/", headers={**ALICE, "Content-Length": "0"})
        self.assertEqual(r.status, 202, r)
        path = bt.location_path(r.header("Location"))
        body = os.urandom(1 << 20)
        head = (f"PATCH {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {ALICE['Authorization']}\r\n"
                f"Content-Type: application/octet-stream\r\nContent-Length: {len(body)}\r\n\r\n")
        with bt.connect(b.port) as s:
            s.sendall(head.encode() + body[:100_000])
            settled(b, lambda m: m["berth_upload_buffer_bytes"] >= 256 * 1024)
            s.sendall(body[100_000:])
            status, headers, _ = bt.RawReader(s).read_response()
        self.assertEqual(status, 202)
        self.assertEqual(headers["range"], f"0-{len(body) - 1}")
        settled(b, lambda m: m["berth_upload_buffer_bytes"] == 0)
        self.assertEqual(b.request("DELETE", path, headers=ALICE).status, 204)

    def test_audit_log(self):
        b = self.b
        img = self.push("obs/audited", "v1", ALICE)
        layer = bt.sha256_digest(img["layers"][0])
        r = b.request("DELETE", f"/v2/obs/audited/manifests/{img['digest']}", headers=BOB)
        self.assertEqual(r.status, 202, r)
        r = b.request("DELETE", f"/v2/obs/audited/blobs/{layer}", headers=BOB)
        self.assertEqual(r.status, 202, r)
        # refused requests are no pushes: no audit line for them
        r = b.request("PUT", "/v2/obs/audited/manifests/v2", body=img["manifest"],
                      headers={**bt.basic_auth("alice", "wrong"), "Content-Type": bt.OCI_MANIFEST})
        self.assertEqual(r.status, 401)

        def audits():
            return [x for x in b.log_lines() if x.get("msg") == "audit" and x.get("repository") == "obs/audited"]
        bt.poll(lambda: len(audits()) >= 3, 10, 0.1, "3 audit lines")
        lines = audits()
        self.assertEqual(len(lines), 3, lines)
        push, delete_manifest, delete_blob = lines
        self.assertEqual(push["action"], "push")
        self.assertEqual(push["principal"], "alice")
        self.assertIn("v1", push["reference"])
        self.assertIn(img["digest"], push["reference"])
        self.assertTrue(delete_manifest["action"].startswith("delete"), delete_manifest)
        self.assertEqual(delete_manifest["principal"], "bob")
        self.assertEqual(delete_manifest["reference"], img["digest"])
        self.assertTrue(delete_blob["action"].startswith("delete"), delete_blob)
        self.assertNotEqual(delete_blob["action"], delete_manifest["action"])
        self.assertEqual(delete_blob["principal"], "bob")
        self.assertEqual(delete_blob["reference"], layer)
        for line in lines:
            self.assertIn("time", line)
            self.assertEqual(line["level"], "info")

    def test_access_log(self):
        b = self.b
        marker = f"/v2/obs/accesslog{int(time.time() * 1000)}/manifests/"
        b.get(marker + "a", headers=ALICE)
        b.get(marker + "b")
        b.get(marker + "c", headers=BOB)

        def mine():
            return [x for x in b.log_lines() if x.get("msg") == "request" and marker in x.get("target", "")]
        bt.poll(lambda: len(mine()) >= 3, 10, 0.1, "3 access log lines")
        lines = {x["target"][-1]: x for x in mine()}
        self.assertEqual(lines["a"]["principal"], "alice")
        self.assertEqual(lines["a"]["status"], 404)
        self.assertEqual(lines["b"]["principal"], "")
        self.assertEqual(lines["b"]["status"], 401)
        self.assertEqual(lines["c"]["principal"], "bob")
        for line in lines.values():
            self.assertEqual(line["method"], "GET")
            self.assertIn("request_id", line)
            self.assertIn("time", line)
        # request ids are unique across the whole log
        ids = [x["request_id"] for x in b.log_lines() if x.get("msg") == "request"]
        self.assertEqual(len(ids), len(set(ids)))
        self.assertGreater(len(ids), 3)

    def test_access_log_counts_what_a_cut_body_sent(self):
        # The client reads the start of a blob and leaves: the log says how much went out, not the
        # blob's size (64 MiB: more than the socket buffers of both ends hold).
        b = self.b
        data = os.urandom(64 << 20)
        digest = bt.sha256_digest(data)
        r = b.request("POST", f"/v2/obs/cut/blobs/uploads/?digest={digest}", body=data,
                      headers={**ALICE, "Content-Type": "application/octet-stream"})
        self.assertEqual(r.status, 201, r)
        target = f"/v2/obs/cut/blobs/{digest}"
        auth = ALICE["Authorization"]
        with bt.connect(b.port) as s:
            s.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n\r\n".encode())
            got = 0
            while got < (1 << 20):
                chunk = s.recv(65536)
                self.assertTrue(chunk, "the server closed early")
                got += len(chunk)

        def cut():
            return [x for x in b.log_lines() if x.get("msg") == "request" and x.get("target") == target]
        bt.poll(lambda: cut(), 10, 0.1, "the access log line of the cut GET")
        self.assertLess(cut()[0]["bytes_out"], len(data))
        self.assertGreaterEqual(cut()[0]["bytes_out"], 1 << 20)

    def test_access_log_says_why_a_request_went_unanswered(self):
        # A client that sends a blob PUT's head and leaves (as containerd does to the uploads it
        # cancels): the line has no status and says the body stopped, not that berth gave up.
        b = self.b
        r = b.request("POST", "/v2/obs/left/blobs/uploads/", headers=ALICE)
        self.assertEqual(r.status, 202, r)
        location = bt.location_path(r.header("Location"))
        target = location + ("&" if "?" in location else "?") + "digest=sha256:" + "0" * 64
        auth = ALICE["Authorization"]
        with bt.connect(b.port) as s:
            s.sendall(f"PUT {target} HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\n"
                      "Content-Length: 1000\r\n\r\n".encode())

        def left():
            return [x for x in b.log_lines() if x.get("msg") == "request" and x.get("target") == target]
        bt.poll(left, 10, 0.1, "the access log line of the PUT left")
        self.assertEqual(left()[0]["status"], 0)
        self.assertEqual(left()[0]["bytes_in"], 0)
        self.assertTrue(left()[0]["ended"].startswith("the body stopped: "), left()[0])
        answered = [x for x in b.log_lines() if x.get("msg") == "request" and x.get("status")]
        self.assertTrue(answered and not any("ended" in x for x in answered))

    @classmethod
    def tearDownClass(cls):
        # After every test of the class, whatever order they ran in: each line berth wrote is JSON.
        assert_log_lines_json(cls.b.stderr())

    def test_odd_requests_logged_as_json(self):
        b = self.b
        def requests_logged():
            text = b.stderr()
            whole_lines = text[:text.rfind("\n") + 1].splitlines()  # the last may be being written
            return sum('"msg":"request"' in line.replace(" ", "") for line in whole_lines)
        before = requests_logged()
        # something odd in the log: a target with quotes, backslashes, control and non-UTF-8 bytes
        raw = b'GET /v2/obs/%22quote%5C/manifests/x\x7f HTTP/1.1\r\nHost: x\r\nAuthorization: Basic \xff\xfe\r\n\r\n'
        try:
            bt.raw_exchange(b.port, raw)
        except (ConnectionError, OSError):
            pass
        b.get('/v2/obs/"q"/manifests/\\', headers=ALICE)
        bt.poll(lambda: requests_logged() >= before + 2, 10, 0.05, "both odd requests in the access log")
        assert_log_lines_json(b.stderr())


def assert_log_lines_json(text):
    if not text.endswith("\n"):
        raise AssertionError(f"the log does not end with a whole line: {text[-200:]!r}")
    for n, line in enumerate(text.splitlines()):
        if not line.strip():
            raise AssertionError(f"empty log line {n}")
        try:
            doc = json.loads(line)
        except ValueError:
            raise AssertionError(f"log line {n} is not JSON: {line!r}") from None
        if not isinstance(doc, dict) or not all(key in doc for key in ("time", "level", "msg")):
            raise AssertionError(f"log line {n} lacks time, level or msg: {line!r}")

if __name__ == "__main__":
    unittest.main()
