#!/usr/bin/env python3
"""The security review of the restructure (commit ae42084 fixed it), one class per finding, each made
from the reviewer's reproduction script (probe_*.py, t_export_*.py); the fakes berth talks to are
tests/lib/fakehttp.py servers.

1. Peers are asked to promise an immutable tag only after every other check: a push to prod/app:v1
   refused for its base (base_images) leaves the tag free, so the good image then takes it (201), and
   the fake peer, which promises a tag to the first digest asked as a replica does, never hears of the
   refused digest; a manifest PUT that a repository quota refuses asks the peer nothing. Guard: the
   pushes that pass are claimed at the peer.
2. `berth import --url` / `export --url` send --username/--password-file only to a token realm on
   --url's own scheme, host and port, or under a --token-realm: a registry (berth, auth.token.realm
   naming a realm on another port that passes the request on to berth's own endpoint) whose
   challenge names that realm gets nothing, the realm is not asked, the command fails; with
   `--token-realm http://127.0.0.1:Q/` the realm is asked and both commands work. Through the
   proxy: an https upstream (ca_file, no token_realms) whose challenge names an http realm sends
   that realm nothing and the pull fails; the guard, an https upstream naming an https realm on
   another port, is answered with a token (any TLS realm will do without token_realms).
3. The web UI's manifest view shows an image config only where the repository holds it: a mirrored
   repository whose (hostile) upstream manifest names alice's config digest, and mallory's sparse
   repository whose manifest does, show the config's descriptor and none of its fields (no env, no
   secret). Guard: alice's own view of her image shows the env with the secret.
4. The node agent does not carry a caller's Authorization across a redirect to another host: a
   replica answering /auth/token with a 307 to another port; the other port is asked, without it.
5. A request refused before routing on a kept-alive connection after alice's authenticated request,
   431 (head over limits.max_header_bytes) and 429 (limits.requests_per_second_per_client), is
   logged with no principal and its own or no method and target, and counted under route "unknown"
   in berth_http_requests_total, not as alice's request.
6. /v2/_catalog with a token of berth's own endpoint: one scoped to repository:alice/app:pull alone
   is refused (401, the challenge naming registry:catalog:*), it lists nothing. The reviewer's
   finding, that a token with registry:catalog:* beside alice/app lists alice/secret too, is kept as
   designed: the catalog grant is the grant to list the names alice's rules let her pull (as
   test_auth.test_catalog_filtered holds), and a job that must not see them is not given it; the
   same for /_berth/v1/usage, the other listing behind that grant. That holds for berth's own
   tokens only: another token server's (token.verify_keys) subject named alice lists what its
   access list grants (alice/app), and usage shows no namespace it cannot see whole.
7. `berth export --url` gives up on a blob body that trickles (1 byte every 2 s): it fails, saying
   the body came too slowly, within 90 s (the allowance is a minute plus a second a MiB). Opt-in,
   BERTH_SLOW_TESTS=1: it takes a minute, past what this file may take otherwise.

The reviewer's probes reproduced each finding against the binary they reviewed. There is no binary
without the fixes here, so each test was also seen failing by making it expect what the finding
said (the fake peer holding the refused digest's promise, the realm passed with --token-realm or
token_realms, ...), the evidence that what it looks at would show the finding.
"""

import json
import os
import shutil
import sys
import tempfile
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
import fakehttp  # noqa: E402

OCTETS = {"Content-Type": "application/octet-stream"}
INDEX = "application/vnd.oci.image.index.v1+json"
EMPTY_INDEX = json.dumps({"schemaVersion": 2, "mediaType": INDEX, "manifests": []}).encode()
ACCEPT = {"Accept": f"{bt.OCI_MANIFEST}, {INDEX}"}
PEER_SECRET = "0123456789abcdef0123"
ALICE = bt.basic_auth("alice", "alice-pw")


