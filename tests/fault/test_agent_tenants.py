#!/usr/bin/env python3
"""No tenant leak through the node agent (agent.authorize "caller", the default): a replica with
htpasswd users and rules (alice/** for alice, public/** for anyone, everything for the agent's
own user), and an agent with that user's credentials.

- Anonymous callers and bob get the replicas' own answer for alice's private image (401 with
  the challenge, 403), for the manifest and for every blob, also once the blobs are in the
  node's cache; alice gets it, the second time from the node's cache (the replica sees no
  blob GET); anonymous callers pull public/**.
- With the replicas' token endpoint (auth.token), the challenge's realm is the agent's own
  /auth/token, which relays to the replicas: the docker token flow works through the agent.
- skopeo, a real client, copies alice's image through the agent only with her credentials.
- The replica stopped: alice's remembered decision still serves her from the cache; bob still
  gets nothing.
- Service account tokens (auth.oidc on the replica, one ${namespace} rule): team-a's token,
  as a password or a Bearer token, gets nothing of team-b's through the agent.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402

RULES = [
    {"repository": "${user}/**", "principals": ["authenticated"], "actions": ["pull", "push"]},
    {"repository": "public/**", "principals": ["anonymous", "authenticated"], "actions": ["pull"]},
    {"repository": "public/**", "principals": ["user:alice"], "actions": ["push"]},
    {"repository": "**", "principals": ["user:node-agent"], "actions": ["pull"]},
]
ALICE = bt.basic_auth("alice", "alice-pw")
BOB = bt.basic_auth("bob", "bob-pw")


def push_as(server, repo, tag, headers, layer_sizes=(40_000, 30_000)):
    image = bt.make_image(layer_sizes)
    for digest, data in image["blobs"].items():
        r = server.request("POST", f"/v2/{repo}/blobs/uploads/?digest={digest}", body=data,
                           headers={**headers, "Content-Type": "application/octet-stream"})
        assert r.status == 201, r
    r = server.request("PUT", f"/v2/{repo}/manifests/{tag}", body=image["manifest"],
                       headers={**headers, "Content-Type": bt.OCI_MANIFEST})
    assert r.status == 201, r
    return image


def pull(server, repo, ref, headers=None):
    """Statuses of the manifest and of each blob GET, and whether every body matched."""
    headers = dict(headers or {})
    r = server.get(f"/v2/{repo}/manifests/{ref}", headers={**headers, "Accept": bt.OCI_MANIFEST})
    if r.status != 200:
        return r.status, r
    doc = json.loads(r.body)
    for desc in [doc["config"], *doc["layers"]]:
        b = server.get(f"/v2/{repo}/blobs/{desc['digest']}", headers=headers)
        if b.status != 200 or bt.sha256_digest(b.body) != desc["digest"]:
            return b.status, b
    return 200, r


def blob_gets(replica, principal):
    """How many blob GETs the replica has answered for this principal."""
    count = 0
    for line in replica.stderr().splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if doc.get("msg") == "request" and doc.get("method") == "GET" and "/blobs/sha256:" in doc.get("target", "") \
                and doc.get("principal") == principal:
            count += 1
    return count


def settled(read, quiet=0.5, timeout=10):
    """read()'s value once it has stayed the same for `quiet` seconds."""
    deadline = time.monotonic() + timeout
    value, since = read(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        again = read()
        if again != value:
            value, since = again, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return value
    raise AssertionError(f"still changing after {timeout}s: {value}")


class AgentTenants(unittest.TestCase):
    token_endpoint = False

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="berth-agent-tenants-")
        cls.addClassCleanup(shutil.rmtree, cls.dir, True)
        cls.replica = replica = bt.serve(cls.addClassCleanup, cls.replica_config,
                                         {"alice": "alice-pw", "bob": "bob-pw", "node-agent": "agent-pw"})
        cls.private = push_as(replica, "alice/private", "1", ALICE)
        cls.public = push_as(replica, "public/base", "1", ALICE, layer_sizes=(20_000,))

        with open(os.path.join(cls.dir, "agent-password"), "w") as f:
            f.write("agent-pw\n")
        agent = {"replicas": [f"http://127.0.0.1:{replica.port}"], "username": "node-agent",
                 "password_file": os.path.join(cls.dir, "agent-password")}
        cls.agent = bt.serve(cls.addClassCleanup, {"agent": agent, "log": {"access": True}},
                             ready_statuses=(401,))  # GET /v2/ as the replicas answer it to a stranger

    @classmethod
    def replica_config(cls, replica):
        auth = {"htpasswd": "htpasswd", "rules": RULES}
        if cls.token_endpoint:
            bt.gen_ec_key(os.path.join(replica.tmp, "token.key"))
            auth["token"] = {"signing_key": "token.key"}
        return {"auth": auth, "log": {"access": True}}

    def test_a_owner_pulls_strangers_get_the_replicas_answer(self):
        agent, replica, private = self.agent, self.replica, self.private
        status, r = pull(agent, "alice/private", "1")
        self.assertEqual(status, 401, r)
        challenge = r.header("WWW-Authenticate")
        self.assertTrue(challenge, "a 401 carries the challenge, so clients send credentials")
        self.assertEqual(challenge.split(" ")[0], replica.get("/v2/alice/private/manifests/1").header(
            "WWW-Authenticate").split(" ")[0])

        self.assertEqual(pull(agent, "alice/private", "1", ALICE)[0], 200)
        self.assertEqual(pull(agent, "alice/private", private["digest"], ALICE)[0], 200)
        self.assertEqual(pull(agent, "public/base", "1")[0], 200)

        # Every blob is in the node's cache now; none is served to anyone else.
        for digest in private["blobs"]:
            for headers, status in (({}, 401), (BOB, 403), (bt.basic_auth("alice", "wrong"), 401)):
                r = agent.get(f"/v2/alice/private/blobs/{digest}", headers=headers)
                self.assertEqual(r.status, status, (digest, headers, r))
                self.assertNotEqual(bt.sha256_digest(r.body), digest)
            # Nor under a repository bob may read that does not hold it.
            r = agent.get(f"/v2/bob/anything/blobs/{digest}", headers=BOB)
            self.assertEqual(r.status, 404, r)
        self.assertEqual(pull(agent, "alice/private", "1", BOB)[0], 403)
        self.assertIn(agent.get("/v2/_catalog", headers=ALICE).status, (404, 405))

        # alice again: from the node's cache, no blob GET reaches the replica for her or the agent.
        # The replica logs a GET once it has sent all of it, which may be after the agent has
        # served it on: count once the log has settled.
        before = settled(lambda: (blob_gets(replica, "node-agent"), blob_gets(replica, "alice")))
        self.assertEqual(pull(agent, "alice/private", "1", ALICE)[0], 200)
        self.assertEqual((blob_gets(replica, "node-agent"), blob_gets(replica, "alice")), before)

        metrics = agent.metrics()
        decided = {k: v for k, v in metrics.items() if k.startswith("berth_agent_authorizations_total")}
        self.assertGreater(decided['berth_agent_authorizations_total{result="allowed",cached="true"}'], 0, decided)
        self.assertGreater(decided['berth_agent_authorizations_total{result="denied",cached="false"}'], 0, decided)

    def test_b_skopeo_copies_only_with_credentials(self):
        if not shutil.which("skopeo"):
            self.skipTest("skopeo is not installed")
        out = os.path.join(self.dir, "copy")
        source = f"docker://127.0.0.1:{self.agent.port}/alice/private:1"
        base = ["skopeo", "copy", "--src-tls-verify=false", "--retry-times", "0"]
        refused = subprocess.run(base + ["--src-no-creds", source, f"oci:{out}-anonymous:x"],
                                 capture_output=True, text=True, timeout=120)
        self.assertNotEqual(refused.returncode, 0, refused.stdout)
        refused = subprocess.run(base + ["--src-creds", "bob:bob-pw", source, f"oci:{out}-bob:x"],
                                 capture_output=True, text=True, timeout=120)
        self.assertNotEqual(refused.returncode, 0, refused.stdout)
        copied = subprocess.run(base + ["--src-creds", "alice:alice-pw", source, f"oci:{out}-alice:x"],
                                capture_output=True, text=True, timeout=120)
        self.assertEqual(copied.returncode, 0, copied.stderr)
        raw = subprocess.run(["skopeo", "inspect", "--raw", "--tls-verify=false", "--creds", "alice:alice-pw", source],
                             capture_output=True, timeout=120)
        self.assertEqual(raw.returncode, 0, raw.stderr)
        self.assertEqual(bt.sha256_digest(raw.stdout), self.private["digest"])

    def test_z_replica_outage_keeps_remembered_decisions(self):
        # Last: the replica comes back on another port.
        agent, replica = self.agent, self.replica
        self.assertEqual(pull(agent, "alice/private", "1", ALICE)[0], 200)
        replica.stop()
        try:
            self.assertEqual(pull(agent, "alice/private", "1", ALICE)[0], 200)
            self.assertIn(pull(agent, "alice/private", "1", BOB)[0], (403, 503))
            status, r = pull(agent, "alice/private", "1", bt.basic_auth("carol", "never-asked"))
            self.assertEqual(status, 503, r)
            self.assertEqual(r.error_codes(), ["UNAVAILABLE"])
        finally:
            replica.restart()


