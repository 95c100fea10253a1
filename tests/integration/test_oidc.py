#!/usr/bin/env python3
"""Identities from trusted token issuers (auth.oidc): Kubernetes service account tokens as the
password of Basic credentials, as a Bearer token on /v2/, and exchanged at the token endpoint;
one rule with ${namespace} gives every namespace its own repositories.

Tokens are minted here with the claim layout of projected service account tokens, signed with
keys the issuer lists in its JWK Set (jwks_file). Every refusal is a 401 or 403 that changes
nothing: the repositories a refused push aimed at stay absent."""

import http.server
import json
import os
import ssl
import subprocess
import sys
import threading
import unittest
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402

ISSUER = "https://kubernetes.default.svc.cluster.local"
RULES = [
    {"repository": "${namespace}/**", "principals": ["group:system:serviceaccounts"], "actions": ["pull", "push"]},
    {"repository": "shared/**", "principals": ["group:system:serviceaccounts:team-a"], "actions": ["pull"]},
    {"repository": "**", "principals": ["user:root"], "actions": ["pull", "push", "delete"]},
]


class OidcTest(bt.ServerTest):
    passwords = {"root": "root-pw"}

    @classmethod
    def configure(cls, b):
        d = b.tmp
        cls.key = bt.gen_rsa_key(os.path.join(d, "sa.key"))
        cls.ec_key = bt.gen_ec_key(os.path.join(d, "sa-ec.key"))
        cls.next_key = bt.gen_ec_key(os.path.join(d, "next.key"))
        cls.stranger = bt.gen_rsa_key(os.path.join(d, "stranger.key"))
        cls.jwks = os.path.join(d, "jwks.json")
        cls.write_jwks([bt.public_jwk(cls.key, "k1"), bt.public_jwk(cls.ec_key, "k-ec")])
        bt.gen_ec_key(os.path.join(d, "token.key"))
        return {"auth": {
            "htpasswd": "htpasswd",
            "token": {"signing_key": "token.key", "issuer": "berth", "service": "berth"},
            "oidc": [{"issuer": ISSUER, "service_accounts": True, "audiences": ["berth"], "jwks_file": "jwks.json",
                      "max_token_lifetime_seconds": 3600}],
            "rules": RULES}}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = bt.basic_auth("root", "root-pw")
        cls.shared = cls.push(cls, "shared/base", cls.root)

    @classmethod
    def write_jwks(cls, keys):
        with open(cls.jwks + ".new", "w") as f:
            json.dump({"keys": keys}, f)
        os.replace(cls.jwks + ".new", cls.jwks)

    def token(self, namespace="team-a", name="builder", key=None, kid="k1", alg="RS256", **overrides):
        claims = bt.service_account_claims(namespace, name, ISSUER)
        claims.update(overrides)
        return bt.make_jwt(claims, key or self.key, alg, header={"kid": kid})

    def push(self, repo, headers):
        """A whole image (blobs, then the manifest by tag); the status of the first refused step, or 201."""
        image = bt.make_image((512,))
        for digest, data in image["blobs"].items():
            r = self.b.request("POST", f"/v2/{repo}/blobs/uploads/?digest={digest}", body=data,
                               headers={**headers, "Content-Type": "application/octet-stream"})
            if r.status != 201:
                return r.status
        r = self.b.request("PUT", f"/v2/{repo}/manifests/v1", body=image["manifest"],
                           headers={**headers, "Content-Type": bt.OCI_MANIFEST})
        return r.status

    def absent(self, repo):
        r = self.b.get(f"/v2/{repo}/tags/list", headers=self.root)
        return r.status == 404

    def test_a_service_account_pushes_in_its_namespace_and_nowhere_else(self):
        sa = bt.basic_auth("anything", self.token())
        self.assertEqual(self.push("team-a/app", sa), 201)
        self.assertEqual(self.push("team-b/app", sa), 403)
        self.assertTrue(self.absent("team-b/app"))
        # team-b's own account may, and may not read team-a's
        other = bt.basic_auth("x", self.token("team-b", "ci", key=self.ec_key, kid="k-ec", alg="ES256"))
        self.assertEqual(self.push("team-b/tool", other), 201)
        self.assertEqual(self.b.get("/v2/team-a/app/manifests/v1", headers=other).status, 403)
        # a group from the token: team-a's accounts may pull shared/**, team-b's may not
        self.assertEqual(self.b.get("/v2/shared/base/manifests/v1", headers=sa).status, 200)
        self.assertEqual(self.b.get("/v2/shared/base/manifests/v1", headers=other).status, 403)

    def test_bearer_on_v2_and_the_token_exchange(self):
        token = self.token("team-c", "deployer")
        self.assertEqual(self.push("team-c/app", bt.bearer(token)), 201)
        self.assertEqual(self.b.get("/v2/team-c/app/manifests/v1", headers=bt.bearer(token)).status, 200)
        # the token endpoint takes it as a password and grants what the identity may do, no more
        scope = urllib.parse.quote("repository:team-c/app:pull,push")
        other = urllib.parse.quote("repository:team-a/app:pull,push")
        r = self.b.get(f"/auth/token?service=berth&scope={scope}&scope={other}",
                       headers=bt.basic_auth("sa", token))
        self.assertEqual(r.status, 200, r.body)
        issued = json.loads(r.body)["token"]
        claims = bt.jwt_claims(issued)
        self.assertEqual(claims["sub"], "system:serviceaccount:team-c:deployer")
        self.assertEqual(claims["access"], [{"type": "repository", "name": "team-c/app", "actions": ["pull", "push"]}])
        self.assertEqual(self.b.get("/v2/team-c/app/manifests/v1", headers=bt.bearer(issued)).status, 200)
        self.assertEqual(self.b.get("/v2/team-a/app/manifests/v1", headers=bt.bearer(issued)).status, 401)

    def test_refusals_change_nothing(self):
        import time
        now = int(time.time())
        header_none = bt.make_jwt(bt.service_account_claims("team-a", "x", ISSUER), alg="none", header={"kid": "k1"})
        public_pem = bt.openssl("pkey", "-in", self.key, "-pubout")
        hs256 = bt.make_jwt(bt.service_account_claims("team-a", "x", ISSUER), public_pem, "HS256",
                            header={"kid": "k1"})
        cases = {
            "expired": self.token(exp=now - 600, iat=now - 1200, nbf=now - 1200),
            "not yet valid": self.token(nbf=now + 600),
            "issued in the future": self.token(iat=now + 600, nbf=now),
            "wrong audience": self.token(aud=["kubernetes"]),
            "wrong issuer": self.token(iss="https://evil.example"),
            "unknown kid": self.token(kid="k-unknown"),
            "a key the issuer does not list": self.token(key=self.stranger),
            "alg none": header_none,
            "HS256 keyed with the public key": hs256,
            "lifetime over the limit": self.token(exp=now + 7200),
            "too large": self.token(padding="x" * 6500),  # over 8 KiB, under the header limit
        }
        for what, token in cases.items():
            for headers in (bt.basic_auth("x", token), bt.bearer(token)):
                with self.subTest(what, scheme=headers["Authorization"].split()[0]):
                    self.assertEqual(self.push(f"team-a/refused-{len(what)}", headers), 401)
                    self.assertTrue(self.absent(f"team-a/refused-{len(what)}"))
        # another namespace's token, valid, is refused there: 403
        self.assertEqual(self.push("team-a/other-ns", bt.basic_auth("x", self.token("team-z", "x"))), 403)
        self.assertTrue(self.absent("team-a/other-ns"))

    def test_the_kubelets_credential_provider_hands_out_the_pods_token(self):
        """berth credential-provider fed the CredentialProviderRequest the kubelet writes
        (k8s.io/kubelet pkg/apis/credentialprovider/v1), its answer used as the pull's credentials."""
        self.assertEqual(self.push("team-p/app", bt.bearer(self.token("team-p", "builder"))), 201)
        registry = f"127.0.0.1:{self.b.port}"
        pod_token = self.token("team-p", "default")
        request = {"apiVersion": "credentialprovider.kubelet.k8s.io/v1", "kind": "CredentialProviderRequest",
                   "image": f"{registry}/team-p/app:v1", "serviceAccountToken": pod_token,
                   "serviceAccountAnnotations": {}}
        r = subprocess.run([bt.BIN, "credential-provider", "--registry", registry], input=json.dumps(request),
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        answer = json.loads(r.stdout)
        self.assertEqual(answer["apiVersion"], "credentialprovider.kubelet.k8s.io/v1")
        self.assertEqual(answer["kind"], "CredentialProviderResponse")
        self.assertIn(answer["cacheKeyType"], ("Image", "Registry", "Global"))
        self.assertEqual(answer["serviceAccountTokenCacheType"], "Pod")
        self.assertRegex(answer["cacheDuration"], r"^\d+s$")
        self.assertLessEqual(int(answer["cacheDuration"][:-1]), 600)
        self.assertEqual(list(answer["auth"]), [registry])
        creds = answer["auth"][registry]
        headers = bt.basic_auth(creds["username"], creds["password"])
        self.assertEqual(self.b.get("/v2/team-p/app/manifests/v1", headers=headers).status, 200)
        self.assertEqual(self.b.get("/v2/team-a/app/manifests/v1", headers=headers).status, 403)
        # a malformed request is refused, with nothing on stdout for the kubelet to misread
        r = subprocess.run([bt.BIN, "credential-provider"], input='{"kind": "Pod"}', capture_output=True, text=True,
                           timeout=30)
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(r.stdout, "")

    def test_rotated_keys_are_read_and_an_unreadable_set_keeps_the_last_good(self):
        self.write_jwks([bt.public_jwk(self.key, "k1"), bt.public_jwk(self.next_key, "k2")])
        rotated = bt.basic_auth("x", self.token("team-r", "ci", key=self.next_key, kid="k2", alg="ES256"))
        # An unknown kid reads the set again, at most every 10 s.
        bt.poll(lambda: self.b.get("/v2/", headers=rotated).status == 200, timeout=30, what="the rotated key")
        self.assertEqual(self.push("team-r/app", rotated), 201)
        with open(self.jwks, "w") as f:
            f.write("<html>issuer down</html>")
        self.assertEqual(self.b.get("/v2/", headers=bt.basic_auth("x", self.token(kid="k-new"))).status, 401)
        fresh = bt.basic_auth("x", self.token("team-r", "other", key=self.next_key, kid="k2", alg="ES256"))
        self.assertEqual(self.b.get("/v2/team-r/app/manifests/v1", headers=fresh).status, 200)
        self.write_jwks([bt.public_jwk(self.key, "k1"), bt.public_jwk(self.ec_key, "k-ec")])


class Issuer:
    """The API server's service account issuer discovery, as kube-apiserver serves it
    (pkg/serviceaccount/openidmetadata.go): /.well-known/openid-configuration naming jwks_uri,
    and /openid/v1/jwks; over HTTPS, for callers presenting the bearer token only."""

    def __init__(self, directory, bearer):
        ca, ca_key = bt.make_ca(directory, "issuer-ca")
        cert, key = bt.make_cert(directory, "issuer", ca, ca_key)
        self.ca, self.bearer, self.keys, self.asked = ca, bearer, [], 0
        self.port = bt.free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        issuer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                issuer.asked += 1
                if self.headers.get("Authorization") != f"Bearer {issuer.bearer}":
                    return self.answer(401, {"kind": "Status", "code": 401})
                if self.path == "/.well-known/openid-configuration":
                    return self.answer(200, {"issuer": ISSUER, "jwks_uri": issuer.url + "/openid/v1/jwks",
                                             "response_types_supported": ["id_token"],
                                             "subject_types_supported": ["public"],
                                             "id_token_signing_alg_values_supported": ["RS256"]})
                if self.path == "/openid/v1/jwks":
                    return self.answer(200, {"keys": issuer.keys})
                self.answer(404, {})

            def answer(self, status, doc):
                body = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class DiscoveryTest(unittest.TestCase):
    """Keys from the issuer's discovery (discovery_url, ca_file, bearer_token_file): fetched at
    start without holding it up, read again on rotation, kept through an outage and a restart."""

    def setUp(self):
        self.b = bt.serve(self.addCleanup, self.configure)

    def configure(self, b):
        d = b.tmp
        self.key = bt.gen_rsa_key(os.path.join(d, "sa.key"))
        self.next_key = bt.gen_ec_key(os.path.join(d, "next.key"))
        with open(os.path.join(d, "reader-token"), "w") as f:
            f.write("reader-secret\n")  # as kubelet writes a projected token: with a newline
        self.issuer = Issuer(d, "reader-secret")
        self.addCleanup(self.issuer.stop)
        self.issuer.keys = [bt.public_jwk(self.key, "k1")]
        return {"auth": {
            "oidc": [{"issuer": ISSUER, "service_accounts": True, "audiences": ["berth"],
                      "discovery_url": self.issuer.url + "/.well-known/openid-configuration",
                      "ca_file": self.issuer.ca, "bearer_token_file": "reader-token"}],
            "rules": RULES}}

    def login(self, key=None, kid="k1", alg="RS256", namespace="team-d"):
        claims = bt.service_account_claims(namespace, "ci", ISSUER)
        return bt.basic_auth("x", bt.make_jwt(claims, key or self.key, alg, header={"kid": kid}))

    def works(self, headers):
        return self.b.get("/v2/", headers=headers).status == 200

    def test_keys_come_from_discovery_and_outlive_the_issuer(self):
        bt.poll(lambda: self.works(self.login()), timeout=20, what="keys from discovery")
        self.assertEqual(self.b.get("/v2/team-d/x/tags/list", headers=self.login(namespace="team-e")).status, 403)
        # rotation: the new kid is fetched on first sight (then at most every 10 s)
        self.issuer.keys = [bt.public_jwk(self.key, "k1"), bt.public_jwk(self.next_key, "k2")]
        rotated = self.login(self.next_key, "k2", "ES256")
        bt.poll(lambda: self.works(rotated), timeout=30, what="the rotated key")
        metrics = self.b.metrics()
        ok = metrics[f'berth_auth_issuer_key_refreshes_total{{issuer="{ISSUER}",result="ok"}}']
        self.assertGreaterEqual(ok, 2)
        self.assertGreater(metrics['berth_auth_logins_total{method="oidc",result="ok"}'], 0)
        # the issuer goes away: what was fetched still verifies, here and after a restart
        self.issuer.stop()
        self.assertFalse(self.works(self.login(kid="k-unknown")))
        self.assertTrue(self.works(self.login(self.next_key, "k2", "ES256", namespace="team-f")))
        self.assertEqual(self.b.stop(), 0)
        self.b.restart()
        self.assertTrue(self.works(self.login(namespace="team-g")))
        self.assertTrue(any(f.endswith(".json") for f in os.listdir(os.path.join(self.b.root, "issuer-keys"))))

    def test_a_reader_without_the_bearer_token_gets_no_keys(self):
        self.issuer.bearer = "another-secret"

        def configure(b):
            with open(os.path.join(b.tmp, "reader-token"), "w") as f:
                f.write("wrong\n")
            return dict(self.b.config)
        b = bt.serve(self.addCleanup, configure)
        bt.poll(lambda: b.metrics().get(
            f'berth_auth_issuer_key_refreshes_total{{issuer="{ISSUER}",result="failed"}}', 0) >= 1,
            timeout=20, what="a failed key refresh")
        self.assertEqual(b.get("/v2/", headers=self.login()).status, 401)


if __name__ == "__main__":
    unittest.main()
