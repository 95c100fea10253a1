#!/usr/bin/env python3
"""A hostile upstream registry (hostile_upstream.py) against a real berth proxying it: where the
upstream sends berth elsewhere: hostile redirects (loops, chains, other schemes, a silent host) and
Authorization never carried across them; Bearer token realms (allowed, not allowed, a host prefix that
is no host) and hostile token answers.

The harness and what every test checks: tests/lib/hostile_case.py.
"""

import base64
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
import hostile_upstream as hu  # noqa: E402
from hostile_case import NESTED, RELEASE_WITHIN, HostileCase, configure, image_manifest, new_marker  # noqa: E402


class RedirectTest(HostileCase):
    def before_berth(self):
        self.silent_host = self.server(name="silent")
        self.silent_host.on(r".*", hu.silent())
        self.cdn = self.server(name="cdn")

    def test_hostile_redirects(self):
        good = {}
        cdn, silent = self.cdn.url, self.silent_host.url

        def variant(k, req):
            path = req.path
            hop = int(req.q("hop", "0"))
            return [
                hu.redirect(path),  # to itself, forever
                hu.redirect(f"{path}?hop={hop + 1}"),  # ever further
                hu.redirect(lambda r: f"{self.up.url}{path}?hop={1 - hop}"),  # ping-pong, absolute
                hu.redirect(f"{cdn}{path}?hop=0"),  # a 7-hop chain on the cdn (below)
                hu.redirect("ftp://127.0.0.1/blob"),
                hu.redirect("file:///etc/passwd"),
                hu.redirect("javascript:alert(1)"),
                hu.redirect("http://"),
                hu.redirect("http://127.0.0.1:0/x"),
                hu.redirect("http://[::1"),
                hu.redirect(""),
                hu.redirect("../elsewhere"),
                hu.redirect(f"{silent}/v2/x"),  # to a host that never answers
                hu.redirect("/" + "l" * 100_000),  # a Location over the head limit
                hu.redirect(f"http://user:pw@127.0.0.1:{self.cdn.port}/x"),
            ][k]
        count = 15
        # the cdn: seven hops before the content (berth follows five)
        self.cdn.on(r".*", hu.dispatch(lambda req: hu.redirect(f"{req.path}?hop={int(req.q('hop', '0')) + 1}")
                                       if int(req.q("hop", "0")) < 7 else self.cdn.honest))

        def pull(k, repo):
            manifest, blob = image_manifest(new_marker("honest")), os.urandom(3000)
            good[repo] = (manifest, blob)
            self.cdn.add_manifest(f"library/{repo}", bt.sha256_digest(manifest), manifest)
            self.cdn.add_blob(f"library/{repo}", blob)
            got = self.get_manifest(f"library/{repo}", bt.sha256_digest(manifest))
            self.assert_manifest_refused(got, f"redirect {k}")
            got = self.get_blob(f"library/{repo}", bt.sha256_digest(blob))
            self.assert_blob_refused(got, f"redirect {k}, blob")
            return repo
        repos = self.pull_variants("redir", variant, count, pull, count)
        loops = self.up.received(contains="/library/redir0-")
        self.assertLessEqual(len(loops), 2 * 6 * (len(repos) // count + 1), "a redirect loop was followed too far")
        self.assert_nothing_cached(manifests=[(f"library/{r}", bt.sha256_digest(good[r][0])) for r in repos],
                                   blobs=[(f"library/{r}", bt.sha256_digest(good[r][1])) for r in repos])
        # one hop to the cdn is followed: what was refused above was refused for its redirects
        self.up.on(r"^/v2/library/control/", hu.dispatch(lambda req: hu.redirect(f"{cdn}{req.path}")))
        self.cdn.clear()
        manifest, blob = image_manifest(new_marker("honest")), os.urandom(3000)
        self.cdn.add_manifest("library/control", "v1", manifest)
        self.cdn.add_blob("library/control", blob)
        self.poll_served(lambda: self.get_manifest("library/control", "v1"), manifest, "manifest behind a redirect")
        self.poll_served(lambda: self.get_blob("library/control", bt.sha256_digest(blob)), blob, "blob behind a redirect")

    @configure(upstream=lambda t: {"username": "mirror", "password_file": t.password_file()})
    def test_redirect_never_carries_authorization(self):
        img = bt.make_image((3000, 4000))
        self.cdn.add_image("library/app", "v1", img)
        # the registry wants Basic credentials, then sends every blob to the cdn
        self.up.on(r"/blobs/", hu.basic_protected(hu.dispatch(
            lambda req: hu.redirect(f"{self.cdn.url}{req.path}", status=307))))
        self.up.on(r"/manifests/", hu.basic_protected(hu.dispatch(lambda req: self.cdn.honest)))

        def pull(i):
            got = self.get_manifest("library/app", "v1", timeout=10)
            self.assertEqual((got.status, got.body), (200, img["manifest"]), got)
            for digest, data in img["blobs"].items():
                got = self.get_blob("library/app", digest)
                self.assertEqual((got.status, got.complete, got.body), (200, True, data), f"blob {digest}: {got}")
            return got
        with self.while_hostile():
            self.hammer(pull, 4)
        creds = "Basic " + base64.b64encode(b"mirror:mirror-pw").decode()
        self.assertTrue(any(r.header("Authorization") == creds for r in self.up.received(contains="/blobs/")),
                        "the registry itself never got the credentials")
        at_cdn = self.cdn.received(contains="/blobs/")
        self.assertTrue(at_cdn, "no blob was redirected to the cdn")
        self.assertEqual([r for r in at_cdn if r.header("Authorization")], [], "Authorization went to another host")


class TokenTest(HostileCase):
    """The upstream asks for a Bearer token from a realm on another host (the token server)."""

    TOKEN = "good-token"
    CREDS = "Basic " + base64.b64encode(b"mirror:mirror-pw").decode()

    def before_berth(self):
        host = self.overrides.get("token_host", "127.0.0.1")
        try:
            self.tok = self.server(host=host, name="token")
        except OSError as e:
            self.skipTest(f"cannot listen on {host}: {e}")
        self.realm = f"{self.tok.url}/token"

    def protect(self, tokens):
        """The registry behind Bearer tokens (service evil-service); the token server answers
        tokens(scope_repo) -> behaviour."""
        self.up.on(r"^/v2/.+", hu.bearer_protected(self.realm, "evil-service", self.TOKEN, self.up.honest))

        def choose(req):
            m = re.match(r"repository:(.+):pull", req.q("scope", "") or "")
            return tokens(m.group(1) if m else "")
        self.tok.on(r"^/token$", hu.dispatch(choose))

    def creds_sent(self, server):
        return [r for r in server.received() if r.header("Authorization") == self.CREDS]

    @configure(upstream=lambda t: {"username": "mirror", "password_file": t.password_file(),
                                   "token_realms": [f"{t.up.url}/token"]})
    def test_token_realm_not_allowed(self):
        img = bt.make_image((2000,))
        self.protect(lambda repo: hu.json_answer({"token": self.TOKEN}))

        def pull(i):
            repo = f"library/locked-{i}"
            self.up.add_image(repo, "v1", img)
            self.assert_manifest_refused(self.get_manifest(repo, "v1"), "realm outside token_realms")
            self.assert_blob_refused(self.get_blob(repo, bt.sha256_digest(img["layers"][0])), "realm, blob")
            return repo
        with self.while_hostile():
            repos = self.hammer(pull, 8)
        self.assertTrue(self.up.received(contains="/library/locked-"), "the registry was never asked")
        self.assertEqual(self.tok.received(), [], "a token was asked of a realm outside token_realms")
        self.assertEqual(self.creds_sent(self.up) + self.creds_sent(self.tok), [], "the credentials went out")
        # the same registry without tokens: served (what was refused was refused for the realm)
        self.up.clear()
        self.assert_served_when_honest(manifests=[(repos[0], "v1", img["manifest"])])

    @configure(upstream=lambda t: {"username": "mirror", "password_file": t.password_file(),
                                   "token_realms": ["http://127.0.0.1:1/", f"{t.tok.url}/token"]})
    def test_token_realm_allowed(self):
        img = bt.make_image((2000,))
        self.up.add_image("library/open", "v1", img)
        self.protect(lambda repo: hu.json_answer({"token": self.TOKEN, "expires_in": 300}))
        def pull(i):
            got = self.get_manifest("library/open", "v1")
            self.assertEqual((got.status, got.body), (200, img["manifest"]), got)
            for digest, data in img["blobs"].items():
                got = self.get_blob("library/open", digest)
                self.assertEqual((got.status, got.body), (200, data), got)
        with self.while_hostile():
            self.hammer(pull, 4)
        asked = self.tok.received(path="/token")
        self.assertTrue(asked, "the token server was never asked")
        self.assertTrue(all(r.header("Authorization") == self.CREDS for r in asked), asked)
        self.assertTrue(all(r.q("service") == "evil-service" and r.q("scope") == "repository:library/open:pull"
                            for r in asked), [r.target for r in asked])

    @configure(token_host="127.0.0.10", upstream=lambda t: {"username": "mirror", "password_file": t.password_file(),
                                                            "token_realms": ["http://127.0.0.1"]})
    def test_token_realm_prefix_is_no_host_prefix(self):
        """token_realms ["http://127.0.0.1"]: a realm on 127.0.0.10 merely starts with that text."""
        img = bt.make_image((2000,))
        self.up.add_image("library/prefix", "v1", img)
        self.protect(lambda repo: hu.json_answer({"token": self.TOKEN}))
        with self.while_hostile():
            self.hammer(lambda i: self.assert_answered(self.get_manifest("library/prefix", "v1"), "realm elsewhere"), 4)
        self.assertEqual(self.creds_sent(self.tok), [],
                         f"token_realms [\"http://127.0.0.1\"] let the credentials go to {self.realm}")

    @configure(upstream=lambda t: {"username": "mirror", "password_file": t.password_file()})
    def test_hostile_token_answers(self):
        answers = {
            # repository: (token server behaviour, whether the pull works)
            "garbage": (hu.respond(200, b"this is not json", [("Content-Type", "application/json")]), False),
            "huge": (hu.json_answer({"token": "a" * (1 << 20)}), False),
            "endless": (hu.firehose(hu.head_bytes(200, [("Connection", "close")]) + b'{"token":"', b"a"), False),
            "nested": (hu.json_answer(b"[" * 60_000), False),
            "nested-4mb": (hu.json_answer(NESTED), False),
            "long-token": (hu.json_answer({"token": "t" * 20_000}), False),
            "crlf-token": (hu.json_answer({"token": self.TOKEN + "\r\nX-Injected: yes"}), False),
            "empty-token": (hu.json_answer({"token": ""}), False),
            "number-token": (hu.json_answer({"token": 12345}), False),
            "silent": (hu.silent(), False),
            "trickle": (hu.trickle_body(200, [("Content-Length", 40)], b'{"token":"good-token"}' + b" " * 18, 0.3),
                        False),
            "status-500": (hu.respond(500, b"{}"), False),
            "expires-negative": (hu.json_answer({"token": self.TOKEN, "expires_in": -1}), True),
            "expires-huge": (hu.json_answer(b'{"token":"good-token","expires_in":1' + b"0" * 40 + b"}"), True),
            "expires-int64": (hu.json_answer({"token": self.TOKEN, "expires_in": 2 ** 63}), True),
            "expires-string": (hu.json_answer({"token": self.TOKEN, "expires_in": "forever"}), True),
            "access-token": (hu.json_answer({"access_token": self.TOKEN, "expires_in": 0}), True),
        }
        names = sorted(answers)
        img = bt.make_image((1500,))
        self.protect(lambda repo: answers[repo.split("/")[1].rsplit("-", 1)[0]][0])

        def pull(i):
            name = names[i % len(names)]
            repo = f"library/{name}-{i}"
            self.up.add_image(repo, "v1", img)
            got = self.get_manifest(repo, "v1")
            if answers[name][1]:
                self.assert_answered(got, name)
                self.assertEqual((got.status, got.body), (200, img["manifest"]), f"{name}: {got}")
            else:
                self.assert_manifest_refused(got, f"token answer {name}")
            return repo
        with self.while_hostile():
            self.hammer(pull, len(names), workers=9)
            self.wait_upstream_released()
            self.tok.on(r".*", hu.respond(404))
            bt.poll(lambda: not self.tok.busy(), RELEASE_WITHIN, 0.05, "berth to let go of the token server")
        injected = [r for r in self.up.received() if r.header("X-Injected") or "X-Injected" in (r.header("Authorization")
                                                                                              or "")]
        self.assertEqual(injected, [], "a token's CRLF reached the registry")
        self.assertTrue(self.tok.received(path="/token"), "the token server was never asked")


if __name__ == "__main__":
    unittest.main()
