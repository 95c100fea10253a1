#!/usr/bin/env python3
"""Malformed and hostile requests against a real berth.

Every request in the battery must get a 4xx (never a 5xx, never a hang, never a crash) with the
spec's JSON error body where there is a body, and must change nothing: after every test the image
pushed in setUpClass is served byte-identical, the blob store, upload dir, catalog and tags are
unchanged, and no file appeared outside the root.
"""

import json
import os
import socket
import struct
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402

REPO = "hostile/app"
OTHER = "hostile/other"
BAD_NAMES = [
    ("uppercase", "Hostile/App"),
    ("too long", "a" * 256),
    ("too long in components", "/".join(["abcdefghi"] * 26)),
    ("empty component", "hostile//app"),
    ("trailing slash", "hostile/app/"),
    ("leading slash", "/hostile/app"),
    ("dot-dot", "../../etc"),
    ("encoded dot-dot", "%2e%2e/%2e%2e/etc"),
    ("encoded slash dot-dot", "hostile%2F..%2F..%2Fetc"),
    ("encoded NUL", "hostile%00/app"),
    ("dot component", "hostile/./app"),
    ("space", "hostile/a%20pp"),
    ("trailing separator", "hostile/app-"),
    ("double dot separator", "hostile/a..pp"),
]
BAD_DIGESTS = [
    ("short", "sha256:abc"),
    ("long", "sha256:" + "a" * 65),
    ("uppercase hex", "sha256:" + "A" * 64),
    ("md5", "md5:d41d8cd98f00b204e9800998ecf8427e"),
    ("sha512 with 64 hex", "sha512:" + "a" * 64),
    ("no algorithm", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    ("empty hex", "sha256:"),
    ("non-hex", "sha256:" + "g" * 64),
    ("NUL", "sha256:" + "a" * 63 + "%00"),
]
BAD_TAGS = [
    ("too long", "t" * 129),
    ("leading dot", ".hidden"),
    ("leading dash", "-tag"),
    ("slash", "a%2Fb"),
    ("NUL", "v1%00x"),
    ("space", "v%201"),
    ("non-ascii", "t%C3%A9"),
]
BAD_UPLOAD_IDS = [
    "..%2F..%2Fetc%2Fpasswd",
    "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "..",
    "%2e%2e",
    "x%00y",
    "..%2F..%2F..%2F..%2Fj1%2Fescaped",
    "a" * 300,
    "%2Fetc%2Fpasswd",
]


def manifest_for(blobs):
    """An OCI image manifest (bytes) referencing (media type, digest, size) triples."""
    config, *layers = blobs
    return json.dumps({
        "schemaVersion": 2, "mediaType": bt.OCI_MANIFEST,
        "config": {"mediaType": bt.OCI_CONFIG, "digest": config[0], "size": config[1]},
        "layers": [{"mediaType": bt.OCI_LAYER, "digest": d, "size": n} for d, n in layers],
    }).encode()


class HostileTest(unittest.TestCase):
    berth = None

    @classmethod
    def setUpClass(cls):
        cls.berth = bt.serve(cls.addClassCleanup, {"limits": {"idle_timeout_seconds": 2, "body_timeout_seconds": 2}})
        cls.image = cls.berth.push_image(REPO, "v1", layer_sizes=(1000, 300_000))
        r = cls.berth.put_manifest(REPO, "stable", cls.image["manifest"])
        assert r.status == 201, r
        cls.snapshot = cls.take_snapshot()
        cls.passwd = cls.passwd_stat()

    @staticmethod
    def passwd_stat():
        try:
            st = os.stat("/etc/passwd")
            return (st.st_size, st.st_mtime_ns)
        except OSError:
            return None

    @classmethod
    def take_snapshot(cls):
        b, img = cls.berth, cls.image
        served = {}
        for path in [f"/v2/{REPO}/manifests/v1", f"/v2/{REPO}/manifests/stable",
                     f"/v2/{REPO}/manifests/{img['digest']}", f"/v2/{REPO}/tags/list", "/v2/_catalog",
                     f"/v2/{OTHER}/tags/list"] + [f"/v2/{REPO}/blobs/{d}" for d in img["blobs"]]:
            r = b.get(path)
            served[path] = (r.status, r.body)
        files = {k: v for k, v in bt.tree(b.root).items() if not k.startswith("meta" + os.sep)}
        return {"served": served, "files": files, "outside": b.outside_root()}

    def setUp(self):
        self.sessions = []

    def tearDown(self):
        b = self.berth
        self.assertTrue(b.alive(), f"berth died: {b.stderr()[-2000:]}")
        for loc in self.sessions:
            # A DELETE wins even over a request still holding the session; its file goes when
            # that request lets go, so the files under the root are polled for.
            self.assertIn(b.request("DELETE", loc).status, (204, 404), f"DELETE {loc}")
        before = self.snapshot
        now = self.take_snapshot()
        deadline = time.monotonic() + 10
        while now["files"] != before["files"] and time.monotonic() < deadline:
            time.sleep(0.05)
            now = self.take_snapshot()
        # A test that leaves something behind fails alone: the next one compares with what it found.
        type(self).snapshot = now
        self.assertEqual(now["outside"], [], "files appeared outside the root")
        for path, (status, body) in before["served"].items():
            self.assertEqual(now["served"][path][0], status, f"GET {path} status changed")
            self.assertEqual(now["served"][path][1], body, f"GET {path} body changed")
        self.assertEqual(now["files"], before["files"], "files under the root changed")
        self.assertEqual(self.passwd_stat(), self.passwd, "/etc/passwd changed")

    # ------------------------------------------------------------------ helpers

    def new_session(self, repo=REPO):
        loc = self.berth.upload_location(repo)
        self.sessions.append(loc)
        return loc

    def assert_alive(self):
        self.assertTrue(self.berth.alive(), f"berth died: {self.berth.stderr()[-2000:]}")

    def assert_error(self, r, statuses=None, codes=None, what=""):
        """4xx (one of statuses if given), a spec JSON error body if there is a body, berth alive."""
        self.assert_alive()
        label = f"{what}: {r!r}"
        self.assertTrue(400 <= r.status < 500, f"expected 4xx, got {label}")
        if statuses:
            self.assertIn(r.status, statuses, label)
        if r.body:
            got = r.error_codes()
            self.assertIsNotNone(got, f"error body is not {{'errors':[{{'code':..}}]}}: {label}")
            for code in got:
                self.assertIn(code, bt.SPEC_ERROR_CODES, label)
            if codes:
                self.assertTrue(set(got) & set(codes), f"expected code in {codes}: {label}")
        elif codes:
            self.fail(f"expected an error body with {codes}: {label}")

    def raw(self, data, timeout=10):
        status, headers, body = bt.raw_exchange(self.berth.port, data, timeout)
        return bt.Resp(status, list(headers.items()), body)

    # ------------------------------------------------------------------ names

    def test_invalid_repository_names(self):
        b = self.berth
        for label, name in BAD_NAMES:
            with self.subTest(name=label):
                self.assert_error(b.get(f"/v2/{name}/tags/list"), (400, 404),
                                  ("NAME_INVALID", "NAME_UNKNOWN"), f"tags {label}")
                self.assert_error(b.start_upload(name), (400, 404), ("NAME_INVALID", "NAME_UNKNOWN"),
                                  f"POST upload {label}")
                self.assert_error(b.put_manifest(name, "evil", self.image["manifest"]), (400, 404),
                                  ("NAME_INVALID", "NAME_UNKNOWN"), f"PUT manifest {label}")
                self.assert_error(b.request("POST", f"/v2/{name}/blobs/uploads/?digest="
                                                    f"{bt.sha256_digest(b'evil')}", body=b"evil"),
                                  (400, 404), ("NAME_INVALID", "NAME_UNKNOWN"), f"single POST {label}")

    def test_name_errors_are_name_invalid(self):
        # Syntactically invalid names are NAME_INVALID (400), not a 404.
        b = self.berth
        for name in ("Hostile/App", "a" * 256, "hostile//app", "hostile/app/"):
            r = b.put_manifest(name, "evil", self.image["manifest"])
            self.assert_error(r, (400,), ("NAME_INVALID",), name[:40])

    def test_mount_from_invalid_or_traversal_repo(self):
        b = self.berth
        layer = bt.sha256_digest(self.image["layers"][0])
        for frm in ("../hostile/app", "Hostile/App", "hostile%2F..%2Fapp"):
            r = b.request("POST", f"/v2/{OTHER}/blobs/uploads/?mount={layer}&from={frm}",
                          headers={"Content-Length": "0"})
            self.assertNotEqual(r.status, 201, f"mount from {frm} succeeded")
            self.assert_error(r, (400, 404), None, f"mount from {frm}")

    # ------------------------------------------------------------------ digests

    def test_invalid_digests(self):
        b = self.berth
        for label, digest in BAD_DIGESTS:
            with self.subTest(digest=label):
                self.assert_error(b.get(f"/v2/{REPO}/blobs/{digest}"), (400, 404),
                                  ("DIGEST_INVALID", "BLOB_UNKNOWN"), f"GET blob {label}")
                self.assert_error(b.head(f"/v2/{REPO}/blobs/{digest}"), (400, 404), None, f"HEAD blob {label}")
                self.assert_error(b.request("DELETE", f"/v2/{REPO}/blobs/{digest}"), (400, 404, 405),
                                  None, f"DELETE blob {label}")
                if ":" in digest:
                    self.assert_error(b.get(f"/v2/{REPO}/manifests/{digest}"), (400, 404),
                                      ("DIGEST_INVALID", "MANIFEST_UNKNOWN"), f"GET manifest {label}")
                    self.assert_error(b.put_manifest(REPO, digest, self.image["manifest"]), (400,),
                                      ("DIGEST_INVALID", "MANIFEST_INVALID"), f"PUT manifest {label}")
                loc = self.new_session()
                r = b.request("PUT", f"{loc}{'&' if '?' in loc else '?'}digest={digest}", body=b"evil")
                self.assert_error(r, (400,), ("DIGEST_INVALID",), f"PUT upload {label}")
                r = b.request("POST", f"/v2/{REPO}/blobs/uploads/?digest={digest}", body=b"evil")
                self.assert_error(r, (400,), ("DIGEST_INVALID",), f"single POST {label}")
                r = b.request("POST", f"/v2/{OTHER}/blobs/uploads/?mount={digest}&from={REPO}",
                              headers={"Content-Length": "0"})
                self.assert_error(r, (400,), ("DIGEST_INVALID",), f"mount {label}")

    def test_manifest_digest_reference_mismatch(self):
        # PUT by a well-formed digest that is not the body's digest.
        wrong = bt.sha256_digest(b"something else")
        r = self.berth.put_manifest(REPO, wrong, self.image["manifest"])
        self.assert_error(r, (400,), ("DIGEST_INVALID", "MANIFEST_INVALID"), "digest mismatch")
        self.assertEqual(self.berth.get(f"/v2/{REPO}/manifests/{wrong}").status, 404)

    # ------------------------------------------------------------------ tags

    def test_invalid_tags(self):
        b = self.berth
        for label, tag in BAD_TAGS:
            with self.subTest(tag=label):
                r = b.put_manifest(REPO, tag, self.image["manifest"])
                self.assert_error(r, (400, 404), ("TAG_INVALID", "MANIFEST_INVALID", "NAME_UNKNOWN"),
                                  f"PUT {label}")
                self.assert_error(b.get(f"/v2/{REPO}/manifests/{tag}"), (400, 404), None, f"GET {label}")
                r = b.put_manifest(REPO, self.image["digest"], self.image["manifest"], query=f"?tag={tag}")
                self.assert_error(r, (400,), ("TAG_INVALID", "MANIFEST_INVALID"), f"?tag={label}")

    def test_too_many_tag_params(self):
        query = "?" + "&".join(f"tag=t{i}" for i in range(1000))
        r = self.berth.put_manifest(REPO, self.image["digest"], self.image["manifest"], query=query)
        self.assert_error(r, (400, 414, 431), None, "1000 ?tag=")

    # ------------------------------------------------------------------ manifests

    def test_manifest_too_large(self):
        b = self.berth
        big = b'{"schemaVersion":2,"pad":"' + b"x" * (4 * 1024 * 1024) + b'"}'
        # Declared length over the limit: refused from the header alone.
        head = (f"PUT /v2/{REPO}/manifests/big HTTP/1.1\r\nHost: x\r\nContent-Type: {bt.OCI_MANIFEST}\r\n"
                f"Content-Length: {len(big)}\r\n\r\n").encode()
        self.assert_error(self.raw(head), (413,), ("SIZE_INVALID", "MANIFEST_INVALID"), "declared")
        # The whole body sent.
        self.assert_error(b.put_manifest(REPO, "big", big), (413,), None, "sent")
        # Chunked: no Content-Length, the limit applies while reading.
        r = b.request("PUT", f"/v2/{REPO}/manifests/big", body=[big[i:i + 65536] for i in range(0, len(big), 65536)],
                      headers={"Content-Type": bt.OCI_MANIFEST}, chunked=True)
        self.assert_error(r, (413,), None, "chunked")
        self.assertEqual(b.get(f"/v2/{REPO}/manifests/big").status, 404)

    def test_manifest_not_json(self):
        b = self.berth
        for label, body in [("garbage", b"not json at all"), ("empty", b""), ("array", b"[]"),
                            ("truncated", self.image["manifest"][:-5]), ("NUL", b"{\x00}"),
                            ("invalid utf-8", b'{"schemaVersion":2,"x":"\xff\xfe"}'),
                            ("number", b"12345"), ("string", b'"manifest"'),
                            ("schema 1", json.dumps({"schemaVersion": 1, "name": REPO, "tag": "x"}).encode()),
                            ("wrong schemaVersion", json.dumps({"schemaVersion": 3, "mediaType": bt.OCI_MANIFEST,
                                                                "config": {}, "layers": []}).encode()),
                            ("size negative", manifest_for([(list(self.image["blobs"])[0], -1)])),
                            ("size string", self.image["manifest"].replace(b'"size": 1000', b'"size": "1000"'))]:
            with self.subTest(body=label):
                r = b.put_manifest(REPO, "bad", body)
                self.assert_error(r, (400,), ("MANIFEST_INVALID",), label)
        self.assertEqual(b.get(f"/v2/{REPO}/manifests/bad").status, 404)

    def test_manifest_deeply_nested(self):
        b = self.berth
        depth = 100_000
        for label, body in [("arrays", b"[" * depth + b"]" * depth),
                            ("objects", b'{"a":' * depth + b"1" + b"}" * depth),
                            ("unclosed", b"[" * depth),
                            ("in a field", b'{"schemaVersion":2,"mediaType":"' + bt.OCI_MANIFEST.encode()
                             + b'","config":' + b"[" * depth + b"]" * depth + b',"layers":[]}')]:
            with self.subTest(body=label):
                r = b.put_manifest(REPO, "deep", body)
                self.assert_error(r, (400,), ("MANIFEST_INVALID",), label)
        self.assertEqual(b.get(f"/v2/{REPO}/manifests/deep").status, 404)

    def test_manifest_unknown_layer(self):
        b = self.berth
        img = self.image
        blobs = [(d, len(x)) for d, x in img["blobs"].items()]
        missing = bt.sha256_digest(b"never uploaded")
        r = b.put_manifest(REPO, "missing", manifest_for(blobs + [(missing, 14)]))
        self.assert_error(r, (400,), ("MANIFEST_BLOB_UNKNOWN",), "missing layer")
        r = b.put_manifest(REPO, "missing", manifest_for([(missing, 14)] + blobs[1:]))
        self.assert_error(r, (400,), ("MANIFEST_BLOB_UNKNOWN",), "missing config")
        # Blobs that exist, but in another repository only.
        r = b.put_manifest(OTHER, "missing", img["manifest"])
        self.assert_error(r, (400,), ("MANIFEST_BLOB_UNKNOWN",), "blobs of another repository")
        self.assertEqual(b.get(f"/v2/{REPO}/manifests/missing").status, 404)

    def test_manifest_wrong_layer_size(self):
        b = self.berth
        blobs = [(d, len(x)) for d, x in self.image["blobs"].items()]
        for delta in (1, -1):
            wrong = blobs[:-1] + [(blobs[-1][0], blobs[-1][1] + delta)]
            r = b.put_manifest(REPO, "wrongsize", manifest_for(wrong))
            self.assert_error(r, (400,), ("MANIFEST_INVALID", "SIZE_INVALID", "MANIFEST_BLOB_UNKNOWN"),
                              f"size {delta:+}")
        self.assertEqual(b.get(f"/v2/{REPO}/manifests/wrongsize").status, 404)

    def test_manifest_media_type_mismatch(self):
        r = self.berth.put_manifest(REPO, "mt", self.image["manifest"],
                                    media_type="application/vnd.oci.image.index.v1+json")
        self.assert_error(r, (400,), ("MANIFEST_INVALID",), "Content-Type differs from mediaType")

    # ------------------------------------------------------------------ HTTP framing

    def test_oversized_headers(self):
        port = self.berth.port
        for label, head in [
            ("one big header", b"GET /v2/ HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n"),
            ("many headers", b"GET /v2/ HTTP/1.1\r\nHost: x\r\n" + b"".join(
                b"X-H%d: %s\r\n" % (i, b"v" * 20) for i in range(1000)) + b"\r\n"),
            ("long target", b"GET /v2/" + b"a" * 20000 + b"/tags/list HTTP/1.1\r\nHost: x\r\n\r\n"),
        ]:
            with self.subTest(case=label), bt.connect(port) as s:
                try:
                    s.sendall(head)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                status, headers, body = bt.RawReader(s).read_response()
                self.assertIn(status, (400, 431), label)
                self.assert_error(bt.Resp(status, list(headers.items()), body), (400, 431), None, label)
                closed, _ = bt.wait_closed(s, 10)
                self.assertTrue(closed, f"{label}: connection left open after {status}")

    def test_header_under_8k_is_served(self):
        r = self.berth.get("/v2/", headers={"X-Pad": "p" * 7000})
        self.assertEqual(r.status, 200, r)

    # Server bug: the session's read buffer (beast::flat_buffer buffer_{8192}) caps a request head
    # at 8 KiB whatever limits.max_header_bytes says (default 16384), and overflowing it answers
    # 400 "malformed request" instead of 431.
    
    def test_header_just_under_limit_is_served(self):
        # The other side of the 16 KiB limit: 12 KiB of headers (e.g. a big bearer token) is fine.
        r = self.berth.get("/v2/", headers={"X-Pad": "p" * 12000})
        self.assertEqual(r.status, 200, r)

    def test_garbage_requests(self):
        port = self.berth.port
        for label, data in [
            ("garbage line", b"HELLO THERE\r\n\r\n"),
            ("binary", bytes(range(256)) + b"\r\n\r\n"),
            ("TLS hello", bytes.fromhex("160301020001000001fc0303") + os.urandom(64) + b"\r\n\r\n"),
            ("NUL in target", b"GET /v2/\x00 HTTP/1.1\r\nHost: x\r\n\r\n"),
            ("NUL in header", b"GET /v2/ HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n"),
            ("bad version", b"GET /v2/ HTTP/9.9\r\nHost: x\r\n\r\n"),
            ("no version", b"GET /v2/\r\n\r\n"),
            ("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
            ("header without colon", b"GET /v2/ HTTP/1.1\r\nHost x\r\n\r\n"),
            ("space before colon", b"GET /v2/ HTTP/1.1\r\nHost : x\r\n\r\n"),
            ("negative length", b"PUT /v2/x/manifests/y HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n"),
            ("huge length", b"PUT /v2/x/manifests/y HTTP/1.1\r\nHost: x\r\nContent-Length: "
             b"99999999999999999999999\r\n\r\n"),
            ("two lengths", b"PUT /v2/hostile/app/manifests/y HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
             b"Content-Length: 3\r\n\r\n{}x"),
            ("length and chunked", b"PUT /v2/hostile/app/manifests/y HTTP/1.1\r\nHost: x\r\n"
             b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
            ("bad chunk size", b"PUT /v2/hostile/app/manifests/y HTTP/1.1\r\nHost: x\r\n"
             b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"),
            ("huge chunk size", b"PUT /v2/hostile/app/manifests/y HTTP/1.1\r\nHost: x\r\n"
             b"Transfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\n{}\r\n0\r\n\r\n"),
            ("unknown transfer coding", b"PUT /v2/hostile/app/manifests/y HTTP/1.1\r\nHost: x\r\n"
             b"Transfer-Encoding: gzip\r\n\r\n{}"),
        ]:
            with self.subTest(case=label), bt.connect(port) as s:
                try:
                    s.sendall(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                try:
                    status, headers, body = bt.RawReader(s).read_response()
                except (ConnectionError, socket.timeout):
                    status = None  # closing without an answer is acceptable for unparseable bytes
                if status is not None:
                    self.assert_error(bt.Resp(status, list(headers.items()), body), None, None, label)
                    closed, _ = bt.wait_closed(s, 10)
                    self.assertTrue(closed, f"{label}: connection left open after {status}")
                self.assert_alive()
        self.assertEqual(self.berth.get(f"/v2/{REPO}/manifests/y").status, 404)

    def test_unsupported_methods(self):
        img = self.image
        for method, path in [("BREW", "/v2/"), ("TRACE", "/v2/"), ("OPTIONS", f"/v2/{REPO}/manifests/v1"),
                             ("PROPFIND", f"/v2/{REPO}/tags/list"), ("PUT", "/v2/"), ("DELETE", "/v2/"),
                             ("POST", f"/v2/{REPO}/manifests/v1"), ("PATCH", f"/v2/{REPO}/manifests/v1"),
                             ("PUT", f"/v2/{REPO}/blobs/{img['digest']}"), ("POST", "/v2/_catalog"),
                             ("DELETE", f"/v2/{REPO}/tags/list"), ("PUT", f"/v2/{REPO}/referrers/{img['digest']}"),
                             ("GET", f"/v2/{REPO}/blobs/uploads/")]:
            with self.subTest(method=method, path=path):
                r = self.raw(f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n".encode())
                self.assert_error(r, (400, 404, 405), None, f"{method} {path}")

    def test_non_origin_targets(self):
        img = self.image
        port = self.berth.port
        for label, target in [("absolute URL", f"http://127.0.0.1:{port}/v2/{REPO}/manifests/evil"),
                              ("absolute URL elsewhere", f"http://evil.example/v2/{REPO}/manifests/evil"),
                              ("no leading slash", f"v2/{REPO}/manifests/evil"),
                              ("asterisk", "*"),
                              ("authority", "127.0.0.1:80"),
                              ("dot segments", f"/v2/{REPO}/../{REPO}/manifests/evil"),
                              ("encoded dot segments", f"/v2/{REPO}/%2e%2e/app/manifests/evil"),
                              ("bad percent", f"/v2/{REPO}/manifests/ev%zzil"),
                              ("truncated percent", f"/v2/{REPO}/manifests/evil%2")]:
            with self.subTest(target=label):
                head = (f"PUT {target} HTTP/1.1\r\nHost: x\r\nContent-Type: {bt.OCI_MANIFEST}\r\n"
                        f"Content-Length: {len(img['manifest'])}\r\n\r\n").encode()
                r = self.raw(head + img["manifest"])
                self.assertNotEqual(r.status, 201, label)
                self.assert_error(r, None, None, label)
        self.assertEqual(self.berth.get(f"/v2/{REPO}/manifests/evil").status, 404)

    # ------------------------------------------------------------------ lists

    def test_tags_list_page_size(self):
        b = self.berth
        for n in ("-1", "abc", "", "1.5", "0x10", "%00", "1e3", "+1", "%201", "-0"):
            with self.subTest(n=n):
                self.assert_error(b.get(f"/v2/{REPO}/tags/list?n={n}"), (400,), None, f"n={n}")
                self.assert_error(b.get(f"/v2/_catalog?n={n}"), (400,), None, f"catalog n={n}")
        for n in ("999999999999", "18446744073709551616", "9" * 40):
            with self.subTest(n=n):
                start = time.monotonic()
                r = b.get(f"/v2/{REPO}/tags/list?n={n}")
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.json(), {"name": REPO, "tags": ["stable", "v1"]})
                r = b.get(f"/v2/_catalog?n={n}")
                self.assertEqual(r.status, 200, r)
                self.assertIn(REPO, r.json()["repositories"])
                self.assertLess(time.monotonic() - start, 5)
        r = b.get(f"/v2/{REPO}/tags/list?n=1&last=%00%FF")
        self.assertLess(r.status, 500, r)

    # ------------------------------------------------------------------ uploads

    def test_upload_id_traversal(self):
        b = self.berth
        loc = self.new_session()  # a live session, so a wrong id cannot fall back to it
        for upload_id in BAD_UPLOAD_IDS:
            path = f"/v2/{REPO}/blobs/uploads/{upload_id}"
            with self.subTest(id=upload_id[:40]):
                self.assert_error(b.get(path), (400, 404), ("BLOB_UPLOAD_UNKNOWN", "NAME_UNKNOWN"), "GET")
                self.assert_error(b.request("PATCH", path, body=b"evil data",
                                            headers={"Content-Type": "application/octet-stream"}),
                                  (400, 404), ("BLOB_UPLOAD_UNKNOWN", "NAME_UNKNOWN"), "PATCH")
                self.assert_error(b.request("PUT", f"{path}?digest={bt.sha256_digest(b'evil data')}",
                                            body=b"evil data"),
                                  (400, 404), ("BLOB_UPLOAD_UNKNOWN", "NAME_UNKNOWN"), "PUT")
                self.assert_error(b.request("DELETE", path), (400, 404),
                                  ("BLOB_UPLOAD_UNKNOWN", "NAME_UNKNOWN"), "DELETE")
        # A literal ../ in the path (clients normalise it; raw sockets do not).
        r = self.raw(f"PATCH /v2/{REPO}/blobs/uploads/../../../../j1/evil HTTP/1.1\r\nHost: x\r\n"
                     f"Content-Length: 4\r\n\r\nevil".encode())
        self.assert_error(r, (400, 404, 405), None, "literal ../")
        # Another repository's session id.
        sid = loc.split("?")[0].rsplit("/", 1)[1]
        self.assert_error(b.get(f"/v2/{OTHER}/blobs/uploads/{sid}"), (404,), ("BLOB_UPLOAD_UNKNOWN",),
                          "cross-repo")
        self.assert_error(b.request("PATCH", f"/v2/{OTHER}/blobs/uploads/{sid}", body=b"x"), (404,),
                          ("BLOB_UPLOAD_UNKNOWN",), "cross-repo PATCH")
        self.assertEqual(b.get(loc).status, 204)

    def test_content_range_malformed(self):
        b = self.berth
        loc = self.new_session()
        body = b"0123456789"
        for label, cr, cl in [("garbage", "garbage", 10), ("reversed", "9-0", 10), ("no dash", "10", 10),
                              ("negative", "-1-8", 10), ("too big", "0-" + "9" * 25, 10),
                              ("hex", "0x0-0x9", 10), ("length mismatch", "0-9", 5), ("longer", "0-4", 10),
                              ("overflow", "0-18446744073709551615", 10),
                              ("slash only", "/10", 10)]:
            with self.subTest(case=label):
                head = (f"PATCH {loc} HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
                        f"Content-Range: {cr}\r\nContent-Length: {cl}\r\n\r\n").encode()
                r = self.raw(head + body[:cl])
                self.assert_error(r, (400, 416), ("BLOB_UPLOAD_INVALID", "SIZE_INVALID", "UNSUPPORTED"), label)
        # Nothing was appended: the first chunk still goes at offset 0.
        r = b.request("PATCH", loc, body=body,
                      headers={"Content-Range": "0-9", "Content-Type": "application/octet-stream"})
        self.assertEqual(r.status, 202, r)
        self.assertEqual(r.header("Range"), "0-9")

    def test_chunk_out_of_order(self):
        b = self.berth
        loc = self.new_session()
        first, second = os.urandom(100), os.urandom(100)
        r = b.request("PATCH", loc, body=second, headers={"Content-Range": "100-199"})
        self.assert_error(r, (416,), None, "chunk before the first")
        r = b.request("PATCH", loc, body=first, headers={"Content-Range": "0-99"})
        self.assertEqual(r.status, 202, r)
        loc = bt.location_path(r.header("Location"))
        for cr in ("0-99", "50-149", "101-200", "200-299"):
            with self.subTest(range=cr):
                r = b.request("PATCH", loc, body=second, headers={"Content-Range": cr})
                self.assert_error(r, (416,), None, f"chunk {cr} after 0-99")
        r = b.get(loc)
        self.assertEqual(r.status, 204, r)
        self.assertEqual(r.header("Range"), "0-99")

    def test_put_wrong_digest(self):
        b = self.berth
        data = os.urandom(5000)
        wrong = bt.sha256_digest(b"not the content")
        for mode in ("monolithic", "after patch", "single post"):
            with self.subTest(mode=mode):
                if mode == "single post":
                    r = b.request("POST", f"/v2/{REPO}/blobs/uploads/?digest={wrong}", body=data)
                else:
                    loc = self.new_session()
                    body = data
                    if mode == "after patch":
                        r = b.request("PATCH", loc, body=data)
                        self.assertEqual(r.status, 202, r)
                        loc, body = bt.location_path(r.header("Location")), None
                    r = b.request("PUT", bt.with_query(loc, digest=wrong), body=body,
                                  headers={"Content-Length": "0"} if body is None else None)
                self.assert_error(r, (400,), ("DIGEST_INVALID",), mode)
                for digest in (wrong, bt.sha256_digest(data)):
                    self.assertEqual(b.head(f"/v2/{REPO}/blobs/{digest}").status, 404, f"{mode}: {digest}")
                    self.assertEqual(b.get(f"/v2/{REPO}/blobs/{digest}").status, 404, f"{mode}: {digest}")

    def test_put_upload_without_digest(self):
        loc = self.new_session()
        r = self.berth.request("PUT", loc, body=b"data")
        self.assert_error(r, (400,), ("DIGEST_INVALID",), "PUT without ?digest=")

    def test_unknown_digest_algorithm_for_session(self):
        for alg in ("md5", "sha1", "SHA256", "sha256%00"):
            r = self.berth.request("POST", f"/v2/{REPO}/blobs/uploads/?digest-algorithm={alg}",
                                   headers={"Content-Length": "0"})
            self.assert_error(r, (400,), ("DIGEST_INVALID", "UNSUPPORTED"), alg)

    # ------------------------------------------------------------------ ranges

    def test_blob_ranges(self):
        b = self.berth
        data = self.image["layers"][1]
        size = len(data)
        path = f"/v2/{REPO}/blobs/{bt.sha256_digest(data)}"
        for rng, first, last in [("bytes=0-0", 0, 0), ("bytes=-5", size - 5, size - 1),
                                 ("bytes=5-", 5, size - 1), ("bytes=10-19", 10, 19),
                                 ("bytes=0-99999999", 0, size - 1), (f"bytes=-{size * 2}", 0, size - 1)]:
            with self.subTest(range=rng):
                r = b.get(path, headers={"Range": rng})
                self.assertEqual(r.status, 206, f"{rng}: {r!r}")
                self.assertEqual(r.header("Content-Range"), f"bytes {first}-{last}/{size}", rng)
                self.assertEqual(r.body, data[first:last + 1], rng)
        for rng in ("bytes=0-1,3-4", "bytes=0-0, -1", "items=0-5", "bytes=abc", "bytes=5-1", "bytes=--5"):
            with self.subTest(range=rng):
                r = b.get(path, headers={"Range": rng})
                self.assertEqual(r.status, 200, f"{rng} not ignored: {r!r}")
                self.assertEqual(r.body, data, rng)
        for rng in ("bytes=999999-", f"bytes={size}-", f"bytes={size}-{size + 10}", "bytes=-0"):
            with self.subTest(range=rng):
                r = b.get(path, headers={"Range": rng})
                self.assert_error(r, (416,), None, rng)

      # server bug: 416 lacks Content-Range: bytes */SIZE (RFC 9110 15.5.17)
    def test_unsatisfiable_range_content_range(self):
        data = self.image["layers"][1]
        r = self.berth.get(f"/v2/{REPO}/blobs/{bt.sha256_digest(data)}", headers={"Range": "bytes=999999-"})
        self.assertEqual(r.status, 416, r)
        self.assertEqual(r.header("Content-Range"), f"bytes */{len(data)}")

    # ------------------------------------------------------------------ slow and idle clients

    def assert_closed_in_time(self, s, label, limit=10):
        start = time.monotonic()
        closed, data = bt.wait_closed(s, limit)
        self.assertTrue(closed, f"{label}: connection still open after {limit}s")
        self.assert_alive()
        return time.monotonic() - start, data

    def test_idle_connection_closed(self):
        with bt.connect(self.berth.port) as s:
            self.assert_closed_in_time(s, "no bytes sent")

    def test_half_header_closed(self):
        with bt.connect(self.berth.port) as s:
            s.sendall(b"GET /v2/ HTTP/1.1\r\nHost: x\r\n")
            self.assert_closed_in_time(s, "half a header")

    def test_dribbled_header_closed(self):
        # One byte every 0.2 s: each read is "recent", but the whole head must arrive in time.
        head = b"GET /v2/ HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"s" * 200
        with bt.connect(self.berth.port) as s:
            deadline = time.monotonic() + 10
            closed = False
            for byte in head:
                if time.monotonic() > deadline:
                    break
                try:
                    s.sendall(bytes([byte]))
                except (BrokenPipeError, ConnectionResetError):
                    closed = True
                    break
                s.settimeout(0.2)
                try:
                    if s.recv(4096) == b"":
                        closed = True
                        break
                except socket.timeout:
                    pass
                except ConnectionResetError:
                    closed = True
                    break
            self.assertTrue(closed, "slowloris header kept the connection open for 10 s")
        self.assert_alive()

    def test_stalled_body_closed(self):
        loc = self.new_session()
        with bt.connect(self.berth.port) as s:
            s.sendall(f"PATCH {loc} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n".encode() + b"x" * 10)
            self.assert_closed_in_time(s, "stalled body")
        # The stalled PATCH lets go of the session once its connection is gone: its status answers
        # again, at the 10 bytes that arrived.
        def status_when_let_go():
            r = self.berth.get(loc)
            return r if r.status != 416 else None
        r = bt.poll(status_when_let_go, 10, what="the stalled PATCH to let go of its session")
        self.assertEqual(r.status, 204, r.body)
        self.assertEqual(r.header("Range"), "0-9")

    def test_keep_alive_idle_after_response_closed(self):
        with bt.connect(self.berth.port) as s:
            s.sendall(b"GET /v2/ HTTP/1.1\r\nHost: x\r\n\r\n")
            status, _, _ = bt.RawReader(s).read_response()
            self.assertEqual(status, 200)
            self.assert_closed_in_time(s, "idle keep-alive")

    # ------------------------------------------------------------------ connections

    def test_pipelined_requests_after_errors(self):
        img = self.image
        bad_manifest = b"not json"
        reqs = [
            b"GET /v2/ HTTP/1.1\r\nHost: x\r\n\r\n",
            b"GET /v2/Bad/Name/tags/list HTTP/1.1\r\nHost: x\r\n\r\n",
            f"PUT /v2/{REPO}/manifests/bad HTTP/1.1\r\nHost: x\r\nContent-Type: {bt.OCI_MANIFEST}\r\n"
            f"Content-Length: {len(bad_manifest)}\r\n\r\n".encode() + bad_manifest,
            f"GET /v2/{REPO}/blobs/sha256:{'0' * 64} HTTP/1.1\r\nHost: x\r\n\r\n".encode(),
            f"HEAD /v2/{REPO}/manifests/v1 HTTP/1.1\r\nHost: x\r\n\r\n".encode(),
            f"GET /v2/{REPO}/blobs/uploads/nope HTTP/1.1\r\nHost: x\r\n\r\n".encode(),
            f"GET /v2/{REPO}/manifests/v1 HTTP/1.1\r\nHost: x\r\nAccept: {bt.OCI_MANIFEST}\r\n\r\n".encode(),
        ]
        want = [200, 400, 400, 404, 200, 404, 200]
        with bt.connect(self.berth.port) as s:
            s.sendall(b"".join(reqs))  # all at once: pipelined
            reader = bt.RawReader(s)
            got = []
            for i, req in enumerate(reqs):
                status, headers, body = reader.read_response(head_request=req.startswith(b"HEAD"))
                got.append(status)
                if i == len(reqs) - 1:
                    self.assertEqual(body, img["manifest"])
            self.assertEqual(got, want)
            # And one at a time on the same connection.
            for _ in range(3):
                s.sendall(b"GET /v2/nope/tags/list HTTP/1.1\r\nHost: x\r\n\r\n")
                self.assertEqual(reader.read_response()[0], 404)
                s.sendall(f"GET /v2/{REPO}/tags/list HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                status, _, body = reader.read_response()
                self.assertEqual((status, json.loads(body)["tags"]), (200, ["stable", "v1"]))

    def test_keep_alive_after_error_with_unread_body(self):
        # An error answered before the body was read: either the body is drained and the
        # connection reused, or the connection is closed -- never is the body parsed as a request.
        body = b"GET /v2/_catalog HTTP/1.1\r\nHost: x\r\n\r\n"  # looks like a request
        with bt.connect(self.berth.port) as s:
            s.sendall(f"PATCH /v2/{REPO}/blobs/uploads/nope HTTP/1.1\r\nHost: x\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            reader = bt.RawReader(s)
            self.assertEqual(reader.read_response()[0], 404)
            try:
                s.sendall(b"GET /v2/ HTTP/1.1\r\nHost: x\r\n\r\n")
                status, _, resp_body = reader.read_response()
            except ConnectionError:
                return  # closed: fine
            self.assertEqual(status, 200, "smuggled body was answered as a request")
            self.assertEqual(resp_body, b"{}")


class UploadCapTest(unittest.TestCase):
    def test_max_uploads(self):
        with bt.Berth(config={"limits": {"max_uploads": 3}}) as b:
            locs = [b.upload_location("cap/repo") for _ in range(3)]
            self.assertEqual(len(set(locs)), 3)
            r = b.start_upload("cap/repo")
            self.assertEqual(r.status, 429, r)
            self.assertEqual(r.error_codes(), ["TOOMANYREQUESTS"])
            self.assertEqual(r.header("Retry-After"), "1", "429 says when to try again (spec main)")
            r = b.request("POST", f"/v2/cap/other/blobs/uploads/?digest={bt.sha256_digest(b'x')}", body=b"x")
            self.assertEqual(r.status, 429, r)
            r = b.request("POST", f"/v2/cap/other/blobs/uploads/?mount={bt.sha256_digest(b'x')}&from=cap/repo",
                          headers={"Content-Length": "0"})
            self.assertIn(r.status, (429,), r)  # mount falls back to a session, which is capped too
            # Existing sessions still work; finishing one frees a slot.
            data = b"payload"
            r = b.request("PUT", bt.with_query(locs[0], digest=bt.sha256_digest(data)), body=data)
            self.assertEqual(r.status, 201, r)
            locs[0] = b.upload_location("cap/repo")
            self.assertEqual(b.start_upload("cap/repo").status, 429)
            # Cancelling frees a slot too.
            self.assertEqual(b.request("DELETE", locs[1]).status, 204)
            self.assertEqual(b.start_upload("cap/repo").status, 202)
            self.assertTrue(b.alive())


class ClientResetTest(unittest.TestCase):
    def test_reset_during_blob_get(self):
        """A client that resets the connection in the middle of a large blob GET
        (sendfile on plain HTTP) must not take the server down (SIGPIPE)."""
        with bt.Berth() as b:
            data = os.urandom(32 << 20)
            digest = b.push_blob("reset/repo", data)
            request = f"GET /v2/reset/repo/blobs/{digest} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
            for _ in range(5):
                s = bt.connect(b.port)
                s.sendall(request)
                self.assertTrue(s.recv(65536), "no answer began")
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()  # RST, with most of the blob still to send
            r = b.get(f"/v2/reset/repo/blobs/{digest}")
            self.assertTrue(b.alive(), f"berth died: {b.stderr()[-2000:]}")
            self.assertEqual(r.status, 200)
            self.assertEqual(r.body, data)


if __name__ == "__main__":
    unittest.main(verbosity=2)
