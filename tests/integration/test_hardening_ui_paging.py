#!/usr/bin/env python3
"""Issue 34, findings 9, 15 and 16 (/work/notes/contract-34.md): what the web UI and the paged
listings let a caller learn, and how UI sessions are made.

Finding 15 (one registry, htpasswd admin/alice/bob, ${user}/** and public/** for everyone): paging
never names what the caller may not see. /v2/_catalog?n=1 and n=2 (GET and HEAD), /_berth/v1/usage,
/ui/api/namespaces (anonymous too) and /_berth/v1/lineage (70 images in bob/hidden between alice's
and public's, more than a page scans) give as `last=` / `next` either a name in that answer or an
opaque cursor starting with "~", and following them lists every visible name exactly once.
/ui/api/repositories is checked the same way (a guard: with fewer than 20,000 names it already held).
Finding 16, same registry: POST /ui/login with Sec-Fetch-Site: cross-site, or an Origin whose
host:port is not the Host, is 403 without a cookie (a same-origin sign-in still works: guard).
Finding 9 (token.verify_keys of an external issuer, no rules): a token scoped to public/app:pull
sees only public/app in /ui/api/repositories; the repository and manifest views (tag, digest,
GET and HEAD) of secret/payroll and other/thing answer 404 NAME_UNKNOWN.
Finding 16, two replicas with a backup secret: the session cookie's MAC is not
HMAC-SHA256(SHA-256("berth ui session\\n" + peer secret), payload), a cookie forged with that key
(admin, alice) signs nobody in on either replica, and the cluster view sends no request to a peer's
/_berth/v1/backup (the peer's access log). Finding 16, a trusted issuer (auth.oidc, jwks_file): a
token as the sign-in password gives a cookie whose Max-Age is at most the token's remaining
lifetime (20 s and 300 s tokens), and once the token has expired the cookie signs nobody in.
"""

import base64
import hashlib
import hmac
import http.client
import json
import os
import re
import sys
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402

PASSWORDS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw"}
RULES = [
    {"repository": "**", "principals": ["user:admin"], "actions": ["pull", "push", "delete"]},
    {"repository": "${user}/**", "principals": ["authenticated"], "actions": ["pull", "push"]},
    {"repository": "public/**", "principals": ["anonymous", "authenticated"], "actions": ["pull"]},
]
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
HIDDEN = 70  # images in bob/hidden built on public/base: more than one lineage page scans


def auth(user):
    return bt.basic_auth(user, PASSWORDS[user]) if user else {}


def cookie_of(resp):
    """(value, {attribute: value}) of the berth_session Set-Cookie of an answer, or None."""
    header = resp.header("Set-Cookie")
    if header is None:
        return None
    first, *attributes = [part.strip() for part in header.split(";")]
    name, _, value = first.partition("=")
    if name != "berth_session":
        return None
    return value, {a.partition("=")[0].lower(): a.partition("=")[2] for a in attributes}


def whoami(server, cookie):
    r = server.get("/ui/api/whoami", headers={"Cookie": f"berth_session={cookie}"})
    assert r.status == 200, r
    return r.json()["user"]


def login_form(user, password):
    return urllib.parse.urlencode({"username": user, "password": password}).encode()


def query_of(url, key):
    values = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query).get(key)
    return values[0] if values else None


def link_of(resp):
    """The URL of a Link: <URL>; rel="next" header, or None."""
    link = resp.header("Link")
    return link[link.index("<") + 1:link.index(">")] if link else None


def push_image(server, repo, tag, headers, layers=None):
    """Blobs (a POST each) and the manifest; returns the manifest's digest."""
    image = bt.image_of(layers or [os.urandom(200)])
    for data in image["blobs"].values():
        r = server.request("POST", f"/v2/{repo}/blobs/uploads/?digest={bt.sha256_digest(data)}", body=data,
                           headers={**headers, "Content-Type": "application/octet-stream"})
        assert r.status == 201, (repo, r)
    r = server.request("PUT", f"/v2/{repo}/manifests/{tag or image['digest']}", body=image["manifest"],
                       headers={**headers, "Content-Type": bt.OCI_MANIFEST})
    assert r.status == 201, (repo, r)
    return image["digest"]


