#!/usr/bin/env python3
"""Authentication and authorization: htpasswd Basic, the built-in token endpoint, bearer tokens
(and forged ones), per-repository rules, mounts, deletes, the catalog.

For each rule kind an allowed request passes and a forbidden one is refused with 401 or 403,
and a refused request changes nothing: the tags (and what they point at) of every repository,
the blob files on disk and the number of open upload sessions are compared before and after."""

import base64
import hashlib
import json
import os
import sys
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402

PASSWORDS = {"root": "root-pw", "alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw", "dave": "dave-pw"}

RULES = [
    {"repository": "**", "principals": ["user:root"], "actions": ["pull", "push", "delete"]},
    {"repository": "${user}/**", "principals": ["authenticated"], "actions": ["pull", "push", "delete"]},
    {"repository": "public/**", "principals": ["anonymous", "authenticated"], "actions": ["pull"]},
    {"repository": "team/**", "principals": ["group:ci"], "actions": ["pull", "push"]},
    {"repository": "team/**", "principals": ["user:carol"], "actions": ["pull"]},
    {"repository": "proj/*", "principals": ["authenticated"], "actions": ["pull"]},
    {"repository": "secret/**", "principals": ["user:dave"], "actions": ["pull", "push"]},
]

# Repositories set up by root, each with tag v1 and an untagged second image ("alt") whose
# blobs are present there too, so a forbidden PUT of v1 -> alt would succeed if it got through.
REPOS = ["public/base", "team/app", "secret/x", "alice/app", "bob/tools", "proj/a", "proj/a/b"]
# Where refused requests try to create things; they must stay absent.
ABSENT = ["alice2/x", "bob/new", "secret/new", "public/new", "team/new", "proj/a/b/c"]


def auth(user):
    return bt.basic_auth(user, PASSWORDS[user])