def push(b, repo, ref, img, headers=None):
    """Blobs by single POST, then the manifest; the manifest PUT's answer."""
    for digest, data in img["blobs"].items():
        r = b.request("POST", f"/v2/{repo}/blobs/uploads/?digest={digest}", body=data, headers={**(headers or {}), **OCTETS})
        assert r.status == 201, (repo, r)
    return b.request("PUT", f"/v2/{repo}/manifests/{ref}", body=img["manifest"],
                     headers={**(headers or {}), "Content-Type": bt.OCI_MANIFEST})


def fake(test, answer, **kw):
    """A fakehttp.FakeServer closed on the test's (or class's) cleanup; fails it on an answer that raised."""
    server = fakehttp.FakeServer(answer, **kw)
    add = test.addClassCleanup if isinstance(test, type) else test.addCleanup
    add(lambda: server.errors and print(f"{server.name} answers raised: {server.errors}", file=sys.stderr))
    add(server.close)
    return server


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


# --------------------------------------------------------------------------- finding 1


class FakePeer:
    """A peer as the claim protocol sees it: it promises each tag to the first digest asked, as a
    replica does (replication/claims.cpp), and answers everything else 503."""

    def __init__(self, test):
        self.promised, self.claims = {}, []
        self.server = fake(test, self.answer, name="peer")

    def answer(self, req):
        if req.method == "POST" and req.path == "/_berth/v1/claim":
            claim = json.loads(req.body)
            self.claims.append((claim["repo"], claim["tag"], claim["digest"]))
            holder = self.promised.setdefault((claim["repo"], claim["tag"]), claim["digest"])
            return fakehttp.json_reply({"granted": holder == claim["digest"], "digest": holder},
                                       headers={"Berth-Protocol": req.header("Berth-Protocol") or "1-3"})
        return fakehttp.json_reply({}, 503)


class ClaimsComeLast(bt.ServerTest):
    @classmethod
    def setUpClass(cls):
        cls.peer = FakePeer(cls)
        super().setUpClass()

    @classmethod
    def configure(cls, b):
        write(os.path.join(b.tmp, "peer-secret"), PEER_SECRET + "\n")
        return {"replica_id": "r1", "log": {"access": False},
                "replication": {"peers": [f"127.0.0.1:{cls.peer.server.port}"], "secret_file": "peer-secret",
                                "write_quorum": "local", "quorum_timeout_seconds": 3},
                "policies": [{"repositories": ["prod/**"], "immutable_tags": True, "base_images": ["base/os:*"]},
                             {"repositories": ["quota/**"], "immutable_tags": True}],
                "quotas": [{"namespaces": "quota", "max_repositories": 1}]}

    def test_push_refused_for_its_base_leaves_the_tag_free(self):
        base_layers = [os.urandom(700)]
        self.assertEqual(push(self.b, "base/os", "1", bt.image_of(base_layers)).status, 201)
        bad = bt.image_of([os.urandom(600)])
        r = push(self.b, "prod/app", "v1", bad)
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.error_codes(), ["DENIED"], r)
        good = bt.image_of(base_layers + [os.urandom(500)])
        r = push(self.b, "prod/app", "v1", good)
        self.assertEqual(r.status, 201, f"the good image to the tag a refused push was for: {r}")
        self.assertEqual(self.b.get("/v2/prod/app/manifests/v1", headers=ACCEPT).header("Docker-Content-Digest"),
                         good["digest"])
        claims = [c for c in self.peer.claims if c[0] == "prod/app"]
        self.assertEqual(claims, [("prod/app", "v1", good["digest"])],
                         f"claims at the peer (the refused push was {bad['digest']})")

    def test_push_refused_by_a_quota_asks_no_claim(self):
        img = bt.make_image((300,))
        self.assertEqual(push(self.b, "quota/a", "v1", img).status, 201)
        self.assertIn(("quota/a", "v1", img["digest"]), self.peer.claims, "the guard: a push that passes is claimed")
        r = self.b.put_manifest("quota/b", "v1", EMPTY_INDEX, INDEX)
        self.assertEqual(r.status, 403, r)
        self.assertIn("quota exceeded", r.json()["errors"][0]["message"], r)
        self.assertEqual([c for c in self.peer.claims if c[0] == "quota/b"], [], "a claim for a push the quota refused")


# --------------------------------------------------------------------------- finding 2