class AgentTenantsTokenFlow(AgentTenants):
    """The same with the replicas' token endpoint: Bearer challenges name the agent's /auth/token."""
    token_endpoint = True

    def test_d_token_flow_through_the_agent(self):
        agent = self.agent
        r = agent.get("/v2/alice/private/manifests/1")
        self.assertEqual(r.status, 401)
        challenge = r.header("WWW-Authenticate")
        self.assertIn(f'realm="http://127.0.0.1:{agent.port}/auth/token"', challenge)
        self.assertIn('scope="repository:alice/private:pull"', challenge)
        token = agent.get("/auth/token?service=berth&scope=repository:alice/private:pull", headers=ALICE)
        self.assertEqual(token.status, 200, token)
        bearer = bt.bearer(token.json()["token"])
        self.assertEqual(pull(agent, "alice/private", "1", bearer)[0], 200)
        bobs = agent.get("/auth/token?service=berth&scope=repository:alice/private:pull", headers=BOB).json()["token"]
        self.assertEqual(pull(agent, "alice/private", "1", bt.bearer(bobs))[0], 401)
        self.assertEqual(agent.get("/auth/token?service=berth", headers=bt.basic_auth("bob", "x")).status, 401)


class AgentServiceAccounts(unittest.TestCase):
    """Service account tokens through the agent: one ${namespace} rule on the replica; a team-a
    token (as the password of Basic credentials, as the kubelet's credential provider sends it,
    or as a Bearer token) pulls team-a/app through the agent and gets team-b/app refused, also
    once team-b's image sits in the node's cache."""

    ISSUER = "https://kubernetes.default.svc.cluster.local"

    @classmethod
    def setUpClass(cls):
        cls.replica = replica = bt.serve(cls.addClassCleanup, cls.replica_config,
                                         {"node-agent": "agent-pw", "root": "root-pw"})
        cls.images = {team: push_as(replica, f"{team}/app", "1", bt.basic_auth("root", "root-pw"))
                      for team in ("team-a", "team-b")}
        password = os.path.join(replica.tmp, "agent-password")
        with open(password, "w") as f:
            f.write("agent-pw")
        agent = {"replicas": [f"http://127.0.0.1:{replica.port}"], "username": "node-agent", "password_file": password}
        cls.agent = bt.serve(cls.addClassCleanup, {"agent": agent}, ready_statuses=(401,))

    @classmethod
    def replica_config(cls, replica):
        cls.key = bt.gen_rsa_key(os.path.join(replica.tmp, "sa.key"))
        with open(os.path.join(replica.tmp, "jwks.json"), "w") as f:
            json.dump({"keys": [bt.public_jwk(cls.key, "k1")]}, f)
        return {"auth": {
            "htpasswd": "htpasswd",
            "oidc": [{"issuer": cls.ISSUER, "service_accounts": True, "audiences": ["berth"],
                      "jwks_file": "jwks.json"}],
            "rules": [{"repository": "${namespace}/**", "principals": ["group:system:serviceaccounts"],
                       "actions": ["pull", "push"]},
                      {"repository": "**", "principals": ["user:node-agent", "user:root"], "actions": ["pull", "push"]}]}}

    def token(self, namespace):
        return bt.make_jwt(bt.service_account_claims(namespace, "default", self.ISSUER), self.key, "RS256",
                           header={"kid": "k1"})

    def test_tokens_cross_no_tenant_through_the_agent(self):
        agent = self.agent
        a, b = self.token("team-a"), self.token("team-b")
        for present in (lambda t: bt.basic_auth("kubelet", t), bt.bearer):
            self.assertEqual(pull(agent, "team-b/app", "1", present(b))[0], 200)  # now in the node's cache
            self.assertEqual(pull(agent, "team-a/app", "1", present(a))[0], 200)
            status, r = pull(agent, "team-b/app", "1", present(a))
            self.assertEqual(status, 403, r)
            for digest in self.images["team-b"]["blobs"]:
                r = agent.get(f"/v2/team-b/app/blobs/{digest}", headers=present(a))
                self.assertEqual(r.status, 403, r)
                r = agent.get(f"/v2/team-a/app/blobs/{digest}", headers=present(a))
                self.assertEqual(r.status, 404, r)  # not linked under team-a: nothing of team-b's
        expired = bt.make_jwt(bt.service_account_claims("team-b", "default", self.ISSUER, lifetime=-60), self.key,
                              "RS256", header={"kid": "k1"})
        self.assertEqual(pull(agent, "team-b/app", "1", bt.bearer(expired))[0], 401)


if __name__ == "__main__":
    unittest.main(verbosity=2)
