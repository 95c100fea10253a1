#!/usr/bin/env python3
"""A hostile upstream registry (hostile_upstream.py) against a real berth proxying it: manifests:
nested and costly documents, cached tags served while the upstream misbehaves, silent and trickled
answers, wrong digests and lying lengths, oversize manifests, huge headers, malformed HTTP and endless
chunk framing.

The harness and what every test checks: tests/lib/hostile_case.py.
"""

import json
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
import hostile_upstream as hu  # noqa: E402
from hostile_case import (DOCKER_MANIFEST, NESTED, NS, TWIN, HostileCase, chunked, configure,  # noqa: E402
                          image_manifest, new_marker)


class ManifestTest(HostileCase):
    def test_nested_and_costly_manifests(self):
        objects = b'{"a":' * 800_000
        wide = b'{"schemaVersion":2,"mediaType":"' + bt.OCI_MANIFEST.encode() + b'","layers":[' + \
            b"{}," * 1_300_000 + b"{}]}"
        variants = [
            ("nested json", NESTED, "application/json", None),
            ("nested oci", NESTED, bt.OCI_MANIFEST, None),
            ("nested docker claimed", NESTED, DOCKER_MANIFEST, bt.sha256_digest(NESTED)),
            ("nested objects", objects, bt.OCI_MANIFEST, None),
            ("wide", wide, bt.OCI_MANIFEST, None),
        ]
        for k, (_, body, media_type, claim) in enumerate(variants):
            self.up.on(rf"^/v2/library/doc{k}-\d+/manifests/", hu.manifest_answer(body, media_type, claim))

        def pull(i):
            k = i % len(variants)
            name, body = variants[k][0], variants[k][1]
            ref = bt.sha256_digest(body) if i % 3 == 0 else f"v{i}"  # by digest too
            got = self.get_manifest(f"library/doc{k}-{i}", ref)
            self.assert_manifest_error(got, f"{name} by {ref}")
            return (f"library/doc{k}-{i}", ref, got.status)
        with self.while_hostile(bad=[NESTED, objects, wide]):
            pulled = self.hammer(pull, 10)
        self.assert_nothing_cached(manifests=[(r, ref) for r, ref, _ in pulled[:10]] +
                                   [("library/doc0-0", bt.sha256_digest(NESTED))])
        good = image_manifest(new_marker("honest"))
        self.assert_served_when_honest(manifests=[("library/doc0-0", "v0", good)])

    @configure(upstream={"check_interval_seconds": 1})
    def test_cached_tags_stay_served(self):
        """A cached tag due for its check while the upstream misbehaves is served as it is ("stale")."""
        wide = b'{"schemaVersion":2,"layers":[' + b"{}," * 1_300_000 + b"{}]}"
        other = image_manifest(new_marker())
        kinds = {  # kind: (ns, behaviour); the ones that time out on twin.test, whose address they make skipped
            "nested": (NS, hu.manifest_answer(NESTED)),
            "costly": (NS, hu.manifest_answer(wide)),
            "not-json": (NS, hu.manifest_answer(b"<html>maintenance</html>")),
            "not-a-manifest": (NS, hu.manifest_answer(b'{"schemaVersion":2,"layers":"none"}')),
            "403": (NS, hu.respond(403, hu.error_body("DENIED"))),
            "lying": (NS, hu.manifest_answer(other, digest="sha256:" + "1" * 64)),
            "oversize": (NS, hu.manifest_answer(image_manifest(new_marker(), pad=5 << 20))),
            "5xx": (NS, hu.respond(503, b"{}")),
            "garbage": (NS, hu.raw(b"SPLAT\r\n\r\n")),
            "silent": (TWIN, hu.silent()),
            "trickle": (TWIN, hu.trickle(hu.head_bytes(200, [("Content-Length", 2)]) + b"{}", 0.3)),
        }
        good = {}
        for kind, (ns, _) in kinds.items():
            good[kind] = image_manifest(new_marker("honest"))
            self.up.add_manifest(f"library/stale-{kind}", "v1", good[kind])
            self.assertEqual(self.get_manifest(f"library/stale-{kind}", "v1", ns).body, good[kind])
        seen = len(self.up.received())
        for kind, (_, behaviour) in kinds.items():
            self.up.on(rf"^/v2/library/stale-{kind}/manifests/", behaviour)
        names = sorted(kinds)

        def pull(i):
            kind = names[i % len(names)]
            got = self.get_manifest(f"library/stale-{kind}", "v1", kinds[kind][0])
            self.assert_answered(got, f"cached tag, upstream {kind}")
            self.assertEqual((got.status, got.body), (200, good[kind]), f"cached tag, upstream {kind}: {got}")
            return got

        def all_checked():  # every kind's tag was asked upstream again (and those answers asserted)
            asked = {r.path.split("/")[3] for r in self.up.received()[seen:]}
            return all(f"stale-{kind}" in asked for kind in kinds)
        with self.while_hostile(bad=[NESTED, wide], markers=[json.loads(other)["annotations"]["test.marker"]]):
            self.hammer(pull, len(names), until=all_checked)
            self.wait_upstream_released()

    def test_silent_manifest(self):
        self.up.on(r"/manifests/", hu.silent())

        def pull(i):
            got = self.get_manifest(f"library/silent-{i}", "v1")
            self.assert_manifest_refused(got, f"silent {i}")
            return got
        with self.while_hostile():
            gots = self.hammer(pull, 16)
            self.wait_upstream_released()
        self.assertGreaterEqual(len(self.up.received(contains="/manifests/v1")), 1, "the upstream was never asked")
        self.assert_nothing_cached(manifests=[(f"library/silent-{i}", "v1") for i in range(len(gots))])
        self.assert_served_when_honest(manifests=[("library/silent-0", "v1", image_manifest(new_marker("honest")))])

    def test_trickling_manifest(self):
        manifests = {}
        kinds = [("body", 0.3), ("body", 1.5), ("head", 0.2), ("chunks", 0.3)]

        def variant(k, req):
            kind, interval = kinds[k]
            data = manifests[req.path.split("/")[3]]
            head = hu.head_bytes(200, [("Content-Type", bt.OCI_MANIFEST), ("Content-Length", len(data))])
            if kind == "body":  # the head at once, the body a byte at a time
                return hu.trickle_body(200, [("Content-Type", bt.OCI_MANIFEST), ("Content-Length", len(data))],
                                       data, interval)
            if kind == "head":  # the head itself a byte at a time
                return hu.trickle(head + data, interval)
            return hu.trickle_body(200, [("Content-Type", bt.OCI_MANIFEST), ("Transfer-Encoding", "chunked")],
                                   chunked(data, 1), interval, chunk=6)  # one-byte chunks
        markers = []

        def pull(k, repo):
            marker = new_marker("trickled")
            markers.append(marker)
            manifests[repo] = image_manifest(marker)
            got = self.get_manifest(f"library/{repo}", "v1")
            self.assert_manifest_refused(got, f"trickle {kinds[k]}")
            return f"library/{repo}"
        repos = self.pull_variants("trickle", variant, len(kinds), pull, 16, "manifests/", markers=markers)
        self.assert_nothing_cached(manifests=[(r, "v1") for r in repos] +
                                   [(r, bt.sha256_digest(manifests[r.split("/")[1]])) for r in repos])
        self.assert_served_when_honest(manifests=[(repos[0], "v1", manifests[repos[0].split("/")[1]])])

    def test_wrong_digest_and_lying_lengths(self):
        good, bad = {}, {}
        markers = []

        def variant(k, req):
            repo = req.path.split("/")[3]
            g, b = good[repo], bad[repo]
            ct = ("Content-Type", bt.OCI_MANIFEST)
            return [
                hu.manifest_answer(b, digest=bt.sha256_digest(g)),  # by digest: other bytes, a lying claim
                hu.manifest_answer(b),  # by digest: other bytes, no claim
                hu.manifest_answer(b, digest=bt.sha256_digest(g)),  # by tag: bytes not matching the claim
                hu.raw(hu.head_bytes(200, [ct, ("Content-Length", len(g) + 100)]) + g),  # longer, then closed
                hu.raw(hu.head_bytes(200, [ct, ("Content-Length", len(g) + 100)]) + g, then="hold"),  # ... held
                hu.raw(hu.head_bytes(200, [ct, ("Content-Length", len(g) - 10),
                                           ("Docker-Content-Digest", bt.sha256_digest(g))]) + g),  # shorter
                hu.manifest_answer(g, digest="sha256:" + "0" * 64),  # right bytes, another digest claimed
            ][k]
        by_tag = {2, 3, 6}

        def pull(k, repo):
            marker = new_marker()
            markers.append(marker)
            good[repo], bad[repo] = image_manifest(new_marker("honest")), image_manifest(marker)
            ref = "v1" if k in by_tag else bt.sha256_digest(good[repo])
            got = self.get_manifest(f"library/{repo}", ref)
            self.assert_manifest_refused(got, f"lie {k} by {ref}")
            return f"library/{repo}", ref
        pulled = self.pull_variants("lie", variant, 7, pull, 14, "manifests/", markers=markers)
        self.assert_nothing_cached(manifests=pulled + [(r, bt.sha256_digest(bad[r.split("/")[1]])) for r, _ in pulled])
        repo0, repo2 = pulled[0][0], pulled[2][0]
        self.assert_served_when_honest(manifests=[(repo0, pulled[0][1], good[repo0.split("/")[1]]),
                                                  (repo2, "v1", good[repo2.split("/")[1]])])

    @configure(limits={"max_manifest_bytes": 65536})
    def test_oversize_manifest(self):
        big = {}
        markers = []

        def variant(k, req):
            data = big[req.path.split("/")[3]]
            ct = ("Content-Type", bt.OCI_MANIFEST)
            return [
                hu.manifest_answer(data),
                hu.raw(hu.head_bytes(200, [ct, ("Transfer-Encoding", "chunked")]) + chunked(data, 8192)),
                hu.raw(hu.head_bytes(200, [ct, ("Connection", "close")]) + data),  # delimited by the close
                hu.firehose(hu.head_bytes(200, [ct, ("Connection", "close")]) + b'{"a":"', b"x"),  # endless
                hu.firehose(hu.head_bytes(200, [ct, ("Transfer-Encoding", "chunked")]), b"1000\r\n" + b" " * 4096 +
                            b"\r\n"),  # endless chunks
                hu.manifest_answer(data, digest=bt.sha256_digest(data)),
            ][k]

        def pull(k, repo):
            marker = new_marker()
            markers.append(marker)
            big[repo] = image_manifest(marker, pad=1 << 20)
            ref = bt.sha256_digest(big[repo]) if k == 5 else "v1"
            got = self.get_manifest(f"library/{repo}", ref)
            self.assert_manifest_refused(got, f"oversize {k}")
            return f"library/{repo}", ref
        pulled = self.pull_variants("big", variant, 6, pull, 12, "manifests/", markers=markers)
        self.assert_nothing_cached(manifests=pulled)
        # one just under the limit is fetched
        self.assert_served_when_honest(manifests=[(pulled[0][0], "v1", image_manifest(new_marker("honest"),
                                                                                      pad=60000))])

    def test_huge_headers(self):
        good = {}

        def variant(k, req):
            data = good[req.path.split("/")[3]]
            ok_head = [("Content-Type", bt.OCI_MANIFEST), ("Content-Length", len(data))]
            return [
                hu.raw(hu.head_bytes(200, ok_head + [("X-Pad", "a" * 100_000)]) + data),
                hu.raw(hu.head_bytes(200, ok_head + [(f"X-H{j}", "v") for j in range(12_000)]) + data),
                hu.firehose(b"HTTP/1.1 200 OK\r\n", b"X-More: yes\r\n"),
                hu.firehose(b"HTTP/1.1 200 OK\r\nX-Long: ", b"a"),
                hu.firehose(b"HTTP/1.1 200 OK\r\n", b"X-Slow: yes\r\n", pause=0.05),
                hu.raw(b"HTTP/1.1 200 " + b"R" * 100_000 + b"\r\nContent-Length: 2\r\n\r\n{}"),
            ][k]
        blobs = {}

        def pull(k, repo):
            good[repo] = image_manifest(new_marker("honest"))
            blobs[repo] = os.urandom(3000)
            got = self.get_manifest(f"library/{repo}", bt.sha256_digest(good[repo]))
            self.assert_manifest_refused(got, f"headers {k}")
            got = self.get_blob(f"library/{repo}", bt.sha256_digest(blobs[repo]))
            self.assert_blob_refused(got, f"headers {k}, blob")
            return repo
        repos = self.pull_variants("hdr", variant, 6, pull, 12, "(manifests|blobs)/")
        self.assert_nothing_cached(manifests=[(f"library/{r}", bt.sha256_digest(good[r])) for r in repos],
                                   blobs=[(f"library/{r}", bt.sha256_digest(blobs[r])) for r in repos])
        r = repos[0]
        self.assert_served_when_honest(manifests=[(f"library/{r}", bt.sha256_digest(good[r]), good[r])],
                                       blobs=[(f"library/{r}", blobs[r])])

    def test_malformed_http(self):
        content = {}

        def variants(body, ctype):
            n = len(body)
            ok = [("Content-Type", ctype)]
            te = ok + [("Transfer-Encoding", "chunked")]
            H = hu.head_bytes
            # (name, behaviour, strict: must be refused; else refused or exactly right)
            return [
                ("garbage status line", hu.raw(b"SPLAT " + os.urandom(16).hex().encode() + b"\r\n\r\n"), True),
                ("non-numeric status", hu.raw(b"HTTP/1.1 2x0 OK\r\nContent-Length: %d\r\n\r\n" % n + body), True),
                ("status 999", hu.raw(b"HTTP/1.1 999 Odd\r\nContent-Length: %d\r\n\r\n" % n + body), True),
                ("closed mid-header", hu.raw(b"HTTP/1.1 200 OK\r\nContent-Type: appl"), True),
                ("reset mid-header", hu.raw(b"HTTP/1.1 200 OK\r\nContent-Le", then="reset"), True),
                ("reset at once", hu.reset(), True),
                ("closed at once", hu.raw(b""), True),
                ("HTTP/0.9 body only", hu.raw(body), True),
                ("non-hex chunk size", hu.raw(H(200, te) + b"zz\r\n" + body + b"\r\n0\r\n\r\n"), True),
                ("negative chunk size", hu.raw(H(200, te) + b"-5\r\n" + body + b"\r\n0\r\n\r\n"), True),
                ("overflowing chunk size", hu.raw(H(200, te) + b"1" + b"0" * 40 + b"\r\n" + body), True),
                ("chunk longer than its data", hu.raw(H(200, te) + b"%x\r\n" % (n + 1000) + body), True),
                ("chunk without its CRLF", hu.raw(H(200, te) + b"%x\r\n" % n + body + b"XX0\r\n\r\n"), True),
                ("endless 100 Continue", hu.firehose(b"", b"HTTP/1.1 100 Continue\r\n\r\n"), True),
                ("negative Content-Length", hu.raw(H(200, ok + [("Content-Length", -1)]) + body), True),
                ("overflowing Content-Length", hu.raw(H(200, ok + [("Content-Length", "9" * 30)]) + body), True),
                ("two Content-Lengths", hu.raw(H(200, ok + [("Content-Length", n), ("Content-Length", n + 5)]) + body),
                 False),
                ("Content-Length and chunked", hu.raw(H(200, te + [("Content-Length", n + 7)]) + chunked(body)), False),
                ("bare LF", hu.raw(f"HTTP/1.1 200 OK\nContent-Type: {ctype}\nContent-Length: {n}\n\n".encode() + body),
                 False),
                ("NUL in a header", hu.raw(H(200, ok + [("Content-Length", n), ("X-A", "a\x00b")]) + body), False),
                ("folded header", hu.raw(b"HTTP/1.1 200 OK\r\nX-F: a\r\n  b\r\nContent-Length: %d\r\n\r\n" % n + body),
                 False),
            ]
        names = [name for name, _, _ in variants(b"x", "y")]

        def variant(k, req):
            m = re.match(r"^/v2/library/(mal\d+-\d+)/(manifests|blobs)/", req.path)
            body = content[(m.group(1), m.group(2))]
            ctype = bt.OCI_MANIFEST if m.group(2) == "manifests" else "application/octet-stream"
            return variants(body, ctype)[k][1]

        def pull(k, repo):
            manifest, blob = image_manifest(new_marker("honest")), os.urandom(2500)
            content[(repo, "manifests")], content[(repo, "blobs")] = manifest, blob
            strict = variants(b"x", "y")[k][2]
            got = self.get_manifest(f"library/{repo}", bt.sha256_digest(manifest))
            if strict:
                self.assert_manifest_refused(got, names[k])
            else:
                self.assert_refused_or_right(got, manifest, "manifest", names[k])
            got = self.get_blob(f"library/{repo}", bt.sha256_digest(blob))
            if strict:
                self.assert_blob_refused(got, names[k] + ", blob")
            else:
                self.assert_refused_or_right(got, blob, "blob", names[k] + ", blob")
            return repo
        repos = self.pull_variants("mal", variant, len(names), pull, len(names), workers=12)
        strict = [r for r in repos if variants(b"x", "y")[int(r[3:].split("-")[0])][2]]
        self.assert_nothing_cached(
            manifests=[(f"library/{r}", bt.sha256_digest(content[(r, "manifests")])) for r in strict],
            blobs=[(f"library/{r}", bt.sha256_digest(content[(r, "blobs")])) for r in strict])
        r = strict[0]
        self.assert_served_when_honest(
            manifests=[(f"library/{r}", bt.sha256_digest(content[(r, "manifests")]), content[(r, "manifests")])],
            blobs=[(f"library/{r}", content[(r, "blobs")])])


    def test_endless_chunk_framing(self):
        """A chunk-size line, a chunk extension or trailers that never end, for manifests and tag lists
        (the upstream stops after 64 MiB: berth should have stopped reading long before)."""
        head = hu.head_bytes(200, [("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")])
        kinds = [("chunk size", hu.firehose(head + b"1", b"0", limit=64 << 20)),
                 ("chunk extension", hu.firehose(head + b"1;", b"a", limit=64 << 20)),
                 ("trailers", hu.firehose(head + b"1\r\n{\r\n0\r\n", b"X-Trailer: y\r\n", limit=64 << 20))]
        for k, (_, behaviour) in enumerate(kinds):
            self.up.on(rf"^/v2/library/endless{k}-\d+/(manifests/|tags/list)", behaviour)

        def pull(i):
            k = i % len(kinds)
            repo, what = f"library/endless{k}-{i}", f"endless {kinds[k][0]}"
            if i % 2:
                self.assert_manifest_refused(self.get_manifest(repo, "v1"), what)
            else:
                got = self.get_tags(repo)
                self.assert_answered(got, what + ", tag list")
                self.assertEqual((got.status, got.codes()), (404, ["NAME_UNKNOWN"]), f"{what}, tag list: {got}")
            return repo
        with self.while_hostile():
            repos = self.hammer(pull, 6)
            self.wait_upstream_released()
        # A bounded reader gives up on one line after kilobytes; the socket buffers hold a few MiB.
        read = sorted(r.sent or 0 for r in self.up.received(contains="/library/endless"))
        self.assertLess(read[-1], 16 << 20, f"berth read {read[-1] >> 20} MiB of one endless chunk line or trailer "
                                            f"(bytes the upstream got written, per request: {read})")
        self.assert_served_when_honest(manifests=[(repos[1], "v1", image_manifest(new_marker("honest")))])


if __name__ == "__main__":
    unittest.main()