class AuthReplica(bt.Replica):
    """A replica whose GET /v2/ answers 401 to the anonymous readiness probe: ready too."""

    def wait_ready(self, timeout=bt.READY_TIMEOUT):
        def check():
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.replica_id} exited: {self.stderr()[-2000:]}")
            try:
                return self.request("GET", "/v2/", timeout=2).status in (200, 401)
            except (OSError, http.client.HTTPException):
                return False
        bt.poll(check, timeout, what=f"{self.replica_id} answering")


# --------------------------------------------------------------------------- finding 15, 16 (Origin)


class Paging(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        b = bt.Berth()
        cls.b = b
        cls.addClassCleanup(b.cleanup)
        bt.write_htpasswd(os.path.join(b.tmp, "htpasswd"), PASSWORDS)
        b.config = {"auth": {"htpasswd": "htpasswd", "rules": RULES}, "log": {"access": False}}
        b.ready_statuses = (401,)
        b.start()
        admin = auth("admin")
        cls.repos = ["alice/a1", "alice/a2", "bob/b1", "bob/b2", "bob/b3", "carol/c1", "public/p1", "public/p2",
                     "zed/z1"]
        for repo in cls.repos:
            push_image(b, repo, "v1", admin)
        # Lineage: public/base, and images built on it in alice/d, bob/hidden (70) and public/d.
        base_layer = os.urandom(300)
        push_image(b, "public/base", "1", admin, [base_layer])
        cls.derived = {repo: push_image(b, repo, "1", admin, [base_layer, os.urandom(100)])
                       for repo in ("alice/d", "public/d")}
        extra = os.urandom(100)
        push_image(b, "bob/hidden", "0", admin, [base_layer, extra])
        for i in range(1, HIDDEN):
            image = bt.image_of([base_layer, extra])
            config = image["config"]
            r = b.request("POST", f"/v2/bob/hidden/blobs/uploads/?digest={bt.sha256_digest(config)}", body=config,
                          headers={**admin, "Content-Type": "application/octet-stream"})
            assert r.status == 201, r
            r = b.request("PUT", f"/v2/bob/hidden/manifests/{i}", body=image["manifest"],
                          headers={**admin, "Content-Type": bt.OCI_MANIFEST})
            assert r.status == 201, r
        cls.all_repos = sorted(cls.repos + ["public/base", "alice/d", "public/d", "bob/hidden"])

    def visible(self, who):
        return [r for r in self.all_repos if r.startswith("public/") or (who and r.startswith(f"{who}/"))]

    def assertCursor(self, cursor, names, what):
        """A cursor is a name of this answer or opaque ("~..."); never one the caller may not see."""
        if cursor is None:
            return
        self.assertTrue(cursor in names or cursor.startswith("~"),
                        f"{what}: cursor {cursor!r} is neither in the answer {names} nor opaque")

    def test_15a_catalog_link_names_only_what_the_caller_sees(self):
        for who in ("alice", "bob"):
            for n in (1, 2):
                with self.subTest(who=who, n=n):
                    collected, path = [], f"/v2/_catalog?n={n}"
                    for _ in range(100):
                        r = self.b.get(path, headers=auth(who))
                        self.assertEqual(r.status, 200, r)
                        names = r.json()["repositories"]
                        collected += names
                        link = link_of(r)
                        self.assertCursor(query_of(link, "last") if link else None, names, f"GET {path}")
                        head = self.b.head(path, headers=auth(who))
                        self.assertEqual(head.status, 200, head)
                        head_link = link_of(head)
                        self.assertCursor(query_of(head_link, "last") if head_link else None, names, f"HEAD {path}")
                        if not link:
                            break
                        path = bt.location_path(link)
                    self.assertEqual(sorted(collected), self.visible(who))
                    self.assertEqual(len(collected), len(set(collected)), collected)

    def follow_namespaces(self, endpoint, who, n):
        collected, last = [], None
        for _ in range(100):
            path = f"{endpoint}?n={n}" + (f"&last={urllib.parse.quote(last, safe='')}" if last is not None else "")
            r = self.b.get(path, headers=auth(who))
            self.assertEqual(r.status, 200, (path, r))
            doc = r.json()
            names = [item["namespace"] for item in doc["namespaces"]]
            collected += names
            self.assertCursor(doc["next"], names, f"{path} as {who}: next")
            link = link_of(r)
            if link:
                self.assertCursor(query_of(link, "last"), names, f"{path} as {who}: Link")
            if doc["next"] is None:
                return collected
            last = doc["next"]
        self.fail(f"{endpoint} paging does not end")

    def test_15b_usage_and_ui_namespaces_name_only_visible_namespaces(self):
        expected = {"alice": ["alice", "public"], "bob": ["bob", "public"], None: ["public"]}
        for endpoint, callers in (("/_berth/v1/usage", ("alice", "bob")),
                                  ("/ui/api/namespaces", ("alice", "bob", None))):
            for who in callers:
                for n in (1, 2):
                    with self.subTest(endpoint=endpoint, who=who or "anonymous", n=n):
                        collected = self.follow_namespaces(endpoint, who, n)
                        self.assertEqual(sorted(collected), expected[who])
                        self.assertEqual(len(collected), len(set(collected)), collected)

    def test_15c_guard_ui_repositories_next(self):
        # Guard: with fewer than the 20,000 names one page reads, the old binary held this too.
        for who in ("alice", None):
            for n in (1, 3):
                with self.subTest(who=who or "anonymous", n=n):
                    collected, last = [], None
                    for _ in range(100):
                        path = f"/ui/api/repositories?n={n}"
                        if last is not None:
                            path += f"&last={urllib.parse.quote(last, safe='')}"
                        r = self.b.get(path, headers=auth(who))
                        self.assertEqual(r.status, 200, r)
                        names = [e["name"] for e in r.json()["repositories"]]
                        collected += names
                        self.assertCursor(r.json()["next"], names, path)
                        last = r.json()["next"]
                        if last is None:
                            break
                    self.assertEqual(sorted(collected), self.visible(who))
                    self.assertEqual(len(collected), len(set(collected)))

    def test_15d_lineage_next_names_only_visible_images(self):
        found, path = [], "/_berth/v1/lineage?repository=public/base&reference=1&n=1"
        for _ in range(200):
            r = self.b.get(path, headers=auth("alice"))
            self.assertEqual(r.status, 200, (path, r))
            doc = r.json()
            page = [f"{d['repository']}@{d['digest']}" for d in doc["derived"]]
            found += page
            self.assertEqual([p for p in page if p.startswith("bob/")], [])
            for url in (doc["next"], link_of(r), link_of(self.b.head(path, headers=auth("alice")))):
                if url:
                    self.assertCursor(query_of(url, "last"), page, f"{path}: {url}")
            if doc["next"] is None:
                break
            path = doc["next"]
        self.assertEqual(sorted(found), sorted(f"{repo}@{digest}" for repo, digest in self.derived.items()))
        self.assertEqual(len(found), len(set(found)))

    def test_15e_a_sealed_cursor_stays_sealed_on_an_empty_page(self):
        """A lineage cursor sealed over bob/hidden, given as last= to a listing asked for n=0
        (nothing read, so the page ends where it began): the next page starts at a cursor, not
        at the name it stands for (helper review of e6a469d)."""
        sealed = None
        path = "/_berth/v1/lineage?repository=public/base&reference=1&n=1"
        for _ in range(200):
            doc = self.b.get(path, headers=auth("alice")).json()
            last = query_of(doc["next"], "last") if doc["next"] else None
            if last and last.startswith("~"):
                sealed = last
                break
            if not doc["next"]:
                break
            path = doc["next"]
        self.assertTrue(sealed, "the guard: alice's lineage pages hold a sealed cursor")
        quoted = urllib.parse.quote(sealed, safe="")
        for who in ("alice", None):
            for path in (f"/v2/_catalog?n=0&last={quoted}", f"/_berth/v1/usage?n=0&last={quoted}",
                         f"/ui/api/namespaces?n=0&last={quoted}"):
                if who is None and not path.startswith("/ui/"):
                    continue
                for method in ("GET", "HEAD"):
                    with self.subTest(who=who, path=path, method=method):
                        r = self.b.request(method, path, headers=auth(who))
                        self.assertEqual(r.status, 200, r)
                        self.assertNotIn(b"bob/", r.body, r)
                        # A sealed cursor (~ and base64url ciphertext) may spell "bob" by chance:
                        # only what is not sealed is looked at.
                        link = re.sub(r"last=~[A-Za-z0-9_-]+", "last=~", urllib.parse.unquote(r.header("Link") or ""))
                        self.assertNotIn("bob", link, r)

    def test_16a_cross_site_sign_in_is_refused(self):
        host = f"127.0.0.1:{self.b.port}"
        for headers in ({"Sec-Fetch-Site": "cross-site"},
                        {"Sec-Fetch-Site": "cross-site", "Origin": f"http://{host}"},
                        {"Origin": "http://evil.example"},
                        {"Origin": "http://evil.example", "Sec-Fetch-Site": "same-origin"},
                        {"Origin": f"http://127.0.0.1:{self.b.port + 1 if self.b.port < 65535 else 1}"},
                        {"Origin": f"http://localhost:{self.b.port}"}):
            for user in ("alice", "admin"):
                with self.subTest(headers=headers, user=user):
                    r = self.b.request("POST", "/ui/login", body=login_form(user, PASSWORDS[user]),
                                       headers={**FORM, **headers})
                    self.assertEqual(r.status, 403, r)
                    self.assertIsNone(r.header("Set-Cookie"), r.headers)
        # Guard: a same-origin sign-in, and one without either header (scripts), still work.
        for headers in ({"Origin": f"http://{host}", "Sec-Fetch-Site": "same-origin"}, {}):
            r = self.b.request("POST", "/ui/login", body=login_form("alice", "alice-pw"), headers={**FORM, **headers})
            self.assertEqual(r.status, 303, r)
            cookie = cookie_of(r)
            self.assertIsNotNone(cookie, r.headers)
            self.assertEqual(whoami(self.b, cookie[0]), "alice")


# --------------------------------------------------------------------------- finding 9


class TokenScopedUi(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        b = bt.Berth()
        cls.b = b
        cls.addClassCleanup(b.cleanup)
        cls.key = bt.gen_rsa_key(os.path.join(b.tmp, "issuer.key"))
        bt.public_key(cls.key, os.path.join(b.tmp, "issuer.pub"))
        b.config = {"auth": {"token": {"verify_keys": ["issuer.pub"], "issuer": "ext-issuer", "service": "berth"}}}
        b.ready_statuses = (200, 401)
        b.start()
        repos = ("public/app", "secret/payroll", "other/thing")
        pusher = bt.bearer(cls.token("ci", [(repo, ["pull", "push"]) for repo in repos]))
        cls.digests = {repo: push_image(b, repo, "v1", pusher) for repo in repos}
        cls.viewer = bt.bearer(cls.token("viewer", [("public/app", ["pull"])]))

    @classmethod
    def token(cls, sub, access, catalog=False):
        now = int(time.time())
        claims = {"iss": "ext-issuer", "sub": sub, "aud": "berth", "iat": now, "nbf": now - 1, "exp": now + 900,
                  "jti": os.urandom(8).hex(),
                  "access": [{"type": "repository", "name": name, "actions": actions} for name, actions in access]}
        if catalog:
            claims["access"].append({"type": "registry", "name": "catalog", "actions": ["*"]})
        return bt.make_jwt(claims, cls.key, "RS256")

    def test_9_a_token_scoped_to_public_app_sees_only_public_app(self):
        r = self.b.get("/v2/public/app/manifests/v1", headers={**self.viewer, "Accept": bt.OCI_MANIFEST})
        self.assertEqual(r.status, 200, r)  # the token itself works
        names, last = [], None
        for _ in range(20):
            path = "/ui/api/repositories?n=1" + (f"&last={urllib.parse.quote(last, safe='')}" if last else "")
            r = self.b.get(path, headers=self.viewer)
            self.assertEqual(r.status, 200, r)
            names += [e["name"] for e in r.json()["repositories"]]
            self.assertNotIn(b"secret", r.body)
            last = r.json()["next"]
            if last is None:
                break
        self.assertEqual(names, ["public/app"])
        r = self.b.get("/ui/api/repository?name=public/app", headers=self.viewer)
        self.assertEqual(r.status, 200, r)
        for repo in ("secret/payroll", "other/thing"):
            for path in (f"/ui/api/repository?name={repo}", f"/ui/api/manifest?name={repo}&reference=v1",
                         f"/ui/api/manifest?name={repo}&reference={self.digests[repo]}"):
                for method in ("GET", "HEAD"):
                    with self.subTest(path=path, method=method):
                        r = self.b.request(method, path, headers=self.viewer)
                        self.assertEqual(r.status, 404, r)
                        if method == "GET":
                            self.assertEqual(r.error_codes(), ["NAME_UNKNOWN"], r)
                        self.assertNotIn(self.digests[repo].encode(), r.body)

    def test_9_a_catalog_grant_lists_only_what_the_token_may_pull(self):
        """With no rules, a token's access list is all there is: its registry:catalog:* grant lists
        the repositories it may pull, not every name ("no rules" opens all only to Basic users)."""
        lister = bt.bearer(self.token("viewer", [("public/app", ["pull"])], catalog=True))
        r = self.b.get("/v2/_catalog", headers=lister)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json(), {"repositories": ["public/app"]})
        r = self.b.get("/_berth/v1/usage", headers=lister)
        self.assertEqual(r.status, 200, r)
        self.assertEqual([x["namespace"] for x in r.json()["namespaces"]], ["public"], r)
        self.assertEqual(self.b.get("/v2/_catalog", headers=self.viewer).status, 401, "no catalog grant, no listing")


# --------------------------------------------------------------------------- finding 16 (cluster)


class ClusterSessions(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cluster = bt.Cluster(2, config={"auth": {"htpasswd": "htpasswd", "rules": RULES}, "log": {"access": True},
                                        "backup": {"target": "backups", "secret_file": "backup-secret"}})
        for r in cluster.replicas:
            r.cleanup()
        cluster.replicas = [AuthReplica(cluster, i) for i in range(2)]
        cls.cluster = cluster
        cls.addClassCleanup(cluster.cleanup)
        for r in cluster:
            bt.write_htpasswd(os.path.join(r.tmp, "htpasswd"), PASSWORDS)
            with open(os.path.join(r.tmp, "backup-secret"), "w") as f:
                f.write("backup-secret-0123456789abcdef\n")
        cluster.start()
        cls.a, cls.b = cluster[0], cluster[1]
        push_image(cls.a, "alice/app", "v1", auth("alice"))

    def sign_in(self, replica, user):
        r = replica.request("POST", "/ui/login", body=login_form(user, PASSWORDS[user]), headers=FORM)
        self.assertEqual(r.status, 303, r)
        cookie = cookie_of(r)
        self.assertIsNotNone(cookie, r.headers)
        return cookie[0]

    def old_keys(self):
        """The key of the old derivation, for the secret as written to its file and as trimmed."""
        return [hashlib.sha256(b"berth ui session\n" + secret.encode()).digest()
                for secret in (self.cluster.secret, self.cluster.secret + "\n")]

    def test_16b_session_mac_is_not_keyed_by_the_peer_secret(self):
        cookie = self.sign_in(self.a, "alice")
        self.assertEqual(whoami(self.a, cookie), "alice")
        payload, mac = cookie.rsplit(".", 1)
        for key in self.old_keys():
            old = base64.urlsafe_b64encode(hmac.new(key, payload.encode(), hashlib.sha256).digest()).rstrip(b"=")
            self.assertNotEqual(mac, old.decode(), "the cookie's MAC is keyed by SHA-256 of the peer secret")

    def test_16c_a_cookie_forged_with_the_old_key_signs_nobody_in(self):
        for user in ("admin", "alice"):
            payload = bt.b64url(json.dumps({"e": int(time.time()) + 600, "g": [], "n": "", "u": user},
                                           separators=(",", ":")))
            for key in self.old_keys():
                forged = payload + "." + bt.b64url(hmac.new(key, payload.encode(), hashlib.sha256).digest())
                for replica in (self.a, self.b):
                    with self.subTest(user=user, replica=replica.replica_id):
                        self.assertIsNone(whoami(replica, forged))
                        r = replica.get("/ui/api/repository?name=alice/app",
                                        headers={"Cookie": f"berth_session={forged}"})
                        self.assertEqual(r.status, 401, r)

    def test_16d_cluster_view_sends_no_backup_secret_to_peers(self):
        cookie = self.sign_in(self.a, "alice")

        def both_reachable():
            r = self.a.get("/ui/api/cluster", headers={"Cookie": f"berth_session={cookie}"})
            self.assertEqual(r.status, 200, r)
            replicas = r.json()["replicas"]
            self.assertEqual(len(replicas), 2, replicas)
            return all(x["reachable"] for x in replicas)
        bt.poll(both_reachable, 20, 0.2, "the cluster view reaching the peer")
        self.assertTrue(both_reachable())
        marker = f"marker-{os.urandom(4).hex()}"
        self.b.get(f"/v2/{marker}/tags/list", headers=auth("alice"))

        def lines():
            out = []
            for line in self.b.stderr().splitlines():
                try:
                    doc = json.loads(line)
                except ValueError:
                    continue
                if isinstance(doc, dict) and doc.get("msg") == "request":
                    out.append(doc)
            return out
        bt.poll(lambda: any(marker in d.get("target", "") for d in lines()), 10, what="marker in the peer's log")
        asked = [d for d in lines() if d.get("target", "").startswith("/_berth/v1/backup")]
        self.assertEqual(asked, [], "the cluster view asked a peer's /_berth/v1/backup (with the backup secret)")


# --------------------------------------------------------------------------- finding 16 (token lifetime)


class TokenSessionExpiry(unittest.TestCase):
    ISSUER = "https://issuer.example.test"

    @classmethod
    def setUpClass(cls):
        b = bt.Berth()
        cls.b = b
        cls.addClassCleanup(b.cleanup)
        cls.key = bt.gen_rsa_key(os.path.join(b.tmp, "sa.key"))
        with open(os.path.join(b.tmp, "jwks.json"), "w") as f:
            json.dump({"keys": [bt.public_jwk(cls.key, "k1")]}, f)
        bt.write_htpasswd(os.path.join(b.tmp, "htpasswd"), {"admin": "admin-pw"})
        b.config = {"auth": {"htpasswd": "htpasswd",
                             "oidc": [{"issuer": cls.ISSUER, "audiences": ["berth"], "jwks_file": "jwks.json"}],
                             "rules": RULES}}
        b.ready_statuses = (401,)
        b.start()

    def sign_in_with_token(self, lifetime):
        claims = bt.service_account_claims("team-a", "builder", self.ISSUER, lifetime=lifetime)
        token = bt.make_jwt(claims, self.key, "RS256", header={"kid": "k1"})
        r = self.b.request("POST", "/ui/login", body=login_form("sa", token), headers=FORM)
        self.assertEqual(r.status, 303, r)
        cookie = cookie_of(r)
        self.assertIsNotNone(cookie, r.headers)
        return cookie, claims["exp"]

    def test_16e_session_ends_with_the_token(self):
        (value, attributes), _ = self.sign_in_with_token(300)
        self.assertLessEqual(int(attributes["max-age"]), 301, attributes)
        self.assertIsNotNone(whoami(self.b, value))
        (value, attributes), exp = self.sign_in_with_token(20)
        self.assertLessEqual(int(attributes["max-age"]), 21, attributes)
        self.assertIsNotNone(whoami(self.b, value), "a fresh token's session signs in")
        bt.poll(lambda: whoami(self.b, value) is None, 45, 0.5, "the session refused once its token expired")
        self.assertGreaterEqual(time.time(), exp - 2, "the session ended well before its token")


if __name__ == "__main__":
    unittest.main(verbosity=2)