class CommandsAskOnlyTheirOwnRealm(unittest.TestCase):
    """berth with auth.token, its challenge naming a realm on another port: a fake that passes the
    request on to berth's own /auth/token, so a token it hands out is berth's."""

    @classmethod
    def setUpClass(cls):
        def forward(req):
            auth = {"Authorization": req.header("Authorization")} if req.header("Authorization") else {}
            r = cls.b.get("/auth/token?" + urllib.parse.urlsplit(req.target).query, headers=auth)
            return r.status, r.body, {"Content-Type": "application/json"}
        cls.realm = fake(cls, forward, name="realm")

        def configure(b):
            bt.gen_ec_key(os.path.join(b.tmp, "token.key"))
            return {"log": {"access": False}, "auth": {
                "htpasswd": "htpasswd", "rules": [{"repository": "site/**", "principals": ["user:ci"],
                                                   "actions": ["pull", "push"]}],
                "token": {"signing_key": "token.key", "issuer": "berth", "service": "berth",
                          "realm": f"{cls.realm.url}/token"}}}
        cls.b = bt.serve(cls.addClassCleanup, configure, passwords={"ci": "ci-pw"})
        cls.url = f"http://127.0.0.1:{cls.b.port}"
        cls.password = write(os.path.join(cls.b.tmp, "ci-password"), "ci-pw\n")
        cls.pushed = bt.make_image((1500,))
        assert push(cls.b, "site/pushed", "v1", cls.pushed, bt.basic_auth("ci", "ci-pw")).status == 201

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="berth-realm-", dir=self.b.tmp)
        self.before = len(self.realm.seen())

    def cli(self, command, *args, realm=None):
        extra = ["--token-realm", realm] if realm else []
        return bt.run_cli(command, "--url", self.url, "--username", "ci", "--password-file", self.password, *extra,
                          *args, timeout=60)

    def asked(self):
        return self.realm.seen()[self.before:]

    def test_a_realm_on_another_port_is_not_asked(self):
        img = bt.make_image((2000,))
        bt.oci_layout(os.path.join(self.tmp, "layout"), {"site/refused:v1": img})
        r = self.cli("import", os.path.join(self.tmp, "layout"))
        self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
        r2 = self.cli("export", "site/pushed:v1", "--to", os.path.join(self.tmp, "out"))
        self.assertNotEqual(r2.returncode, 0, r2.stdout + r2.stderr)
        self.assertIn("token realm", r2.stderr)
        self.assertEqual(self.asked(), [], "the realm on another port was asked")
        ci = {**bt.basic_auth("ci", "ci-pw"), **ACCEPT}
        self.assertEqual(self.b.get(f"/v2/site/refused/manifests/{img['digest']}", headers=ci).status, 404)

    def test_a_realm_named_by_token_realm_is_asked(self):
        img = bt.make_image((2000,))
        bt.oci_layout(os.path.join(self.tmp, "layout"), {"site/app:v1": img})
        r = self.cli("import", os.path.join(self.tmp, "layout"), realm=f"{self.realm.url}/")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        asked = self.asked()
        self.assertTrue(asked, "the realm named by --token-realm was not asked")
        self.assertEqual({x.header("Authorization") for x in asked}, {bt.basic_auth("ci", "ci-pw")["Authorization"]})
        r = self.b.get("/v2/site/app/manifests/v1", headers={**bt.basic_auth("ci", "ci-pw"), **ACCEPT})
        self.assertEqual(r.header("Docker-Content-Digest"), img["digest"], r)
        out = os.path.join(self.tmp, "out")
        r = self.cli("export", "site/pushed:v1", "--to", out, realm=f"{self.realm.url}/")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for digest in [self.pushed["digest"], *self.pushed["blobs"]]:
            self.assertTrue(os.path.isfile(os.path.join(out, "blobs", "sha256", digest.split(":")[1])), digest)


