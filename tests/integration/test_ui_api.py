#!/usr/bin/env python3
"""The web UI's JSON API and files (/ui/), against the real binary, with real pushes over HTTP.

One registry with htpasswd users (admin may do everything; alice and bob own ${user}/**;
public/** is pullable by anonymous and authenticated callers), an immutable-tags policy on imm/**
and a retention policy (keep_last 1) on ret/** that never runs online. It proves:

- session: anonymous is {"user": null, "auth": true}; Basic credentials and the cookie of
  POST /ui/login name the user (a password with form-encoded `&+=%` and a space included); a
  cookie with one character of its payload or MAC changed, or another user's payload under a
  valid MAC, is anonymous; a wrong password or unknown user is 303 to login?failed without a
  cookie; the cookie is HttpOnly, SameSite=Strict, Max-Age=ui.session_seconds, not Secure over
  plain HTTP; logout clears it (Max-Age=0); GET /ui/logout is 405; a login body over 4 KiB is
  413 without a cookie (4096 bytes still sign in).
- visibility: anonymous lists exactly public/** (while GET /v2/_catalog answers it 401: both
  intended), alice public/** and alice/**, never bob/**; another user's repository is 404
  NAME_UNKNOWN signed in and 401 UNAUTHORIZED anonymous, for the repository, manifest and
  retention views alike, and no different from one that does not exist; /ui/api/namespaces
  names only namespaces holding something the caller may pull.
- paging: 120 repositories paged with n=50 following `next` until null give the visible list
  exactly once, in order; q= filters by substring and pages too; 250 tags page by n=100.
- repository totals: bytes is the sum of the distinct blobs linked (a shared layer counted
  once), tags and manifests counted and dropping after a tag or manifest DELETE; last_push is
  now (also for a manifest pushed by digest only); last_pull is null until a client GETs a
  manifest (the UI's own reads never count), then the pull time rounded up to the hour, for
  the repository and the tag pulled (by tag, or by digest) and not for the others.
- tag entries: digest, media type, size (manifest + config + layers; an index with what it
  lists), pushed, platforms of an index (unknown/unknown left out), immutable under the
  policy, signature "signed" with a sha256-<hex>.sig tag, else "unsigned" (null on the
  signature tag itself).
- manifest view: layers with media types and sizes, at most 500 of 1000 with layers_total
  and layers_bytes of all, raw cut at 64 KiB; the config's fields; annotations verbatim,
  hostile strings included; referrers with their artifact type, and the referrer's subject;
  the base image (repository, digest, tags, layer count), hidden when the caller may not pull
  its repository; a digest of another repository is MANIFEST_UNKNOWN here.
- retention preview: the tags keep_last would delete, with the policy's name, deleting
  nothing (asked twice); null policy where none applies; 404 for a repository that does not
  exist, like the other views.
- cluster (one replica): itself, ready, no problems.
- files: /ui -> ui/; index.html, login.html, the scripts, style and icon with their content
  types (static files no-cache), HEAD with the GET's length and no body; CSP (script-src
  'self', frame-ancestors 'none', no unsafe-*), nosniff and X-Frame-Options DENY on every UI
  answer, errors (404, 405) included; no-store on API answers; unknown files and traversal
  attempts (.., %2e%2e, //, NUL) 404 serving nothing.
- bad input: an invalid repository name is 400 NAME_INVALID whoever asks (before any question
  of who may see it); a reference that is neither tag nor digest 400; an unknown view 404; a bad
  n 400; a method other than GET/HEAD on the API 405.
The same API on registries of their own (a mirror, ExposedPorts, no authentication, the UI
turned off, refused configurations): test_ui_api_standalone.py.
"""

import json
import math
import os
import sys
import threading
import time
import unittest
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
from uicase import (FORM, MEDIA_TYPE, PASSWORDS, SESSION_VIEW, UiCase, auth, config_of, cookie_of,  # noqa: E402
                    flip, manifest_of)

INDEX = "application/vnd.oci.image.index.v1+json"
EMPTY = b"{}"
EMPTY_TYPE = "application/vnd.oci.empty.v1+json"
ZSTD_LAYER = "application/vnd.oci.image.layer.v1.tar+zstd"
HOUR_MS = 3600 * 1000
SESSION_SECONDS = 120
REGISTRY_HOST = "registry.example.test:5000"

RULES = [
    {"repository": "**", "principals": ["user:admin"], "actions": ["pull", "push", "delete"]},
    {"repository": "${user}/**", "principals": ["authenticated"], "actions": ["pull", "push", "delete"]},
    {"repository": "public/**", "principals": ["anonymous", "authenticated"], "actions": ["pull"]},
]
HOSTILE = {
    "org.opencontainers.image.description": "<img src=x onerror=alert(1)>",
    "org.example.script": "</script><script>alert(document.cookie)</script>",
    "org.example.quotes": "\"'`${x}{{x}}\\u0000 \u2028\u2029 ünï 🐳",
    "org.example.html": "<!-- --><svg/onload=alert(1)>&amp;&lt;",
}
PAGED = 120  # repositories public/page/NNN


def now_ms():
    return int(time.time() * 1000)


def hour_up(ms):
    return math.ceil(ms / HOUR_MS) * HOUR_MS


def namespace_of(repo):
    return repo.split("/", 1)[0]