class AuthTest(bt.ServerTest):
    passwords = PASSWORDS

    @classmethod
    def configure(cls, b):
        d = b.tmp
        bt.gen_ec_key(os.path.join(d, "token.key"))  # the built-in endpoint signs with this
        bt.public_key(os.path.join(d, "token.key"), os.path.join(d, "token.pub"))
        bt.gen_rsa_key(os.path.join(d, "issuer.key"))  # an external issuer
        bt.public_key(os.path.join(d, "issuer.key"), os.path.join(d, "issuer.pub"))
        bt.gen_rsa_key(os.path.join(d, "attacker.key"))  # trusted by nobody
        bt.public_key(os.path.join(d, "attacker.key"), os.path.join(d, "attacker.pub"))
        return {"auth": {
            "htpasswd": "htpasswd",  # relative to the config file's directory
            "token": {"signing_key": "token.key", "verify_keys": ["issuer.pub"], "issuer": "berth",
                      "service": "berth", "ttl_seconds": 300},
            "groups": {"ci": ["bob"]},
            "rules": RULES,
        }}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.images = {}
        for repo in REPOS:
            img = cls.push_image(repo, "v1", auth("root"))
            alt = cls.push_image(repo, None, auth("root"))
            cls.images[repo] = (img, alt)

    # ---- helpers

    @classmethod
    def push_image(cls, repo, tag, headers, layer_sizes=(700,)):
        img = bt.make_image(layer_sizes)
        for digest, data in img["blobs"].items():
            r = cls.b.request("POST", f"/v2/{repo}/blobs/uploads/?digest={digest}", body=data,
                              headers={**headers, "Content-Type": "application/octet-stream"})
            if r.status != 201:
                raise AssertionError(f"POST blob to {repo}: {r}")
        r = cls.b.request("PUT", f"/v2/{repo}/manifests/{tag or img['digest']}", body=img["manifest"],
                          headers={**headers, "Content-Type": bt.OCI_MANIFEST})
        if r.status != 201:
            raise AssertionError(f"PUT manifest in {repo}: {r}")
        return img

    def req(self, method, path, headers=None, body=None):
        h = dict(headers or {})
        if body is not None and method in ("PUT", "POST", "PATCH"):
            h.setdefault("Content-Type", "application/octet-stream")
        elif method in ("PUT", "POST", "PATCH"):
            h.setdefault("Content-Length", "0")
        return self.b.request(method, path, body=body, headers=h)

    def snapshot(self):
        """Tags (-> digests) of every watched repository, blob files, open uploads."""
        state = {}
        for repo in REPOS + ABSENT:
            r = self.req("GET", f"/v2/{repo}/tags/list", auth("root"))
            if r.status == 404:
                state[repo] = None
                continue
            self.assertEqual(r.status, 200, (repo, r))
            tags = {}
            for tag in r.json()["tags"] or []:
                m = self.req("HEAD", f"/v2/{repo}/manifests/{tag}", {**auth("root"), "Accept": bt.OCI_MANIFEST})
                tags[tag] = m.header("Docker-Content-Digest")
            state[repo] = tags
        state["blob files"] = sorted(bt.blob_files(self.b.root))
        state["uploads"] = self.b.metrics().get("berth_uploads_in_progress")
        return state

    def assertRefused(self, r, statuses=(401, 403), what=""):
        self.assertIn(r.status, statuses, f"{what}: {r}")
        codes = r.error_codes()
        self.assertIsNotNone(codes, f"{what}: no spec error body: {r}")
        if r.status == 401:
            self.assertEqual(codes, ["UNAUTHORIZED"], what)
            self.assertTrue(r.header("WWW-Authenticate"), f"{what}: 401 without WWW-Authenticate")
        elif r.status == 403:
            self.assertEqual(codes, ["DENIED"], what)

    def forbidden_writes(self, headers, repo, statuses=(401, 403), what=""):
        """Every kind of write to repo must be refused: upload start, monolithic POST, PATCH to a
        guessed session, manifest PUT (retag v1 -> alt), DELETE of manifest (tag and digest) and blob."""
        img, alt = self.images.get(repo, (None, None))
        data = b"forbidden bytes " + os.urandom(16)
        digest = bt.sha256_digest(data)
        attempts = [
            ("POST", f"/v2/{repo}/blobs/uploads/", None),
            ("POST", f"/v2/{repo}/blobs/uploads/?digest={digest}", data),
            ("PATCH", f"/v2/{repo}/blobs/uploads/berth_00000000000000000000000000000000", data),
            ("PUT", f"/v2/{repo}/blobs/uploads/berth_00000000000000000000000000000000?digest={digest}", data),
        ]
        if img:
            attempts += [
                ("DELETE", f"/v2/{repo}/manifests/v1", None),
                ("DELETE", f"/v2/{repo}/manifests/{img['digest']}", None),
                ("DELETE", f"/v2/{repo}/blobs/{next(iter(img['blobs']))}", None),
            ]
        for method, path, body in attempts:
            r = self.req(method, path, headers, body)
            self.assertRefused(r, statuses, f"{what} {method} {path}")
        manifest = alt["manifest"] if alt else bt.make_image()["manifest"]
        r = self.b.request("PUT", f"/v2/{repo}/manifests/v1", body=manifest,
                           headers={**headers, "Content-Type": bt.OCI_MANIFEST})
        self.assertRefused(r, statuses, f"{what} PUT manifest {repo}:v1")
        self.assertNotIn(digest.split(":", 1)[1], bt.blob_files(self.b.root), f"{what}: refused blob was stored")

    def forbidden_reads(self, headers, repo, statuses=(401, 403), what=""):
        img, _ = self.images[repo]
        for method, path in [("GET", f"/v2/{repo}/manifests/v1"), ("HEAD", f"/v2/{repo}/manifests/v1"),
                             ("GET", f"/v2/{repo}/blobs/{img['digest']}"),
                             ("GET", f"/v2/{repo}/blobs/{next(iter(img['blobs']))}"),
                             ("GET", f"/v2/{repo}/tags/list"), ("GET", f"/v2/{repo}/referrers/{img['digest']}")]:
            r = self.req(method, path, headers)
            if method == "HEAD":
                self.assertIn(r.status, statuses, f"{what} HEAD {path}: {r}")
            else:
                self.assertRefused(r, statuses, f"{what} {method} {path}")
                self.assertNotIn(img["manifest"], r.body)

    def token(self, scopes, headers=None, service="berth"):
        query = [("service", service)] + [("scope", s) for s in scopes]
        r = self.req("GET", "/auth/token?" + urllib.parse.urlencode(query), headers)
        self.assertEqual(r.status, 200, r)
        doc = r.json()
        self.assertEqual(doc["token"], doc["access_token"])
        self.assertGreater(doc["expires_in"], 0)
        return doc["token"]

    def access_of(self, token):
        return {(a["type"], a["name"]): sorted(a["actions"]) for a in bt.jwt_claims(token)["access"]}

    def claims(self, **overrides):
        now = int(time.time())
        claims = {"iss": "berth", "sub": "alice", "aud": "berth", "iat": now, "nbf": now - 1, "exp": now + 300,
                  "jti": os.urandom(8).hex(),
                  "access": [{"type": "repository", "name": "alice/app", "actions": ["pull", "push", "delete"]}]}
        claims.update(overrides)
        return {k: v for k, v in claims.items() if v is not None}

    def key(self, name):
        return os.path.join(self.b.tmp, name)

    # ---- Basic (htpasswd)

    def test_basic_right_password(self):
        r = self.req("GET", "/v2/", auth("alice"))
        self.assertEqual(r.status, 200, r)
        r = self.req("GET", "/v2/alice/app/manifests/v1", {**auth("alice"), "Accept": bt.OCI_MANIFEST})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body, self.images["alice/app"][0]["manifest"])
        img = self.push_image("alice/basic-push", "v1", auth("alice"))
        r = self.req("GET", "/v2/alice/basic-push/manifests/v1", auth("alice"))
        self.assertEqual(r.body, img["manifest"])

    def test_basic_wrong_password_unknown_user_malformed(self):
        before = self.snapshot()
        bad = {
            "wrong password": bt.basic_auth("alice", "bob-pw"),
            "empty password": bt.basic_auth("alice", ""),
            "unknown user": bt.basic_auth("mallory", "alice-pw"),
            "user case": bt.basic_auth("Alice", "alice-pw"),
            "password prefix": bt.basic_auth("alice", "alice-p"),
            "password suffix": bt.basic_auth("alice", "alice-pwx"),
            "not base64": {"Authorization": "Basic !!!not-base64!!!"},
            "no colon": {"Authorization": "Basic " + bt.b64url("alicealice-pw")},
            "empty basic": {"Authorization": "Basic "},
            "unknown scheme": {"Authorization": "Digest username=alice"},
            "scheme only": {"Authorization": "Bearer"},
            "bearer garbage": {"Authorization": "Bearer not.a.jwt"},
            "bearer empty parts": {"Authorization": "Bearer .."},
        }
        for what, headers in bad.items():
            with self.subTest(what):
                r = self.req("GET", "/v2/", headers)
                self.assertRefused(r, (401,), what)
                self.assertIn("Bearer realm=", r.header("WWW-Authenticate"))
                # wrong credentials do not fall back to anonymous, even where anonymous may pull
                r = self.req("GET", "/v2/public/base/manifests/v1", headers)
                self.assertRefused(r, (401,), what)
                self.forbidden_reads(headers, "alice/app", (401,), what)
                self.forbidden_writes(headers, "alice/app", (401,), what)
        self.assertEqual(before, self.snapshot())

    def test_challenge(self):
        r = self.req("GET", "/v2/")
        self.assertRefused(r, (401,), "anonymous GET /v2/")
        challenge = r.header("WWW-Authenticate")
        port = self.b.port
        self.assertTrue(challenge.startswith(f'Bearer realm="http://127.0.0.1:{port}/auth/token"'), challenge)
        self.assertIn('service="berth"', challenge)
        r = self.req("PUT", "/v2/public/base/manifests/v1", body=b"{}")
        self.assertIn('scope="repository:public/base:push,pull"', r.header("WWW-Authenticate"))

    def test_anonymous_rules(self):
        r = self.req("GET", "/v2/public/base/manifests/v1", {"Accept": bt.OCI_MANIFEST})
        self.assertEqual(r.status, 200, r)
        img = self.images["public/base"][0]
        for digest, data in img["blobs"].items():
            self.assertEqual(self.req("GET", f"/v2/public/base/blobs/{digest}").body, data)
        before = self.snapshot()
        self.forbidden_writes({}, "public/base", (401,), "anonymous")
        self.forbidden_writes({}, "public/new", (401,), "anonymous")
        for repo in ("alice/app", "team/app", "secret/x", "proj/a"):
            self.forbidden_reads({}, repo, (401,), "anonymous")
        self.assertEqual(before, self.snapshot())

    def test_user_namespace_rule(self):
        # ${user}/** : alice everything in alice/..., nothing in bob/... or alice2/...
        self.push_image("alice/deep/nested/repo", "v1", auth("alice"))
        r = self.req("DELETE", "/v2/alice/deep/nested/repo/manifests/v1", auth("alice"))
        self.assertEqual(r.status, 202, r)
        before = self.snapshot()
        self.forbidden_writes(auth("alice"), "bob/tools", (403,), "alice in bob/")
        self.forbidden_writes(auth("alice"), "bob/new", (403,), "alice in bob/")
        self.forbidden_writes(auth("alice"), "alice2/x", (403,), "alice in alice2/")
        self.forbidden_reads(auth("alice"), "bob/tools", (403,), "alice reads bob/")
        self.forbidden_writes(auth("bob"), "alice/app", (403,), "bob in alice/")
        self.assertEqual(before, self.snapshot())

    def test_user_and_group_rules(self):
        # group:ci (bob) pushes to team/**; user:carol only pulls there; dave alone has secret/**.
        self.push_image("team/app", "from-bob", auth("bob"))
        r = self.req("GET", "/v2/team/app/manifests/v1", auth("carol"))
        self.assertEqual(r.status, 200, r)
        self.push_image("secret/x", "from-dave", auth("dave"))
        before = self.snapshot()
        self.forbidden_writes(auth("carol"), "team/app", (403,), "carol in team/")
        self.forbidden_writes(auth("carol"), "team/new", (403,), "carol in team/")
        self.forbidden_writes(auth("alice"), "team/app", (403,), "alice in team/")
        self.forbidden_reads(auth("alice"), "team/app", (403,), "alice reads team/")
        for user in ("alice", "bob", "carol"):
            self.forbidden_reads(auth(user), "secret/x", (403,), f"{user} reads secret/")
            self.forbidden_writes(auth(user), "secret/x", (403,), f"{user} in secret/")
        self.forbidden_writes(auth("bob"), "public/base", (403,), "bob in public/")
        self.assertEqual(before, self.snapshot())

    def test_single_component_glob(self):
        # proj/* matches proj/a, not proj/a/b
        self.assertEqual(self.req("GET", "/v2/proj/a/manifests/v1", auth("carol")).status, 200)
        before = self.snapshot()
        self.forbidden_reads(auth("carol"), "proj/a/b", (403,), "carol reads proj/a/b")
        self.forbidden_writes(auth("carol"), "proj/a", (403,), "carol in proj/a")
        self.assertEqual(before, self.snapshot())

    # ---- the token endpoint

    def test_token_anonymous(self):
        tok = self.token(["repository:public/base:pull,push", "repository:alice/app:pull",
                          "registry:catalog:*"])
        claims = bt.jwt_claims(tok)
        self.assertEqual(claims["sub"], "")
        self.assertEqual((claims["iss"], claims["aud"]), ("berth", "berth"))
        self.assertLessEqual(claims["exp"] - time.time(), 301)
        self.assertEqual(self.access_of(tok), {("repository", "public/base"): ["pull"]})
        r = self.req("GET", "/v2/public/base/manifests/v1", bt.bearer(tok))
        self.assertEqual(r.status, 200, r)
        before = self.snapshot()
        self.forbidden_writes(bt.bearer(tok), "public/base", (401,), "anonymous token")
        self.forbidden_reads(bt.bearer(tok), "alice/app", (401,), "anonymous token")
        r = self.req("GET", "/v2/_catalog", bt.bearer(tok))
        self.assertRefused(r, (401,), "anonymous token catalog")
        self.assertEqual(before, self.snapshot())

    def test_token_user_namespace(self):
        tok = self.token(["repository:alice/app:pull,push,delete", "repository:alice/tok:*",
                          "repository:bob/tools:pull,push", "repository:secret/x:pull"], auth("alice"))
        self.assertEqual(bt.jwt_claims(tok)["sub"], "alice")
        self.assertEqual(self.access_of(tok), {("repository", "alice/app"): ["delete", "pull", "push"],
                                               ("repository", "alice/tok"): ["delete", "pull", "push"]})
        img = self.push_image("alice/tok", "v1", bt.bearer(tok))
        r = self.req("GET", "/v2/alice/tok/manifests/v1", bt.bearer(tok))
        self.assertEqual(r.body, img["manifest"])
        r = self.req("DELETE", f"/v2/alice/tok/manifests/{img['digest']}", bt.bearer(tok))
        self.assertEqual(r.status, 202, r)
        before = self.snapshot()
        self.forbidden_writes(bt.bearer(tok), "bob/tools", (401,), "alice token in bob/")
        self.forbidden_reads(bt.bearer(tok), "secret/x", (401,), "alice token reads secret/")
        self.assertEqual(before, self.snapshot())

    def test_token_groups(self):
        tok = self.token(["repository:team/app:pull,push,delete"], auth("bob"))
        self.assertEqual(self.access_of(tok), {("repository", "team/app"): ["pull", "push"]})
        self.push_image("team/app", "bob-token", bt.bearer(tok))
        carol = self.token(["repository:team/app:pull,push"], auth("carol"))
        self.assertEqual(self.access_of(carol), {("repository", "team/app"): ["pull"]})
        self.assertEqual(self.req("GET", "/v2/team/app/manifests/v1", bt.bearer(carol)).status, 200)
        before = self.snapshot()
        self.forbidden_writes(bt.bearer(carol), "team/app", (401,), "carol token in team/")
        self.assertEqual(before, self.snapshot())

    def test_token_endpoint_refusals(self):
        for headers in (bt.basic_auth("alice", "wrong"), bt.basic_auth("nobody", "x"),
                        {"Authorization": "Bearer x.y.z"}, {"Authorization": "Basic %%%"}):
            r = self.req("GET", "/auth/token?service=berth&scope=repository:alice/app:pull", headers)
            self.assertEqual(r.status, 401, (headers, r))
            self.assertNotIn(b"token\"", r.body)
        r = self.req("GET", "/auth/token?service=other&scope=repository:alice/app:pull", auth("alice"))
        self.assertEqual(r.status, 400, r)
        # nonsense scopes grant nothing
        tok = self.token(["repository:alice/app", "repository:ALICE/app:pull", "repository::pull",
                          "repository:alice/app:admin", "registry:catalog:pull", "bogus"], auth("alice"))
        self.assertEqual(self.access_of(tok), {})

    def test_catalog_filtered(self):
        expected = {
            "root": set(REPOS),
            "alice": {"alice/app", "public/base", "proj/a"},
            "carol": {"team/app", "public/base", "proj/a"},
            "bob": {"bob/tools", "team/app", "public/base", "proj/a"},
            "dave": {"secret/x", "public/base", "proj/a"},
        }
        for user, want in expected.items():
            with self.subTest(user):
                r = self.req("GET", "/v2/_catalog?n=1000", auth(user))
                self.assertEqual(r.status, 200, r)
                got = set(r.json()["repositories"])
                self.assertEqual(want, got & (set(REPOS) | set(ABSENT)))  # other tests add their own repos
                if user != "root":
                    self.assertFalse({x for x in got if not x.startswith(user + "/")} - want)
                tok = self.token(["registry:catalog:*"], auth(user))
                self.assertEqual(self.access_of(tok), {("registry", "catalog"): ["*"]})
                r = self.req("GET", "/v2/_catalog?n=1000", bt.bearer(tok))
                self.assertEqual(r.status, 200, r)
                self.assertEqual(got, set(r.json()["repositories"]))
        r = self.req("GET", "/v2/_catalog")
        self.assertRefused(r, (401,), "anonymous catalog")
        self.assertIn('scope="registry:catalog:*"', r.header("WWW-Authenticate"))
        # a token without the catalog scope
        tok = self.token(["repository:alice/app:pull"], auth("alice"))
        r = self.req("GET", "/v2/_catalog", bt.bearer(tok))
        self.assertRefused(r, (401,), "catalog without scope")
        self.assertIn('error="insufficient_scope"', r.header("WWW-Authenticate"))

    # A page filtered down to nothing must still link to the next one.
    def test_catalog_pagination_filtered(self):
        for user in ("alice", "carol", "dave"):
            full = self.req("GET", "/v2/_catalog?n=1000", auth(user)).json()["repositories"]
            self.assertTrue(full)
            for n in (1, 2):
                got, path = [], f"/v2/_catalog?n={n}"
                for _ in range(200):
                    r = self.req("GET", path, auth(user))
                    self.assertEqual(r.status, 200, r)
                    got += r.json()["repositories"]
                    link = r.header("Link")
                    if not link:
                        break
                    path = bt.location_path(link[link.index("<") + 1:link.index(">")])
                self.assertEqual(sorted(set(got)), sorted(full), f"{user} paging with n={n}")

    # ---- bearer tokens made here

    def test_bearer_valid_external_and_builtin_key(self):
        # RS256 by the external issuer (verify_keys), ES256 with the built-in signing key: both accepted
        for key, alg in (("issuer.key", "RS256"), ("token.key", "ES256")):
            with self.subTest(alg):
                tok = bt.make_jwt(self.claims(), self.key(key), alg)
                r = self.req("GET", "/v2/alice/app/manifests/v1", bt.bearer(tok))
                self.assertEqual(r.status, 200, r)
                tok = bt.make_jwt(self.claims(aud=["other", "berth"]), self.key(key), alg)
                self.assertEqual(self.req("GET", "/v2/alice/app/manifests/v1", bt.bearer(tok)).status, 200)
        # a token near (under) the size limit still works, so the oversize refusal below is about size
        tok = bt.make_jwt(self.claims(pad="p" * 5600), self.key("issuer.key"))
        self.assertTrue(7000 < len(tok) < 8192, len(tok))
        self.assertEqual(self.req("GET", "/v2/alice/app/manifests/v1", bt.bearer(tok)).status, 200)

    def test_bearer_forged_and_invalid(self):
        now = int(time.time())
        issuer, attacker = self.key("issuer.key"), self.key("attacker.key")
        modulus = bt.openssl("rsa", "-in", attacker, "-noout", "-modulus").decode().strip().split("=", 1)[1]
        jwk = {"kty": "RSA", "n": bt.b64url(bytes.fromhex(modulus)), "e": "AQAB"}
        spki = bt.openssl("pkey", "-in", self.key("token.key"), "-pubout", "-outform", "DER")
        real_kid = bt.b64url(hashlib.sha256(spki).digest()[:12])
        attacker_cert = os.path.join(self.b.tmp, "attacker.crt")
        bt.openssl("req", "-x509", "-new", "-key", attacker, "-subj", "/CN=berth", "-days", "1", "-out", attacker_cert)
        x5c = base64.b64encode(bt.openssl("x509", "-in", attacker_cert, "-outform", "DER")).decode()
        valid = bt.make_jwt(self.claims(), issuer)
        h, p, s = valid.split(".")
        evil_claims = self.claims(sub="root", access=[{"type": "repository", "name": n, "actions": ["pull", "push"]}
                                                      for n in ("alice/app", "secret/x", "bob/tools")])
        forged = {
            "expired": bt.make_jwt(self.claims(iat=now - 1000, nbf=now - 1000, exp=now - 120), issuer),
            "no exp": bt.make_jwt(self.claims(exp=None), issuer),
            "not yet valid": bt.make_jwt(self.claims(nbf=now + 120), issuer),
            "wrong issuer": bt.make_jwt(self.claims(iss="evil"), issuer),
            "no issuer": bt.make_jwt(self.claims(iss=None), issuer),
            "wrong audience": bt.make_jwt(self.claims(aud="other"), issuer),
            "audience list without berth": bt.make_jwt(self.claims(aud=["other"]), issuer),
            "no audience": bt.make_jwt(self.claims(aud=None), issuer),
            "alg none": bt.make_jwt(self.claims(), alg="none"),
            "alg None with signature": bt.make_jwt(self.claims(), alg="None", signature=bt.b64url_decode(s)),
            "HS256 keyed with issuer.pub": bt.make_jwt(self.claims(), open(self.key("issuer.pub"), "rb").read(),
                                                       "HS256"),
            "HS256 keyed with token.pub": bt.make_jwt(self.claims(), open(self.key("token.pub"), "rb").read(),
                                                      "HS256"),
            "HS256 keyed with DER public key": bt.make_jwt(self.claims(), spki, "HS256"),
            "RS256 by an untrusted key": bt.make_jwt(self.claims(), attacker),
            "untrusted key in jwk header (CVE-2025-24976)": bt.make_jwt(
                self.claims(), attacker, header={"jwk": jwk, "kid": real_kid}),
            "untrusted cert in x5c header": bt.make_jwt(self.claims(), attacker, header={"x5c": [x5c]}),
            "untrusted jku": bt.make_jwt(self.claims(), attacker,
                                         header={"jku": f"http://127.0.0.1:{self.b.port}/jwks.json"}),
            "ES256 alg on an RS256 signature": bt.make_jwt(self.claims(), signature=bt.b64url_decode(s),
                                                           alg="ES256"),
            "oversize (> 8 KiB), validly signed": bt.make_jwt(self.claims(pad="p" * 6500), issuer),
            "tampered payload": h + "." + bt.b64url(json.dumps(evil_claims)) + "." + s,
            "tampered signature": h + "." + p + "." + bt.b64url(bytes([bt.b64url_decode(s)[0] ^ 1]) +
                                                                 bt.b64url_decode(s)[1:]),
            "signature stripped": h + "." + p + ".",
            "two parts": h + "." + p,
            "extra part": valid + ".AAAA",
            "claims not an object": bt.make_jwt(["alice"], issuer),
        }
        self.assertEqual(self.req("GET", "/v2/alice/app/manifests/v1", bt.bearer(valid)).status, 200)
        before = self.snapshot()
        for what, tok in forged.items():
            with self.subTest(what):
                self.forbidden_reads(bt.bearer(tok), "alice/app", (401,), what)
                self.forbidden_writes(bt.bearer(tok), "alice/app", (401,), what)
                r = self.req("GET", "/v2/", bt.bearer(tok))
                self.assertRefused(r, (401,), what)
                self.assertNotIn("insufficient_scope", r.header("WWW-Authenticate"))
        self.assertEqual(before, self.snapshot())

    def test_insufficient_scope(self):
        tok = self.token(["repository:alice/app:pull"], auth("alice"))
        r = self.req("GET", "/v2/alice/app/manifests/v1", bt.bearer(tok))
        self.assertEqual(r.status, 200, r)
        before = self.snapshot()
        r = self.b.request("PUT", "/v2/alice/app/manifests/v1", body=self.images["alice/app"][1]["manifest"],
                           headers={**bt.bearer(tok), "Content-Type": bt.OCI_MANIFEST})
        self.assertRefused(r, (401,), "push with a pull token")
        challenge = r.header("WWW-Authenticate")
        self.assertIn('error="insufficient_scope"', challenge)
        self.assertIn('scope="repository:alice/app:push,pull"', challenge)
        self.forbidden_writes(bt.bearer(tok), "alice/app", (401,), "pull token")
        # a token for one repository says nothing about another, even one the user owns
        r = self.req("GET", "/v2/alice/other/tags/list", bt.bearer(tok))
        self.assertRefused(r, (401,), "token for another repository")
        self.assertIn('error="insufficient_scope"', r.header("WWW-Authenticate"))
        self.assertEqual(before, self.snapshot())

    # ---- mounts and deletes

    def test_mount_needs_pull_on_source(self):
        secret_img = self.images["secret/x"][0]
        layer = bt.sha256_digest(secret_img["layers"][0])
        path = f"/v2/alice/app/blobs/uploads/?mount={layer}&from=secret/x"
        before = self.snapshot()
        r = self.req("POST", path, auth("alice"))
        self.assertRefused(r, (403,), "mount from secret/x by alice")
        tok = self.token(["repository:alice/app:pull,push", "repository:secret/x:pull"], auth("alice"))
        self.assertNotIn(("repository", "secret/x"), self.access_of(tok))
        r = self.req("POST", path, bt.bearer(tok))
        self.assertRefused(r, (401,), "mount with a token lacking pull on secret/x")
        self.assertIn('error="insufficient_scope"', r.header("WWW-Authenticate"))
        self.assertIn("repository:secret/x:pull", r.header("WWW-Authenticate"))
        # a token the external issuer made with push on the target only
        ext = bt.make_jwt(self.claims(), self.key("issuer.key"))
        self.assertRefused(self.req("POST", path, bt.bearer(ext)), (401,), "mount, external token")
        self.assertEqual(before, self.snapshot())
        for headers in (auth("alice"), bt.bearer(tok), auth("root")):
            r = self.req("HEAD", f"/v2/alice/app/blobs/{layer}", headers)
            self.assertEqual(r.status, 404, f"blob of secret/x mounted into alice/app: {r}")
        # without from, knowing the digest mounts nothing: an upload session starts instead
        r = self.req("POST", f"/v2/alice/app/blobs/uploads/?mount={layer}", auth("alice"))
        self.assertEqual(r.status, 202, r)
        self.req("DELETE", bt.location_path(r.header("Location")), auth("alice"))
        self.assertEqual(self.req("HEAD", f"/v2/alice/app/blobs/{layer}", auth("alice")).status, 404)
        # with pull on the source the mount works
        public_layer = next(iter(self.images["public/base"][0]["blobs"]))
        r = self.req("POST", f"/v2/alice/mounted/blobs/uploads/?mount={public_layer}&from=public/base",
                     auth("alice"))
        self.assertEqual(r.status, 201, r)
        self.assertEqual(self.req("HEAD", f"/v2/alice/mounted/blobs/{public_layer}", auth("alice")).status, 200)

    def test_delete_needs_delete(self):
        img = self.images["team/app"][0]
        before = self.snapshot()
        for headers, statuses, what in [(auth("bob"), (403,), "bob (pull,push)"), ({}, (401,), "anonymous"),
                                        (auth("carol"), (403,), "carol (pull)")]:
            for path in ("/v2/team/app/manifests/v1", f"/v2/team/app/manifests/{img['digest']}",
                         f"/v2/team/app/blobs/{next(iter(img['blobs']))}"):
                self.assertRefused(self.req("DELETE", path, headers), statuses, f"{what} DELETE {path}")
        tok = self.token(["repository:team/app:*"], auth("bob"))
        r = self.req("DELETE", "/v2/team/app/manifests/v1", bt.bearer(tok))
        self.assertRefused(r, (401,), "bob token DELETE")
        self.assertIn('error="insufficient_scope"', r.header("WWW-Authenticate"))
        self.assertIn('scope="repository:team/app:delete"', r.header("WWW-Authenticate"))
        self.assertEqual(before, self.snapshot())
        self.assertEqual(self.req("GET", "/v2/team/app/manifests/v1", auth("bob")).body, img["manifest"])
        # alice may delete in her own namespace
        mine = self.push_image("alice/deletable", "v1", auth("alice"))
        self.assertEqual(self.req("DELETE", f"/v2/alice/deletable/manifests/{mine['digest']}", auth("alice")).status,
                         202)
        self.assertEqual(self.req("GET", "/v2/alice/deletable/manifests/v1", auth("alice")).status, 404)