class HttpsUpstreamKeepsItsCredentialsOffHttp(unittest.TestCase):
    """proxy.upstreams with ca_file, username and password_file and no token_realms."""

    def test_an_http_realm_is_never_sent_an_https_upstreams_credentials(self):
        certs = tempfile.mkdtemp(prefix="berth-certs-")
        self.addCleanup(shutil.rmtree, certs, True)
        ca, ca_key = bt.make_ca(certs)
        tls = bt.make_cert(certs, "fake", ca, ca_key)
        img = bt.make_image((900,))
        token = lambda req: fakehttp.json_reply({"token": "T1", "expires_in": 300})  # noqa: E731
        clear_realm, sealed_realm = fake(self, token, name="http-realm"), fake(self, token, tls=tls, name="https-realm")

        def registry(realm):
            def answer(req):
                if req.header("Authorization") != "Bearer T1":
                    return fakehttp.json_reply({"errors": [{"code": "UNAUTHORIZED"}]}, 401, {"WWW-Authenticate":
                                               f'Bearer realm="{realm.url}/token",service="fake",scope="repository:app:pull"'})
                if req.path == "/v2/app/manifests/v1":
                    return 200, img["manifest"], {"Content-Type": bt.OCI_MANIFEST, "Docker-Content-Digest": img["digest"]}
                blob = img["blobs"].get(req.path.rsplit("/", 1)[-1])
                return (200, blob, OCTETS) if "/blobs/" in req.path and blob else fakehttp.json_reply({}, 404)
            return answer
        clear_up = fake(self, registry(clear_realm), tls=tls, name="clear-upstream")
        sealed_up = fake(self, registry(sealed_realm), tls=tls, name="sealed-upstream")

        def configure(b):
            write(os.path.join(b.tmp, "up-password"), "up-pw\n")
            keys = {"ca_file": ca, "username": "ci", "password_file": "up-password"}
            return {"log": {"access": False}, "proxy": {"upstreams": [
                {"host": "clear.test", "url": clear_up.url, **keys}, {"host": "sealed.test", "url": sealed_up.url, **keys}]}}
        b = bt.serve(self.addCleanup, configure)
        r = b.get("/v2/clear.test/app/manifests/v1", headers=ACCEPT)
        self.assertNotEqual(r.status, 200, r)
        self.assertTrue(clear_up.seen("/v2/app/"), "the https upstream was not asked at all")
        self.assertEqual(clear_realm.seen(), [], "an https upstream's credentials went to an http realm")
        r = b.get("/v2/sealed.test/app/manifests/v1", headers=ACCEPT)
        self.assertEqual(r.status, 200, f"the guard, an https realm: {r}")
        self.assertEqual(r.header("Docker-Content-Digest"), img["digest"])
        self.assertEqual({x.header("Authorization") for x in sealed_realm.seen()}, {bt.basic_auth("ci", "up-pw")["Authorization"]})
        self.assertEqual(clear_realm.seen(), [])


# --------------------------------------------------------------------------- finding 3