class UiApiTest(UiCase, bt.ServerTest):
    passwords = PASSWORDS
    config = {
        "log": {"access": False},
        "auth": {"htpasswd": "htpasswd", "rules": RULES},
        "policies": [{"name": "frozen", "repositories": ["imm/**"], "immutable_tags": True}],
        "retention": {"interval_seconds": 0,
                      "policies": [{"name": "keep-one", "repositories": ["ret/**"], "keep_last": 1}]},
        "ui": {"session_seconds": SESSION_SECONDS, "registry_host": REGISTRY_HOST},
    }

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.repos = set()  # every repository pushed to
        cls.lock = threading.Lock()
        # Repositories of every kind of owner, each with an image tagged v1.
        cls.v1 = {}
        for repo, who in (("public/base-lib", "admin"), ("public/tools", "admin"), ("alice/app", "alice"),
                          ("alice/web", "alice"), ("bob/x", "bob"), ("bob/y", "bob"), ("imm/app", "admin"),
                          ("other/thing", "admin")):
            cls.v1[repo] = cls.push_image(repo, "v1", who)
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: cls.push_image(f"public/page/{i:03d}", "v1", "admin", layers=[os.urandom(40)]),
                          range(PAGED)))

    # ---- pushes (over HTTP, with the pusher's credentials)

    @classmethod
    def push_blob(cls, repo, data, who):
        digest = bt.sha256_digest(data)
        r = cls.b.request("POST", f"/v2/{repo}/blobs/uploads/?digest={digest}", body=data,
                          headers={**auth(who), "Content-Type": "application/octet-stream"})
        if r.status != 201:
            raise AssertionError(f"POST blob to {repo} as {who}: {r}")
        with cls.lock:
            cls.repos.add(repo)
        return digest

    @classmethod
    def put_manifest(cls, repo, ref, body, who, media_type=bt.OCI_MANIFEST, query=""):
        r = cls.b.request("PUT", f"/v2/{repo}/manifests/{ref}{query}", body=body,
                          headers={**auth(who), "Content-Type": media_type})
        if r.status != 201:
            raise AssertionError(f"PUT manifest {repo}:{ref} as {who}: {r}")
        with cls.lock:
            cls.repos.add(repo)
        return bt.sha256_digest(body)

    @classmethod
    def push_image(cls, repo, tag, who, layers=None, config=None, media_types=None, annotations=None):
        """Config + layers + manifest (by tag, or by digest when tag is None)."""
        layers = [os.urandom(300), os.urandom(200)] if layers is None else layers
        config = config or config_of()
        for data in [config, *layers]:
            cls.push_blob(repo, data, who)
        manifest = manifest_of(config, layers, media_types, annotations)
        cls.put_manifest(repo, tag or bt.sha256_digest(manifest), manifest, who)
        return {"manifest": manifest, "digest": bt.sha256_digest(manifest), "config": config, "layers": layers,
                "size": len(manifest) + len(config) + sum(map(len, layers))}

    def pull(self, repo, ref, who):
        r = self.b.get(f"/v2/{repo}/manifests/{ref}", headers={**auth(who), "Accept": f"{bt.OCI_MANIFEST}, {INDEX}"})
        self.assertEqual(r.status, 200, r)
        return r

    def login(self, user, password=None):
        body = urllib.parse.urlencode({"username": user, "password": password or PASSWORDS[user]}).encode()
        return self.b.request("POST", "/ui/login", body=body, headers=FORM)

    def session_cookie(self, user):
        r = self.login(user)
        self.assertEqual(r.status, 303, r)
        cookie = cookie_of(r)
        self.assertIsNotNone(cookie, r.headers)
        return cookie[0]

    def visible(self, who):
        """What `who` may pull of everything pushed, by the rules."""
        repos = sorted(self.repos)
        if who == "admin":
            return repos
        return [r for r in repos if r.startswith("public/") or (who and r.startswith(f"{who}/"))]

    def entry(self, repo, who):
        doc = self.ok("repositories", who, q=repo)
        found = [e for e in doc["repositories"] if e["name"] == repo]
        self.assertEqual(len(found), 1, doc)
        return found[0]

    def tag_entries(self, repo, who, **params):
        doc = self.ok("repository", who, name=repo, **params)
        return doc, {t["tag"]: t for t in doc["tags"]}

    # ---- session

    def test_session_anonymous_basic_and_cookie(self):
        self.assertEqual(self.ok(SESSION_VIEW), {"user": None, "auth": True, "registry": REGISTRY_HOST})
        for user in ("alice", "bob"):
            self.assertEqual(self.ok(SESSION_VIEW, user)["user"], user)
        r = self.b.get("/ui/api/session", headers=bt.basic_auth("alice", "wrong"))
        self.assertError(r, 401, "UNAUTHORIZED", "wrong Basic password")

        # Sign in: bob's password has a space and & + = % in it, form-encoded as a browser does.
        for user in ("alice", "bob"):
            r = self.login(user)
            self.assertEqual(r.status, 303, r)
            self.assertEqual(r.header("Location"), "./")
            self.assertUiHeaders(r, api=True, what="login answer")
            value, attributes = cookie_of(r)
            self.assertRegex(value, r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$")
            self.assertIn("HttpOnly", attributes)
            self.assertIn("SameSite=Strict", attributes)
            self.assertIn(f"Max-Age={SESSION_SECONDS}", attributes)
            self.assertNotIn("Secure", attributes, "Secure over plain HTTP")
            self.assertEqual(self.ok(SESSION_VIEW, cookie=value)["user"], user)
            # Among other cookies, as a browser sends them.
            self.assertEqual(self.ok(SESSION_VIEW, cookie=f"a=1; berth_session={value}; z=2")["user"], user)
            # The cookie lets the caller see what the user may pull: bob/** only for bob.
            names = self.names(cookie=value, n=200)
            self.assertEqual(names, self.visible(user))

        # Tampered: one character of the payload, or of the MAC; alice's MAC on bob's payload.
        alice, bob = self.session_cookie("alice"), self.session_cookie("bob")
        payload, mac = alice.split(".")
        tampered = [flip(payload, len(payload) // 2) + "." + mac, flip(payload, 0) + "." + mac,
                    payload + "." + flip(mac, len(mac) // 2), payload + "." + flip(mac, len(mac) - 1),
                    bob.split(".")[0] + "." + mac, payload + "." + bob.split(".")[1],
                    payload, payload + ".", "." + mac, alice + "x"]
        for value in tampered:
            with self.subTest(cookie=value):
                self.assertEqual(self.ok(SESSION_VIEW, cookie=value)["user"], None)
                self.assertEqual(self.names(cookie=value, n=200), self.visible(None))
                self.assertError(self.api("repository", cookie=value, name="alice/app"), 401, "UNAUTHORIZED")
        # A forged payload naming admin, with a MAC of the right shape, is nobody.
        forged = bt.b64url(json.dumps({"e": int(time.time()) + 600, "g": [], "n": "", "u": "admin"})) + "." + mac
        self.assertEqual(self.ok(SESSION_VIEW, cookie=forged)["user"], None)

    def test_login_refused_logout_methods(self):
        for user, password in (("alice", "wrong"), ("alice", ""), ("nobody", "x"), ("", ""), ("alice:x", "alice-pw"),
                               ("bob", "b0b pw&+="), ("alice", PASSWORDS["alice"] + " ")):
            with self.subTest(user=user, password=password):
                r = self.login(user, password) if password else self.b.request(
                    "POST", "/ui/login", body=urllib.parse.urlencode({"username": user}).encode(), headers=FORM)
                self.assertEqual(r.status, 303, r)
                self.assertEqual(r.header("Location"), "login?failed")
                self.assertIsNone(r.header("Set-Cookie"))
        r = self.b.request("POST", "/ui/logout", headers={"Content-Length": "0", "Cookie": "berth_session=x.y"})
        self.assertEqual(r.status, 303, r)
        self.assertEqual(r.header("Location"), "./")
        value, attributes = cookie_of(r)
        self.assertEqual(value, "")
        self.assertIn("Max-Age=0", attributes)
        self.assertIn("HttpOnly", attributes)
        self.assertNotIn("Secure", attributes)
        for method, path in (("GET", "/ui/logout"), ("HEAD", "/ui/logout"), ("PUT", "/ui/login"),
                             ("DELETE", "/ui/login"), ("POST", "/ui/api/session"), ("PUT", "/ui/api/repositories"),
                             ("DELETE", "/ui/api/repository?name=alice/app"), ("POST", "/ui/app.js")):
            with self.subTest(method=method, path=path):
                r = self.b.request(method, path, headers={**auth("alice"), "Content-Length": "0"})
                self.assertEqual(r.status, 405, r)
                if method != "HEAD":
                    self.assertEqual(r.error_codes(), ["UNSUPPORTED"])
                self.assertUiHeaders(r, what=f"{method} {path}")

    def test_login_body_limit(self):
        def body_of(size):
            body = urllib.parse.urlencode({"username": "alice", "password": PASSWORDS["alice"]}).encode() + b"&pad="
            return body + b"p" * (size - len(body))
        r = self.b.request("POST", "/ui/login", body=body_of(4096), headers=FORM)
        self.assertEqual(r.status, 303, r)
        self.assertIsNotNone(cookie_of(r), "a 4096-byte login did not sign in")
        for size in (4097, 64 * 1024):
            r = self.b.request("POST", "/ui/login", body=body_of(size), headers=FORM)
            self.assertIn(r.status, (400, 413), r)
            self.assertIsNone(r.header("Set-Cookie"), r.headers)
        r = self.b.request("POST", "/ui/login", body=[body_of(4000), b"p" * 4000], headers=FORM, chunked=True)
        self.assertIn(r.status, (400, 413), r)
        self.assertIsNone(r.header("Set-Cookie"), r.headers)
        self.assertTrue(self.b.alive())

    # ---- visibility

    def test_visibility(self):
        public = self.visible(None)
        self.assertGreaterEqual(len(public), PAGED + 2)
        self.assertEqual(self.names(n=200), public)
        self.assertError(self.b.get("/v2/_catalog"), 401, "UNAUTHORIZED", "anonymous catalog")
        self.assertEqual(self.b.get("/v2/_catalog?n=1000", headers=auth("admin")).status, 200)
        for who in ("alice", "bob", "admin"):
            with self.subTest(who=who):
                names = self.names(who, n=200)
                self.assertEqual(names, self.visible(who))
                self.assertTrue(set(public) < set(names))
                other = "bob" if who == "alice" else "alice"
                if who != "admin":
                    self.assertFalse([n for n in names if n.startswith(f"{other}/")], names)
        self.assertIn("imm/app", self.names("admin", n=200))

        # Another user's repository: as if it did not exist when signed in, 401 when anonymous.
        for view, params in (("repository", {}), ("manifest", {"reference": "v1"}), ("retention", {})):
            with self.subTest(view=view):
                self.assertError(self.api(view, "alice", name="bob/x", **params), 404, "NAME_UNKNOWN")
                self.assertError(self.api(view, "alice", name="bob/nothing", **params), 404, "NAME_UNKNOWN")
                self.assertError(self.api(view, None, name="bob/x", **params), 401, "UNAUTHORIZED")
                self.assertEqual(self.api(view, "bob", name="bob/x", **params).status, 200)
                self.assertEqual(self.api(view, None, name="public/tools", **params).status, 200)
                r = self.api(view, "alice", name="bob/x", **params)
                self.assertNotIn(self.v1["bob/x"]["digest"].encode(), r.body)
                self.assertError(self.api(view, None, name="public/nothing", **params), 404, "NAME_UNKNOWN")
        # alice asking her repository for bob's manifest by digest: unknown here.
        r = self.api("manifest", "alice", name="alice/app", reference=self.v1["bob/x"]["digest"])
        self.assertError(r, 404, "MANIFEST_UNKNOWN")

        # Namespaces holding something the caller may pull.
        def namespaces(who):
            doc = self.ok("namespaces", who, n=1000)
            self.assertIsNone(doc["next"])
            return [x["namespace"] for x in doc["namespaces"]]
        self.assertEqual(namespaces(None), ["public"])
        self.assertEqual(namespaces("alice"), ["alice", "public"])
        self.assertEqual(namespaces("bob"), ["bob", "public"])
        self.assertEqual(namespaces("admin"), sorted({namespace_of(r) for r in self.repos}))
        alice = self.session_cookie("alice")
        self.assertEqual(namespaces("alice"), [x["namespace"] for x in self.ok("namespaces", cookie=alice)["namespaces"]])
        # Paged one at a time, the signed-in view skips what it may not see.
        seen, last = [], None
        for _ in range(20):
            doc = self.ok("namespaces", "alice", n=1, **({"last": last} if last else {}))
            seen += [x["namespace"] for x in doc["namespaces"]]
            if doc["next"] is None:
                break
            last = doc["next"]
        self.assertEqual(seen, ["alice", "public"])

    # ---- paging

    def test_repositories_paging(self):
        for who in (None, "alice", "admin"):
            with self.subTest(who=who):
                entries, pages = self.all_repositories(who, n=50)
                names = [e["name"] for e in entries]
                expected = self.visible(who)
                self.assertEqual(len(names), len(set(names)), "a repository listed twice")
                self.assertEqual(names, expected)
                self.assertGreaterEqual(pages, math.ceil(len(expected) / 50))
                for e in entries:
                    self.assertEqual(set(e), {"name", "tags", "manifests", "bytes", "last_push", "last_pull"})
        # One page from the middle.
        doc = self.ok("repositories", n=5, last="public/page/049")
        self.assertEqual([e["name"] for e in doc["repositories"]], [f"public/page/{i:03d}" for i in range(50, 55)])
        self.assertEqual(doc["next"], "public/page/054")
        # A search pages too; what the caller may not see is never found.
        for who, q, n in ((None, "page/0", 30), ("alice", "page/1", 7), ("alice", "ice/", 1), ("bob", "/", 40)):
            with self.subTest(who=who, q=q):
                names = self.names(who, q=q, n=n)
                expected = [r for r in self.visible(who) if q in r]
                self.assertEqual(names, expected)
        self.assertEqual(len(self.names(None, q="page/0", n=30)), 100)
        self.assertEqual(self.names("alice", q="bob/"), [])
        self.assertEqual(self.names(None, q="alice"), [])
        bobs = self.names("bob", q="bob/")
        self.assertEqual(bobs, [r for r in self.visible("bob") if r.startswith("bob/")])
        self.assertTrue({"bob/x", "bob/y"} <= set(bobs), bobs)
        self.assertEqual(self.names(None, q="no such thing"), [])

    def test_tags_paging(self):
        repo = "alice/many-tags"
        img = self.push_image(repo, None, "alice", layers=[os.urandom(50)])
        tags = [f"t{i:03d}" for i in range(250)]
        for start in range(0, 250, 50):
            query = "?" + "&".join(f"tag={t}" for t in tags[start:start + 50])
            self.put_manifest(repo, img["digest"], img["manifest"], "alice", query=query)
        listed, last, pages = [], None, 0
        while True:
            doc, _ = self.tag_entries(repo, "alice", n=100, **({"last": last} if last else {}))
            pages += 1
            self.assertEqual(doc["tags_total"], 250)
            self.assertLessEqual(len(doc["tags"]), 100)
            listed += [t["tag"] for t in doc["tags"]]
            self.assertTrue(all(t["digest"] == img["digest"] for t in doc["tags"]))
            if doc["next"] is None:
                break
            self.assertEqual(doc["next"], listed[-1])
            last = doc["next"]
        self.assertEqual(pages, 3)
        self.assertEqual(listed, tags)
        doc, _ = self.tag_entries(repo, "alice")  # 100 by default
        self.assertEqual(len(doc["tags"]), 100)
        self.assertEqual(doc["next"], "t099")

    # ---- totals, pushes and pulls

    def test_repository_totals_and_times(self):
        repo = "alice/totals"
        shared = os.urandom(1000)
        t0 = now_ms()
        one = self.push_image(repo, "one", "alice", layers=[shared, os.urandom(700)])
        two = self.push_image(repo, "two", "alice", layers=[shared, os.urandom(500)])
        three = self.push_image(repo, "three", "alice", layers=[shared])
        t1 = now_ms()
        distinct = {bt.sha256_digest(x): len(x) for img in (one, two, three) for x in [img["config"], *img["layers"]]}
        self.assertEqual(len(distinct), 6)
        expected_bytes = sum(distinct.values())

        e = self.entry(repo, "alice")
        self.assertEqual((e["tags"], e["manifests"], e["bytes"]), (3, 3, expected_bytes), e)
        self.assertIsInstance(e["last_push"], int)
        self.assertGreaterEqual(e["last_push"], t0 - 1000)
        self.assertLessEqual(e["last_push"], t1 + 1000)
        self.assertIsNone(e["last_pull"])
        doc, tags = self.tag_entries(repo, "alice")
        self.assertEqual((doc["name"], doc["tags_total"], doc["manifests"], doc["bytes"]), (repo, 3, 3, expected_bytes))
        self.assertIs(doc["mirrored"], False)
        self.assertEqual(doc["last_push"], e["last_push"])
        self.assertEqual(sorted(tags), ["one", "three", "two"])
        self.assertTrue(all(t["last_pull"] is None for t in tags.values()))
        for name in ("one", "two", "three"):
            self.assertGreaterEqual(tags[name]["pushed"], t0 - 1000)
            self.assertLessEqual(tags[name]["pushed"], t1 + 1000)
        self.assertLess(tags["one"]["pushed"], tags["three"]["pushed"])

        # The UI's own reads are no pulls.
        for view, params in (("manifest", {"reference": "one"}), ("manifest", {"reference": two["digest"]}),
                             ("repository", {}), ("retention", {})):
            self.ok(view, "alice", name=repo, **params)
        self.assertIsNone(self.entry(repo, "alice")["last_pull"])

        # A client's pull by tag: the repository and that tag, rounded up to the hour.
        p0 = now_ms()
        self.pull(repo, "one", "alice")
        p1 = now_ms()
        e = self.entry(repo, "alice")
        self.assertIn(e["last_pull"], {hour_up(p0), hour_up(p1)}, e)
        self.assertGreaterEqual(e["last_pull"], p0)
        _, tags = self.tag_entries(repo, "alice")
        self.assertEqual(tags["one"]["last_pull"], e["last_pull"])
        self.assertIsNone(tags["two"]["last_pull"])
        self.assertIsNone(tags["three"]["last_pull"])
        # By digest: the tag naming that digest.
        self.pull(repo, two["digest"], "alice")
        _, tags = self.tag_entries(repo, "alice")
        self.assertGreaterEqual(tags["two"]["last_pull"], p0)
        self.assertEqual(tags["two"]["last_pull"] % HOUR_MS, 0)
        self.assertIsNone(tags["three"]["last_pull"])

        # A tag deleted: one tag less, the manifest stays until it is deleted itself.
        r = self.b.request("DELETE", f"/v2/{repo}/manifests/three", headers=auth("alice"))
        self.assertEqual(r.status, 202, r)
        e = self.entry(repo, "alice")
        self.assertEqual((e["tags"], e["manifests"]), (2, 3), e)
        doc, tags = self.tag_entries(repo, "alice")
        self.assertEqual((doc["tags_total"], sorted(tags)), (2, ["one", "two"]))
        r = self.b.request("DELETE", f"/v2/{repo}/manifests/{three['digest']}", headers=auth("alice"))
        self.assertEqual(r.status, 202, r)
        e = self.entry(repo, "alice")
        self.assertEqual((e["tags"], e["manifests"]), (2, 2), e)
        self.assertError(self.api("manifest", "alice", name=repo, reference=three["digest"]), 404, "MANIFEST_UNKNOWN")
        self.assertError(self.api("manifest", "alice", name=repo, reference="three"), 404, "MANIFEST_UNKNOWN")

    def test_last_push_of_a_push_by_digest(self):
        """A manifest pushed by digest alone is a push: the repository's last_push says when."""
        repo = "alice/by-digest"
        t0 = now_ms()
        img = self.push_image(repo, None, "alice", layers=[os.urandom(64)])
        t1 = now_ms()
        e = self.entry(repo, "alice")
        self.assertEqual((e["tags"], e["manifests"], e["bytes"]), (0, 1, img["size"] - len(img["manifest"])), e)
        self.assertIsNotNone(e["last_push"], f"a repository pushed to just now has no last_push: {e}")
        self.assertGreaterEqual(e["last_push"], t0 - 1000)
        self.assertLessEqual(e["last_push"], t1 + 1000)

    # ---- tag entries

    def test_tag_entries(self):
        repo = "alice/kinds"
        img = self.push_image(repo, "v1", "alice")
        plain = self.push_image(repo, "plain", "alice", layers=[os.urandom(10)])
        # An index of two platforms and an attestation (unknown/unknown), as buildx pushes them.
        children = []
        for arch in ("amd64", "arm64", "unknown"):
            child = self.push_image(repo, None, "alice", config=config_of(arch), layers=[os.urandom(80)])
            platform = {"architecture": arch, "os": "linux" if arch != "unknown" else "unknown"}
            children.append((child, platform))
        index = json.dumps({"schemaVersion": 2, "mediaType": INDEX, "manifests": [
            {"mediaType": bt.OCI_MANIFEST, "digest": c["digest"], "size": len(c["manifest"]), "platform": p}
            for c, p in children]}).encode()
        index_digest = self.put_manifest(repo, "multi", index, "alice", INDEX)
        # A signature for v1, as cosign tags it.
        sig = manifest_of(EMPTY, [b"signature payload"], config_type=EMPTY_TYPE,
                          media_types={0: "application/vnd.dev.cosign.simplesigning.v1+json"})
        self.push_blob(repo, EMPTY, "alice")
        self.push_blob(repo, b"signature payload", "alice")
        sig_tag = "sha256-" + img["digest"].split(":")[1] + ".sig"
        sig_digest = self.put_manifest(repo, sig_tag, sig, "alice")

        doc, tags = self.tag_entries(repo, "alice")
        self.assertEqual(sorted(tags), sorted(["v1", "plain", "multi", sig_tag]))
        v1 = tags["v1"]
        self.assertEqual(v1["digest"], img["digest"])
        self.assertEqual(v1[MEDIA_TYPE], bt.OCI_MANIFEST)
        self.assertEqual(v1["size"], img["size"])
        self.assertIsNone(v1["platforms"])
        self.assertIs(v1["immutable"], False)
        self.assertEqual(v1["signature"], "signed")
        self.assertEqual(tags["plain"]["signature"], "unsigned")
        self.assertEqual(tags["plain"]["size"], plain["size"])
        self.assertIsNone(tags[sig_tag]["signature"])
        self.assertEqual(tags[sig_tag]["digest"], sig_digest)
        multi = tags["multi"]
        self.assertEqual((multi["digest"], multi[MEDIA_TYPE]), (index_digest, INDEX))
        self.assertEqual(multi["platforms"], ["linux/amd64", "linux/arm64"])
        self.assertEqual(multi["size"], len(index) + sum(c["size"] for c, _ in children))
        self.assertEqual(multi["signature"], "unsigned")
        self.assertEqual(doc["manifests"], 7)
        self.assertEqual(doc["tags_total"], 4)

        # The index's own view lists every child with its platform.
        m = self.ok("manifest", "alice", name=repo, reference="multi")
        self.assertEqual((m["kind"], m["digest"], m["size"]), ("index", index_digest, multi["size"]))
        self.assertEqual([p["platform"] for p in m["platforms"]], ["linux/amd64", "linux/arm64", "unknown/unknown"])
        self.assertEqual([p["digest"] for p in m["platforms"]], [c["digest"] for c, _ in children])
        self.assertEqual(m["platforms_total"], 3)
        self.assertEqual((m["layers"], m["layers_total"], m["config"], m["base"]), ([], 0, None, None))
        m = self.ok("manifest", "alice", name=repo, reference="v1")
        self.assertEqual(m["signature"], "signed")
        self.assertEqual(m["immutable_tags"], [])

        # Immutable under the policy (admin sees imm/**).
        doc, tags = self.tag_entries("imm/app", "admin")
        self.assertIs(tags["v1"]["immutable"], True)
        self.assertEqual(tags["v1"]["signature"], "unsigned")
        m = self.ok("manifest", "admin", name="imm/app", reference="v1")
        self.assertEqual((m["tags"], m["immutable_tags"]), (["v1"], ["v1"]))
        _, tags = self.tag_entries("other/thing", "admin")
        self.assertIs(tags["v1"]["immutable"], False)

    # ---- the manifest view

    def test_manifest_config_layers_annotations(self):
        repo = "alice/described"
        history = [{"created": "2024-01-02T03:04:05Z", "created_by": "/bin/sh -c #(nop) ADD file:abc in /"},
                   {"created": "2024-01-02T03:04:06Z", "created_by": "/bin/sh -c #(nop)  CMD [\"sh\"]",
                    "comment": "<b>buildkit</b>", "empty_layer": True},
                   {"created_by": "RUN make </script>"}]
        config = config_of("arm64", variant="v8", created="2024-01-02T03:04:07.123456789Z", author="Alice <a@x>",
                           history=history,
                           config={"Entrypoint": ["/bin/app", "--serve"], "Cmd": ["--port", "8080"],
                                   "Env": ["PATH=/usr/bin", "HTML=<img src=x onerror=alert(1)>"],
                                   "Labels": {"org.opencontainers.image.title": "<script>alert(1)</script>",
                                              "n": "1"},
                                   "WorkingDir": "/srv", "User": "1000:1000"})
        layers = [os.urandom(1234), os.urandom(567), os.urandom(89)]
        img = self.push_image(repo, "v1", "alice", layers=layers, config=config, media_types={1: ZSTD_LAYER},
                              annotations=HOSTILE)
        m = self.ok("manifest", "alice", name=repo, reference="v1")
        self.assertEqual((m["repository"], m["reference"], m["digest"]), (repo, "v1", img["digest"]))
        self.assertEqual((m[MEDIA_TYPE], m["kind"], m["size"]), (bt.OCI_MANIFEST, "image", img["size"]))
        self.assertEqual(m["tags"], ["v1"])
        self.assertEqual(m["layers"], [{"digest": bt.sha256_digest(x), MEDIA_TYPE: t, "size": len(x)}
                                       for x, t in zip(layers, [bt.OCI_LAYER, ZSTD_LAYER, bt.OCI_LAYER])])
        self.assertEqual((m["layers_total"], m["layers_bytes"]), (3, sum(map(len, layers))))
        self.assertEqual(m["annotations"], HOSTILE)
        self.assertEqual((m["raw"], m["raw_truncated"]), (img["manifest"].decode(), False))
        self.assertEqual((m["referrers"], m["referrers_total"], m["subject"]), ([], 0, None))
        self.assertIsNone(m["artifact_type"])
        c = m["config"]
        self.assertEqual((c["digest"], c[MEDIA_TYPE], c["size"]),
                         (bt.sha256_digest(config), bt.OCI_CONFIG, len(config)))
        self.assertEqual((c["os"], c["architecture"], c["variant"]), ("linux", "arm64", "v8"))
        self.assertEqual((c["created"], c["author"]), ("2024-01-02T03:04:07.123456789Z", "Alice <a@x>"))
        self.assertEqual(c["entrypoint"], ["/bin/app", "--serve"])
        self.assertEqual(c["cmd"], ["--port", "8080"])
        self.assertEqual(c["env"], ["PATH=/usr/bin", "HTML=<img src=x onerror=alert(1)>"])
        self.assertEqual(c["labels"], {"org.opencontainers.image.title": "<script>alert(1)</script>", "n": "1"})
        self.assertEqual((c["working_dir"], c["user"], c["exposed_ports"]), ("/srv", "1000:1000", []))
        self.assertEqual(c["history_total"], 3)
        self.assertEqual(c["history"], [
            {"created": h.get("created"), "created_by": h["created_by"], "comment": h.get("comment"),
             "empty_layer": h.get("empty_layer", False)} for h in history])
        # By digest: the same, with the digest as the reference.
        by_digest = self.ok("manifest", "alice", name=repo, reference=img["digest"])
        self.assertEqual(by_digest["reference"], img["digest"])
        self.assertEqual({k: v for k, v in by_digest.items() if k != "reference"},
                         {k: v for k, v in m.items() if k != "reference"})
        # No pull noted by any of that.
        self.assertIsNone(self.entry(repo, "alice")["last_pull"])

    def test_manifest_of_1000_layers(self):
        repo = "alice/layered"
        nonce = os.urandom(4).hex()
        layers = [f"layer {i} {nonce}".encode() for i in range(1000)]
        config = config_of()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda data: self.push_blob(repo, data, "alice"), [config, *layers]))
        manifest = manifest_of(config, layers)
        self.assertGreater(len(manifest), 64 * 1024)
        digest = self.put_manifest(repo, "deep", manifest, "alice")
        m = self.ok("manifest", "alice", name=repo, reference="deep")
        self.assertEqual(m["digest"], digest)
        self.assertEqual(len(m["layers"]), 500)
        self.assertEqual([x["digest"] for x in m["layers"]], [bt.sha256_digest(x) for x in layers[:500]])
        self.assertEqual(m["layers_total"], 1000)
        self.assertEqual(m["layers_bytes"], sum(map(len, layers)))
        self.assertEqual(m["size"], len(manifest) + len(config) + sum(map(len, layers)))
        self.assertIs(m["raw_truncated"], True)
        self.assertEqual(m["raw"], manifest[:64 * 1024].decode())
        self.assertIsNone(m["base"])
        _, tags = self.tag_entries(repo, "alice")
        self.assertEqual(tags["deep"]["size"], m["size"])

    def test_referrers_and_subject(self):
        repo = "alice/referred"
        img = self.push_image(repo, "v1", "alice")
        sbom = b'{"spdxVersion": "SPDX-2.3"}'
        self.push_blob(repo, EMPTY, "alice")
        self.push_blob(repo, sbom, "alice")
        subject = {"mediaType": bt.OCI_MANIFEST, "digest": img["digest"], "size": len(img["manifest"])}
        annotations = {"org.opencontainers.image.created": "2024-05-06T07:08:09Z", "x": HOSTILE["org.example.script"]}
        artifact = manifest_of(EMPTY, [sbom], config_type=EMPTY_TYPE, media_types={0: "application/spdx+json"},
                               subject=subject, artifact_type="application/spdx+json", annotations=annotations)
        digest = self.put_manifest(repo, bt.sha256_digest(artifact), artifact, "alice")
        m = self.ok("manifest", "alice", name=repo, reference="v1")
        self.assertEqual(m["referrers"], [{"digest": digest, MEDIA_TYPE: bt.OCI_MANIFEST,
                                           "artifact_type": "application/spdx+json", "size": len(artifact),
                                           "annotations": annotations}])
        self.assertEqual(m["referrers_total"], 1)
        self.assertEqual(m["signature"], "unsigned", "an SBOM is no signature")
        r = self.ok("manifest", "alice", name=repo, reference=digest)
        self.assertEqual(r["subject"], {"digest": img["digest"], MEDIA_TYPE: bt.OCI_MANIFEST,
                                        "size": len(img["manifest"])})
        self.assertEqual((r["kind"], r["artifact_type"], r["tags"]), ("artifact", "application/spdx+json", []))
        self.assertEqual(r["annotations"], annotations)
        self.assertEqual(r["layers"], [{"digest": bt.sha256_digest(sbom), MEDIA_TYPE: "application/spdx+json",
                                        "size": len(sbom)}])
        self.assertEqual(r["config"][MEDIA_TYPE], EMPTY_TYPE)
        self.assertNotIn("created", r["config"], "an empty config read as an image's")

    def test_base_image(self):
        a, b_, c = os.urandom(500), os.urandom(400), os.urandom(300)
        base = self.push_image("public/base", "1", "admin", layers=[a, b_])
        self.push_image("alice/on-public", "v1", "alice", layers=[a, b_, c])
        expected = {"repository": "public/base", "digest": base["digest"], "tags": ["1"], "layers": 2}
        self.assertEqual(self.ok("manifest", "alice", name="alice/on-public", reference="v1")["base"], expected)
        self.assertIsNone(self.ok("manifest", None, name="public/base", reference="1")["base"])
        # A base in bob's repository: alice may not know it; admin sees it.
        d, e, f = os.urandom(500), os.urandom(400), os.urandom(300)
        hidden = self.push_image("bob/base", "1", "bob", layers=[d, e])
        self.push_image("alice/on-bobs", "v1", "alice", layers=[d, e, f])
        self.assertIsNone(self.ok("manifest", "alice", name="alice/on-bobs", reference="v1")["base"])
        seen = self.ok("manifest", "admin", name="alice/on-bobs", reference="v1")["base"]
        self.assertEqual(seen, {"repository": "bob/base", "digest": hidden["digest"], "tags": ["1"], "layers": 2})
        # The same base in a repository alice may pull too: that one is named.
        self.push_image("alice/base-copy", "mine", "alice", layers=[d, e], config=hidden["config"])
        copy = self.ok("manifest", "alice", name="alice/on-bobs", reference="v1")["base"]
        self.assertEqual((copy["repository"], copy["digest"], copy["tags"]), ("alice/base-copy", hidden["digest"], ["mine"]))

    # ---- retention, cluster

    def test_retention_preview(self):
        repo = "ret/app"
        for tag in ("t1", "t2", "t3"):  # pushed in this order: t3 is kept
            self.push_image(repo, tag, "admin", layers=[os.urandom(30)])
        for _ in range(2):  # asking twice deletes nothing either
            doc = self.ok("retention", "admin", name=repo)
            self.assertEqual((doc["repository"], doc["policy"]), (repo, "keep-one"))
            deletions = sorted(doc["deletions"], key=lambda d: d["reference"])
            self.assertEqual([(d["kind"], d["reference"]) for d in deletions], [("tag", "t1"), ("tag", "t2")])
            for d in deletions:
                self.assertIn("not among the 1 most recently pushed", d["reason"])
        r = self.b.get(f"/v2/{repo}/tags/list", headers=auth("admin"))
        self.assertEqual(sorted(r.json()["tags"]), ["t1", "t2", "t3"])
        doc, tags = self.tag_entries(repo, "admin")
        self.assertEqual((doc["tags_total"], doc["manifests"], sorted(tags)), (3, 3, ["t1", "t2", "t3"]))
        self.assertEqual(self.ok("retention", "alice", name="alice/app"),
                         {"repository": "alice/app", "policy": None, "deletions": []})
        self.assertError(self.api("retention", "alice", name=repo), 404, "NAME_UNKNOWN")
        self.assertError(self.api("retention", None, name=repo), 401, "UNAUTHORIZED")

    def test_cluster_single_replica(self):
        # Replica addresses and backup errors are for those signed in.
        self.assertError(self.api("cluster", None), 401, "UNAUTHORIZED")
        doc = self.ok("cluster", "alice")
        self.assertEqual(len(doc["replicas"]), 1, doc)
        replica = doc["replicas"][0]
        self.assertIs(replica["self"], True)
        self.assertIs(replica["ready"], True)
        self.assertIs(replica["reachable"], True)
        self.assertIsNone(replica["error"])
        self.assertEqual(doc["self"], replica["id"])
        self.assertEqual(doc["problems"], [])

    # ---- files, headers, bad input

    def test_files_and_headers(self):
        r = self.b.get("/ui")
        self.assertEqual((r.status, r.header("Location")), (303, "ui/"))
        self.assertUiHeaders(r, what="/ui")
        index = self.b.get("/ui/")
        self.assertEqual(index.status, 200, index)
        self.assertEqual(index.header("Content-Type"), "text/html; charset=utf-8")
        self.assertIn(b'<script type="module" src="app.js"></script>', index.body)
        login = self.b.get("/ui/login")
        self.assertEqual((login.status, login.header("Content-Type")), (200, "text/html; charset=utf-8"))
        # The files every page loads (the sources may be ahead of the binary: only their names here).
        for rel, content_type, start in (
                ("app.js", "text/javascript; charset=utf-8", b"import "), ("api.js", "text/javascript; charset=utf-8", b""),
                ("login.js", "text/javascript; charset=utf-8", b""), ("pages/repository.js", "text/javascript; charset=utf-8", b""),
                ("style.css", "text/css; charset=utf-8", b""), ("favicon.svg", "image/svg+xml", b"<svg"),
                ("index.html", "text/html; charset=utf-8", b"<!doctype html>")):
            with self.subTest(file=rel):
                r = self.b.get("/ui/" + rel)
                self.assertEqual(r.status, 200, r)
                self.assertGreater(len(r.body), 20)
                self.assertTrue(r.body.lstrip().startswith(start), r.body[:100])
                self.assertEqual(r.header("Content-Type"), content_type)
                self.assertUiHeaders(r, what=rel)
                self.assertEqual(r.header("Cache-Control"), "no-cache")
                h = self.b.head("/ui/" + rel)
                self.assertEqual((h.status, h.body, h.header("Content-Length")), (200, b"", str(len(r.body))))
                self.assertEqual(h.header("Content-Type"), content_type)
                self.assertUiHeaders(h, what=f"HEAD {rel}")
        self.assertEqual(self.b.get("/ui/index.html").body, index.body)
        self.assertEqual(self.b.get("/ui/login.html").body, login.body)

        # API answers: no-store, and HEAD without a body.
        for who in (None, "alice"):
            g, h = self.api(SESSION_VIEW, who), self.api(SESSION_VIEW, who, method="HEAD")
            self.assertEqual((h.status, h.body), (200, b""))
            self.assertEqual(h.header("Content-Length"), str(len(g.body)))
            self.assertUiHeaders(h, api=True, what="HEAD session")
        self.assertUiHeaders(self.api("repository", name="bob/x"), api=True, what="401")

        # Unknown files and every way out of the embedded set: 404 with nothing served.
        catalog = self.b.get("/v2/", headers=auth("admin")).body
        for path in ("/ui/nope.js", "/ui/../v2/", "/ui/%2e%2e/v2/", "/ui/..%2fv2%2f", "/ui//etc/passwd",
                     "/ui/pages/../app.js", "/ui/./app.js", "/ui/app.js/", "/ui/APP.JS", "/ui/app.js%00.html",
                     "/ui/..", "/ui/../../../../etc/passwd", "/ui/%2e%2e/%2e%2e/etc/passwd", "/ui/api",
                     "/ui/pages", "/ui/pages/", "/uix/app.js"):
            with self.subTest(path=path):
                r = self.b.get(path, headers=auth("admin"))
                self.assertEqual(r.status, 404, r)
                self.assertNotIn(b"root:", r.body)
                self.assertNotIn(b"import ", r.body)
                if catalog:
                    self.assertNotEqual(r.body, catalog)
                if path.startswith("/ui/"):
                    self.assertUiHeaders(r, what=path)

    def test_bad_input(self):
        for who in (None, "alice", "admin"):
            for view, params in (("manifest", {"name": "INVALID..NAME", "reference": "v1"}),
                                 ("repository", {"name": "INVALID..NAME"}), ("retention", {"name": "UPPER/case"}),
                                 ("repository", {"name": ""}), ("manifest", {"reference": "v1"})):
                with self.subTest(who=who, view=view, params=params):
                    self.assertError(self.api(view, who, **params), 400, "NAME_INVALID")
        for reference in ("not a tag", "sha256:zz", "sha256:" + "0" * 63, "-v1", "", "a" * 129, "v1/../x"):
            with self.subTest(reference=reference):
                r = self.api("manifest", "alice", name="alice/app", reference=reference)
                self.assertEqual(r.status, 400, r)
                self.assertIn(r.error_codes(), (["MANIFEST_INVALID"], ["TAG_INVALID"], ["DIGEST_INVALID"]))
        self.assertError(self.api("manifest", "alice", name="alice/app", reference="nope"), 404, "MANIFEST_UNKNOWN")
        self.assertError(self.api("manifest", "alice", name="alice/app", reference="sha256:" + "0" * 64), 404,
                         "MANIFEST_UNKNOWN")
        for view in ("nope", "", "session/x", "../session", "Session"):
            with self.subTest(view=view):
                r = self.b.get(f"/ui/api/{view}", headers=auth("alice"))
                self.assertError(r, 404, "NAME_UNKNOWN", view)
                self.assertUiHeaders(r, api=True, what=view)
        for view, params in (("repositories", {"n": "abc"}), ("repositories", {"n": "-1"}),
                             ("repository", {"name": "alice/app", "n": "1x"}), ("namespaces", {"n": "x"})):
            with self.subTest(view=view, params=params):
                r = self.api(view, "alice", **params)
                self.assertEqual(r.status, 400, r)
                self.assertUiHeaders(r, api=True)
        self.assertTrue(self.b.alive())


if __name__ == "__main__":
    unittest.main(verbosity=2)