class NoRulesDeletesOffTest(bt.ServerTest):
    """htpasswd only, no rules, no tokens, deletes off: signed-in users may push and pull
    anywhere, strangers nothing (Basic challenge), and every DELETE is 405 UNSUPPORTED."""

    passwords = {"alice": "alice-pw", "bob": "bob-pw"}
    config = {"deletes": False, "auth": {"htpasswd": "htpasswd"}}

    def test_no_rules(self):
        b = self.b
        alice = bt.basic_auth("alice", "alice-pw")
        img = bt.make_image()
        for digest, data in img["blobs"].items():
            r = b.request("POST", f"/v2/any/where/blobs/uploads/?digest={digest}", body=data, headers=alice)
            self.assertEqual(r.status, 201, r)
        r = b.request("PUT", "/v2/any/where/manifests/v1", body=img["manifest"],
                      headers={**alice, "Content-Type": bt.OCI_MANIFEST})
        self.assertEqual(r.status, 201, r)
        r = b.get("/v2/any/where/manifests/v1", headers=bt.basic_auth("bob", "bob-pw"))
        self.assertEqual(r.body, img["manifest"])
        r = b.get("/v2/any/where/manifests/v1")
        self.assertEqual(r.status, 401, r)
        self.assertEqual(r.header("WWW-Authenticate"), 'Basic realm="berth"')
        r = b.get("/v2/any/where/manifests/v1", headers=bt.basic_auth("alice", "bob-pw"))
        self.assertEqual(r.status, 401, r)
        # no token endpoint without a signing key
        r = b.get("/auth/token?service=berth&scope=repository:any/where:pull", headers=alice)
        self.assertNotEqual(r.status, 200, r)
        # a bearer token is refused where no keys are configured
        self.assertEqual(b.get("/v2/", headers=bt.bearer("a.b.c")).status, 401)

        # deletes off: 405 UNSUPPORTED for whoever asks, and nothing goes
        for path in ("/v2/any/where/manifests/v1", f"/v2/any/where/manifests/{img['digest']}",
                     f"/v2/any/where/blobs/{next(iter(img['blobs']))}"):
            r = b.request("DELETE", path, headers=alice)
            self.assertEqual(r.status, 405, r)
            self.assertEqual(r.error_codes(), ["UNSUPPORTED"])
            # anonymous is still asked to sign in first
            self.assertEqual(b.request("DELETE", path).status, 401)
        self.assertEqual(b.get("/v2/any/where/manifests/v1", headers=alice).body, img["manifest"])
        for digest, data in img["blobs"].items():
            self.assertEqual(b.get(f"/v2/any/where/blobs/{digest}", headers=alice).body, data)


if __name__ == "__main__":
    unittest.main()