class ConfigShownOnlyWhereHeld(unittest.TestCase):
    def test_a_manifest_naming_another_repositorys_config(self):
        layer = os.urandom(500)
        cfg = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Env": ["DB_PASSWORD=hunter2"]},
                          "rootfs": {"type": "layers", "diff_ids": [bt.sha256_digest(layer)]}}).encode()
        config = {"mediaType": bt.OCI_CONFIG, "digest": bt.sha256_digest(cfg), "size": len(cfg)}
        evil = json.dumps({"schemaVersion": 2, "mediaType": bt.OCI_MANIFEST, "config": config, "layers": []}).encode()

        def upstream(req):  # the attacker's: only the manifest, no blob
            if req.path == "/v2/":
                return fakehttp.json_reply({})
            if "/manifests/" in req.path:
                return 200, evil, {"Content-Type": bt.OCI_MANIFEST, "Docker-Content-Digest": bt.sha256_digest(evil)}
            return fakehttp.json_reply({"errors": [{"code": "BLOB_UNKNOWN"}]}, 404)
        up = fake(self, upstream, name="hostile-upstream")
        rules = [{"repository": "alice/**", "principals": ["user:alice"], "actions": ["pull", "push"]},
                 {"repository": "mallory/**", "principals": ["user:mallory"], "actions": ["pull", "push"]},
                 {"repository": "hub.test/**", "principals": ["anonymous", "authenticated"], "actions": ["pull"]}]
        b = bt.serve(self.addCleanup, {"auth": {"htpasswd": "htpasswd", "rules": rules}, "log": {"access": False},
                                       "sparse_manifests": ["mallory/**"], "ui": {"enabled": True},
                                       "proxy": {"upstreams": [{"host": "hub.test", "url": up.url}]}},
                     passwords={"alice": "alice-pw", "mallory": "mallory-pw"})
        img = {"blobs": {bt.sha256_digest(d): d for d in (layer, cfg)}, "manifest": json.dumps({
            "schemaVersion": 2, "mediaType": bt.OCI_MANIFEST, "config": config,
            "layers": [{"mediaType": bt.OCI_LAYER, "digest": bt.sha256_digest(layer), "size": len(layer)}]}).encode()}
        self.assertEqual(push(b, "alice/secret", "v1", img, ALICE).status, 201)

        def view(name, headers=None):
            r = b.get(f"/ui/api/manifest?name={name}&reference=v1", headers=headers or {})
            self.assertEqual(r.status, 200, f"{name}: {r}")
            return r
        r = view("alice/secret", ALICE)
        self.assertEqual(r.json()["config"].get("env"), ["DB_PASSWORD=hunter2"], f"the guard, alice's own image: {r}")

        self.assertEqual(b.get("/v2/hub.test/evil/x/manifests/v1", headers=ACCEPT).status, 200)
        mallory = bt.basic_auth("mallory", "mallory-pw")
        r = b.request("PUT", "/v2/mallory/x/manifests/v1", body=evil, headers={**mallory, "Content-Type": bt.OCI_MANIFEST})
        self.assertEqual(r.status, 201, f"mallory's sparse manifest: {r}")
        for name, headers in (("hub.test/evil/x", {}), ("mallory/x", mallory)):
            r = view(name, headers)
            shown = r.json()["config"]
            self.assertEqual(shown.get("digest"), config["digest"], r)
            self.assertNotIn("env", shown, f"{name}: the config of a blob the repository does not hold: {r}")
            self.assertNotIn(b"hunter2", r.body, name)
            self.assertEqual(b.get(f"/v2/{name}/blobs/{config['digest']}", headers=headers).status, 404, name)


# --------------------------------------------------------------------------- finding 4


class AgentRedirectsLeaveTheCallersCredentials(unittest.TestCase):
    def test_a_replica_redirecting_the_token_request_to_another_host(self):
        other = fake(self, lambda req: fakehttp.json_reply({"token": "stolen"}), name="other-host")

        def replica(req):
            if req.path == "/auth/token":
                return 307, b"", {"Location": f"{other.url}/steal"}
            return fakehttp.json_reply({}) if req.path == "/v2/" else fakehttp.json_reply({}, 404)
        rep = fake(self, replica, name="replica")
        agent = bt.serve(self.addCleanup, {"agent": {"replicas": [rep.url]}, "log": {"access": False}},
                         ready_statuses=(200, 401, 503))
        agent.get("/auth/token?service=berth&scope=repository:alice/x:pull", headers=ALICE)
        self.assertEqual([x.header("Authorization") for x in rep.seen("/auth/token")], [ALICE["Authorization"]],
                         "the guard: the replica is asked with the caller's credentials")
        stolen = other.seen()
        self.assertTrue(stolen, "the redirect was not followed: the test proves nothing")
        credential = ALICE["Authorization"].split()[1]
        for req in stolen:
            self.assertIsNone(req.header("Authorization"), f"{req!r} on another host")
            self.assertFalse([k for k, v in req.headers.items() if credential in v], req.headers)


# --------------------------------------------------------------------------- finding 5


def request_lines(b, status):
    return [x for x in b.log_lines() if x.get("msg") == "request" and x.get("status") == status]


def requests_total(b, status):
    """{route: count} of berth_http_requests_total with this status, once /metrics answers (a rate
    limit may refuse it a while)."""
    def answered():
        r = b.get("/metrics")
        return r.body.decode() if r.status == 200 else None
    out = {}
    for key, value in bt.parse_metrics(bt.poll(answered, 10, what="/metrics answered")).items():
        if key.startswith("berth_http_requests_total{") and f'status="{status}"' in key:
            route = key.split('route="', 1)[1].split('"', 1)[0]
            out[route] = out.get(route, 0) + value
    return out


class RefusedBeforeRoutingIsItsOwnRequest(unittest.TestCase):
    RULES = [{"repository": "alice/**", "principals": ["user:alice"], "actions": ["pull", "push"]}]

    def serve(self, limits):
        return bt.serve(self.addCleanup, {"auth": {"htpasswd": "htpasswd", "rules": self.RULES}, "limits": limits},
                        passwords={"alice": "alice-pw"})

    @staticmethod
    def head(target, *extra):
        lines = [f"GET {target} HTTP/1.1", "Host: x", f"Authorization: {ALICE['Authorization']}", *extra]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    def assertOwnLine(self, line, targets):
        self.assertEqual(line["principal"], "", line)
        self.assertIn((line["method"], line["target"]), targets, line)

    def test_431_after_alices_request(self):
        b = self.serve({"max_header_bytes": 1024})
        with bt.connect(b.port) as s:
            reader = bt.RawReader(s)
            s.sendall(self.head("/v2/alice/app/tags/list"))
            self.assertEqual(reader.read_response()[0], 404)  # alice's: the repository does not exist
            s.sendall(b"DELETE /v2/whatever HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 3000 + b"\r\n\r\n")
            self.assertEqual(reader.read_response()[0], 431)
        line = bt.poll(lambda: request_lines(b, 431), 10, what="the 431's log line")[0]
        self.assertOwnLine(line, [("", ""), ("DELETE", "/v2/whatever")])
        self.assertEqual(request_lines(b, 404)[0]["principal"], "alice", "the guard: alice's request")
        counted = bt.poll(lambda: requests_total(b, 431), 10, what="the 431 counted")
        self.assertEqual(counted, {"unknown": 1}, "berth_http_requests_total{status=\"431\"} by route")

    def test_429_after_alices_request(self):
        b = self.serve({"requests_per_second_per_client": 1})

        def kept_alive_until_429():
            """Requests on one connection until one is refused; None if the first one was."""
            with bt.connect(b.port) as s:
                reader = bt.RawReader(s)
                for n in range(1, 20):
                    s.sendall(self.head(f"/v2/alice/app/tags/list?n={n}"))
                    if reader.read_response()[0] == 429:
                        return n if n > 1 else None
            raise AssertionError("no 429 in 19 requests at 1 a second")
        n = bt.poll(kept_alive_until_429, 15, what="a 429 on a connection after an answered request")
        own, before = (f"/v2/alice/app/tags/list?n={k}" for k in (n, n - 1))
        alices = [x for x in request_lines(b, 404) if x["target"] == before]
        self.assertEqual([x["principal"] for x in alices], ["alice"], "the guard: alice's request before the 429")
        lines = bt.poll(lambda: [x for x in request_lines(b, 429) if x["request_id"] > alices[0]["request_id"]], 10,
                        what="the 429's log line")
        self.assertOwnLine(lines[0], [("", ""), ("GET", own)])
        self.assertEqual([x for x in request_lines(b, 429) if x["principal"]], [], "a 429 logged as someone's")
        counted = requests_total(b, 429)
        self.assertEqual(set(counted), {"unknown"}, "berth_http_requests_total{status=\"429\"} by route")


# --------------------------------------------------------------------------- finding 6


class CatalogNeedsItsOwnGrant(unittest.TestCase):
    def test_a_token_for_one_repository(self):
        def configure(b):
            bt.gen_ec_key(os.path.join(b.tmp, "token.key"))
            bt.public_key(bt.gen_rsa_key(os.path.join(b.tmp, "other.key")), os.path.join(b.tmp, "other.pub"))
            return {"log": {"access": False}, "auth": {
                "htpasswd": "htpasswd", "token": {"signing_key": "token.key", "verify_keys": ["other.pub"],
                                                  "issuer": "berth", "service": "berth"},
                "rules": [{"repository": "alice/**", "principals": ["user:alice"], "actions": ["pull", "push"]}]}}
        b = bt.serve(self.addCleanup, configure, passwords={"alice": "alice-pw"})
        for repo in ("alice/app", "alice/secret"):
            self.assertEqual(push(b, repo, "v1", bt.make_image((200,)), ALICE).status, 201)

        def token(*scopes):
            r = b.get("/auth/token?service=berth&" + "&".join(f"scope={urllib.parse.quote(s)}" for s in scopes),
                      headers=ALICE)
            self.assertEqual(r.status, 200, r)
            return bt.bearer(r.json()["token"])
        for path in ("/v2/_catalog", "/v2/_catalog?n=1", "/v2/_catalog?n=1&last=alice/app"):
            r = b.get(path, headers=token("repository:alice/app:pull"))
            self.assertEqual(r.status, 401, f"{path} with a token for alice/app alone: {r}")
            self.assertNotIn(b"alice/", r.body, r)
            self.assertIn('scope="registry:catalog:*"', r.header("WWW-Authenticate"), r)
        r = b.get("/_berth/v1/usage", headers=token("repository:alice/app:pull"))
        self.assertEqual(r.status, 401, f"usage with a token for alice/app alone: {r}")
        both = token("repository:alice/app:pull", "registry:catalog:*")
        self.assertEqual(b.get("/v2/_catalog", headers=both).json(), {"repositories": ["alice/app", "alice/secret"]},
                         "the guard: the catalog grant lists what alice may pull")
        usage = b.get("/_berth/v1/usage", headers=both)
        self.assertEqual([x["namespace"] for x in usage.json()["namespaces"]], ["alice"], usage)
        # Another token server's (token.verify_keys, the same issuer name) subject "alice" is no
        # principal here: its catalog grant lists what its own access list grants, not alice's rules.
        now = int(time.time())
        claims = {"iss": "berth", "sub": "alice", "aud": "berth", "iat": now, "nbf": now - 1, "exp": now + 300,
                  "access": [{"type": "registry", "name": "catalog", "actions": ["*"]},
                             {"type": "repository", "name": "alice/app", "actions": ["pull"]}]}
        other = bt.bearer(bt.make_jwt(claims, os.path.join(b.tmp, "other.key"), "RS256"))
        self.assertEqual(b.get("/v2/_catalog", headers=other).json(), {"repositories": ["alice/app"]})
        self.assertEqual(b.get("/_berth/v1/usage", headers=other).json()["namespaces"], [])


# --------------------------------------------------------------------------- finding 7


@unittest.skipUnless(os.environ.get("BERTH_SLOW_TESTS") == "1", "a minute long: set BERTH_SLOW_TESTS=1")
class TricklingExportBody(unittest.TestCase):
    def test_export_gives_up_on_a_body_of_a_byte_every_two_seconds(self):
        img = bt.make_image((2000,))

        def registry(req):
            if req.path == "/v2/app/manifests/v1":
                return 200, img["manifest"], {"Content-Type": bt.OCI_MANIFEST, "Docker-Content-Digest": img["digest"]}
            data = img["blobs"].get(req.path.rsplit("/", 1)[-1])
            if "/blobs/" not in req.path or data is None:
                return fakehttp.json_reply({}, 404)

            def trickle():
                for i in range(len(data)):
                    yield data[i:i + 1]
                    if up.stopping.wait(2):
                        return
            return 200, trickle(), {"Content-Length": str(len(data)), **OCTETS}
        up = fake(self, registry, name="trickle")
        out = tempfile.mkdtemp(prefix="berth-trickle-")
        self.addCleanup(shutil.rmtree, out, True)
        started = time.monotonic()
        r = bt.run_cli("export", "--url", up.url, "app:v1", "--to", os.path.join(out, "out"), timeout=150)
        took = time.monotonic() - started
        self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("sent its body too slowly", r.stderr)
        self.assertLess(took, 90, f"gave up after {took:.0f} s")
        self.assertTrue(up.seen("/v2/app/blobs/"), "no blob was asked for")


if __name__ == "__main__":
    unittest.main()
