#!/usr/bin/env python3
"""Issue 34, findings 1, 2 and 5 (/work/notes/contract-34.md): the node agent's door and the
forwarding of upload requests between replicas.

Finding 1 (agent, agent.authorize "caller"): a replica with htpasswd users (alice, bob, the
agent's node-agent) and the rules of tests/fault/test_agent_tenants.py, and an agent in front.
- GET /v2/alice/private2/manifests/x%2Fy through the agent, anonymously and as bob: 404
  MANIFEST_UNKNOWN, the replica is not asked, and afterwards anonymous callers still get 401 and
  bob 403 for alice/private2's manifest (tag and digest, GET and HEAD), blobs and tag list.
- The same with x%3Fy, ..%2F.., a%23b, %2e%2e and x%2F..%2F..%2F1, GET and HEAD; a blob digest that
  does not parse (x%2Fy, sha256%3A..%2F..) is 400 DIGEST_INVALID; an invalid repository name is 400
  NAME_INVALID; none of them opens the door.
- The replica answers the agent's question GET /_berth/v1/access?repository=NAME: 204 with
  Berth-Access: pull for alice, 401 anonymous, 403 for bob.
- A "replica" (a stub) that answers 404 to every question but serves the manifest to the
  agent's own credentials: the agent never takes the 404 for "allowed" and serves nothing.
Finding 5: the agent answers /ui/ (files, API views, login), /_berth/v1/usage, lineage and
backup with 404 NAME_UNKNOWN ("the node agent serves pulls only"), naming nothing of
alice/private, which alice pulled through it before.
Finding 2 (two replicas with htpasswd and rules, bob owns bob/**):
- Upload ids carrying %2F, %3F (here: a POST and a manifest PUT smuggled into alice/** through
  ?ns=alice) sent to the replica that does not own them: 404 BLOB_UPLOAD_UNKNOWN, nothing
  written into alice/**; ids with %2F, %3F, %23, %2e%2e, upper case or over 128 characters: 404
  BLOB_UPLOAD_UNKNOWN for GET, PATCH, PUT and DELETE, never forwarded (the owner logs nothing).
- Requests straight to a replica with the peer secret and Berth-Forwarded: 1 that target
  alice/** (PUT manifest, POST mount both ways, PATCH and PUT of alice's upload): 403 DENIED with
  bob's credentials, 401 with none; nothing changes.
- Guard (holds on the old binary too): bob's chunked upload started on one replica and finished
  through the other gives 201 and the blob is readable on both.
"""

import http.client
import http.server
import json
import os
import shutil
import sys
import tempfile
import threading
import unittest
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402

RULES = [
    {"repository": "${user}/**", "principals": ["authenticated"], "actions": ["pull", "push"]},
    {"repository": "public/**", "principals": ["anonymous", "authenticated"], "actions": ["pull"]},
    {"repository": "public/**", "principals": ["user:alice"], "actions": ["push"]},
    {"repository": "**", "principals": ["user:node-agent"], "actions": ["pull"]},
]
USERS = {"alice": "alice-pw", "bob": "bob-pw", "node-agent": "agent-pw"}
ALICE = bt.basic_auth("alice", "alice-pw")
BOB = bt.basic_auth("bob", "bob-pw")
ANON = {}
OCTETS = {"Content-Type": "application/octet-stream"}


def push_as(server, repo, tag, headers, layer_sizes=(3000,)):
    image = bt.make_image(layer_sizes)
    for digest, data in image["blobs"].items():
        r = server.request("POST", f"/v2/{repo}/blobs/uploads/?digest={digest}", body=data,
                           headers={**headers, **OCTETS})
        assert r.status == 201, (repo, r)
    r = server.request("PUT", f"/v2/{repo}/manifests/{tag}", body=image["manifest"],
                       headers={**headers, "Content-Type": bt.OCI_MANIFEST})
    assert r.status == 201, (repo, r)
    return image


def request_lines(server):
    out = []
    for line in server.stderr().splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and doc.get("msg") == "request":
            out.append(doc)
    return out


def synced_targets(server, headers):
    """The targets `server` has logged, once a marker request sent now shows in its log."""
    marker = f"marker-{os.urandom(4).hex()}"
    server.get(f"/v2/{marker}/tags/list", headers=headers)
    bt.poll(lambda: any(marker in d.get("target", "") for d in request_lines(server)), 10, what="marker logged")
    return [d.get("target", "") for d in request_lines(server)]


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


# --------------------------------------------------------------------------- findings 1 and 5


class AgentDoor(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        replica = bt.Berth()
        cls.replica = replica
        cls.addClassCleanup(replica.cleanup)
        bt.write_htpasswd(os.path.join(replica.tmp, "htpasswd"), USERS)
        replica.config = {"auth": {"htpasswd": "htpasswd", "rules": RULES}, "log": {"access": True}}
        replica.ready_statuses = (401,)
        replica.start()
        cls.images = {repo: push_as(replica, repo, "1", ALICE)
                      for repo in ["alice/private", "alice/private2"] + [f"alice/v{i}" for i in range(8)]}
        push_as(replica, "public/base", "1", ALICE)
        password = os.path.join(replica.tmp, "agent-password")
        with open(password, "w") as f:
            f.write("agent-pw\n")
        agent = bt.Berth(config={"agent": {"replicas": [f"http://127.0.0.1:{replica.port}"],
                                           "username": "node-agent", "password_file": password}})
        cls.agent = agent
        cls.addClassCleanup(agent.cleanup)
        agent.ready_statuses = (401,)
        agent.start()

    def assertStillRefused(self, repo, who, status):
        """Manifest (tag and digest, GET and HEAD), every blob and the tag list: `status`, nothing served."""
        image = self.images[repo]
        accept = {"Accept": bt.OCI_MANIFEST}
        for method, path in (("GET", f"/v2/{repo}/manifests/1"), ("HEAD", f"/v2/{repo}/manifests/1"),
                             ("GET", f"/v2/{repo}/manifests/{image['digest']}"), ("GET", f"/v2/{repo}/tags/list"),
                             *[("GET", f"/v2/{repo}/blobs/{d}") for d in image["blobs"]],
                             *[("HEAD", f"/v2/{repo}/blobs/{d}") for d in image["blobs"]]):
            r = self.agent.request(method, path, headers={**who, **accept})
            self.assertEqual(r.status, status, f"{method} {path} as {who or 'anonymous'} after the crafted one: {r}")
            self.assertNotIn(r.body, [image["manifest"], *image["blobs"].values()], path)
            self.assertNotIn(b'"tags"', r.body, path)

    def test_1a_slash_in_the_reference_opens_nothing(self):
        # The finding's reproduction: x%2Fy reached the replica as .../manifests/x/y, which it
        # answered 404 without judging the caller; the agent remembered that as "allowed".
        for who in (ANON, BOB):
            r = self.agent.get("/v2/alice/private2/manifests/q7x%2Fy", headers=who)
            self.assertEqual(r.status, 404, r)
            self.assertEqual(r.error_codes(), ["MANIFEST_UNKNOWN"], r)
        self.assertStillRefused("alice/private2", ANON, 401)
        self.assertStillRefused("alice/private2", BOB, 403)
        targets = synced_targets(self.replica, ALICE)
        self.assertEqual([t for t in targets if "q7x" in t], [], "the replica was asked about the crafted reference")

    def test_1b_other_encodings_of_references_get_and_head(self):
        refs = ["x%3Fy", "..%2F..", "a%23b", "%2e%2e", "x%2F..%2F..%2F1", "%2e%2e%2F1"]
        for i, ref in enumerate(refs):
            repo = f"alice/v{i}"
            for method in ("GET", "HEAD"):
                for who, status in ((ANON, 401), (BOB, 403)):
                    with self.subTest(ref=ref, method=method, who=who or "anonymous"):
                        r = self.agent.request(method, f"/v2/{repo}/manifests/{ref}", headers=who)
                        self.assertEqual(r.status, 404, r)
                        if method == "GET":
                            self.assertEqual(r.error_codes(), ["MANIFEST_UNKNOWN"], r)
                        self.assertStillRefused(repo, who, status)

    def test_1c_bad_digests_and_names(self):
        repo = "alice/v6"
        for who, status in ((ANON, 401), (BOB, 403)):
            for digest in ("x%2Fy", "sha256%3A..%2F..", "sha256:zz", "%2e%2e"):
                for method in ("GET", "HEAD"):
                    with self.subTest(digest=digest, method=method, who=who or "anonymous"):
                        r = self.agent.request(method, f"/v2/{repo}/blobs/{digest}", headers=who)
                        self.assertEqual(r.status, 400, r)
                        if method == "GET":
                            self.assertEqual(r.error_codes(), ["DIGEST_INVALID"], r)
            self.assertStillRefused(repo, who, status)
        repo = "alice/v7"
        for name in ("alice/v7%2F..%2F..%2Fpublic/base", "Alice/v7", "alice/v7/..", "alice/v7%2F%2e%2e"):
            for who in (ANON, BOB):
                with self.subTest(name=name, who=who or "anonymous"):
                    r = self.agent.get(f"/v2/{name}/manifests/1", headers=who)
                    self.assertEqual(r.status, 400, r)
                    self.assertEqual(r.error_codes(), ["NAME_INVALID"], r)
        self.assertStillRefused(repo, ANON, 401)
        self.assertStillRefused(repo, BOB, 403)

    def test_1d_the_replica_answers_the_agents_question(self):
        path = "/_berth/v1/access?repository=alice/private2"
        r = self.replica.get(path, headers=ALICE)
        self.assertEqual(r.status, 204, r)
        self.assertEqual(r.header("Berth-Access"), "pull", r.headers)
        r = self.replica.get(path)
        self.assertEqual(r.status, 401, r)
        self.assertNotEqual(r.header("Berth-Access"), "pull")
        r = self.replica.get(path, headers=BOB)
        self.assertEqual(r.status, 403, r)
        self.assertNotEqual(r.header("Berth-Access"), "pull")

    def test_5_agent_serves_pulls_only(self):
        private = self.images["alice/private"]
        r = self.agent.get("/v2/alice/private/manifests/1", headers={**ALICE, "Accept": bt.OCI_MANIFEST})
        self.assertEqual(r.status, 200, r)  # alice/private is in the node's cache now
        form = {**ALICE, "Content-Type": "application/x-www-form-urlencoded"}
        login = b"username=alice&password=alice-pw"
        cases = [("GET", "/ui/", {}, None), ("HEAD", "/ui/", {}, None),
                 ("GET", "/ui/api/repositories", {}, None), ("HEAD", "/ui/api/repositories", {}, None),
                 ("GET", "/ui/api/repository?name=alice/private", {}, None),
                 ("GET", "/ui/api/manifest?name=alice/private&reference=1", {}, None),
                 ("GET", f"/ui/api/manifest?name=alice/private&reference={private['digest']}", {}, None),
                 ("GET", "/ui/api/namespaces", {}, None), ("GET", "/ui/api/whoami", {}, None),
                 ("GET", "/ui/api/cluster", {}, None), ("GET", "/ui/login", {}, None),
                 ("POST", "/ui/login", form, login),
                 ("GET", "/_berth/v1/usage", {}, None),
                 ("GET", "/_berth/v1/lineage?repository=alice/private&reference=1", {}, None),
                 ("GET", "/_berth/v1/backup", {}, None), ("POST", "/_berth/v1/backup", {}, b"")]
        for method, path, extra, body in cases:
            for who in (ANON, ALICE, BOB):
                with self.subTest(method=method, path=path, who=who.get("Authorization", "anonymous")):
                    r = self.agent.request(method, path, body=body, headers={**who, **extra})
                    self.assertEqual(r.status, 404, r)
                    self.assertIsNone(r.header("Set-Cookie"), r.headers)
                    if method != "HEAD":
                        self.assertEqual(r.error_codes(), ["NAME_UNKNOWN"], r)
                    self.assertNotIn(b"alice/private", r.body)
                    self.assertNotIn(private["digest"].encode(), r.body)


class StubReplica(http.server.BaseHTTPRequestHandler):
    """Answers 404 to every question about access (HEAD without credentials, /_berth/), 401 with a
    Basic challenge to other requests without credentials, and serves stub/app to node-agent."""
    protocol_version = "HTTP/1.1"
    image = None
    seen = []

    def log_message(self, *args):
        pass

    def send(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def answer(self):
        auth = self.headers.get("Authorization", "")
        self.seen.append((self.command, self.path, bool(auth)))
        error = json.dumps({"errors": [{"code": "NAME_UNKNOWN", "message": "stub"}]}).encode()
        if self.path.split("?")[0] in ("/v2/", "/v2"):
            return self.send(200, b"{}", [("Content-Type", "application/json")])
        if self.path.startswith("/_berth/") or (not auth and self.command == "HEAD"):
            return self.send(404, error, [("Content-Type", "application/json")])
        if auth != bt.basic_auth("node-agent", "agent-pw")["Authorization"]:
            return self.send(401, error, [("Content-Type", "application/json"),
                                          ("WWW-Authenticate", 'Basic realm="stub"')])
        image = self.image
        if self.path in ("/v2/stub/app/manifests/1", f"/v2/stub/app/manifests/{image['digest']}"):
            return self.send(200, image["manifest"], [("Content-Type", bt.OCI_MANIFEST),
                                                      ("Docker-Content-Digest", image["digest"])])
        for digest, data in image["blobs"].items():
            if self.path == f"/v2/stub/app/blobs/{digest}":
                return self.send(200, data, [("Content-Type", "application/octet-stream"),
                                             ("Docker-Content-Digest", digest)])
        return self.send(404, error, [("Content-Type", "application/json")])

    do_GET = do_HEAD = answer


class AgentNeverTakes404ForAllowed(unittest.TestCase):
    def setUp(self):
        StubReplica.image = bt.make_image((2000,))
        StubReplica.seen = []
        self.stub = http.server.ThreadingHTTPServer(("127.0.0.1", 0), StubReplica)
        self.addCleanup(self.stub.server_close)
        thread = threading.Thread(target=self.stub.serve_forever, daemon=True)
        thread.start()
        self.addCleanup(self.stub.shutdown)
        self.dir = tempfile.mkdtemp(prefix="berth-stub-agent-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        with open(os.path.join(self.dir, "agent-password"), "w") as f:
            f.write("agent-pw\n")
        agent = bt.Berth(config={"agent": {"replicas": [f"http://127.0.0.1:{self.stub.server_address[1]}"],
                                           "username": "node-agent",
                                           "password_file": os.path.join(self.dir, "agent-password")}})
        agent.ready_statuses = (200, 401, 403, 404, 503)
        self.addCleanup(agent.cleanup)
        self.agent = agent.start()

    def test_1e_a_replicas_404_is_a_refusal(self):
        image = StubReplica.image
        for method in ("GET", "HEAD"):
            for ref in ("1", image["digest"]):
                with self.subTest(method=method, ref=ref):
                    r = self.agent.request(method, f"/v2/stub/app/manifests/{ref}", headers={"Accept": bt.OCI_MANIFEST})
                    self.assertNotEqual(r.status, 200, r)
                    self.assertNotEqual(r.body, image["manifest"])
        for digest, data in image["blobs"].items():
            r = self.agent.get(f"/v2/stub/app/blobs/{digest}")
            self.assertNotEqual(r.status, 200, r)
            self.assertNotEqual(r.body, data)
        fetched = [s for s in StubReplica.seen if s[2] and "/v2/stub/app/" in s[1]]
        self.assertEqual(fetched, [], "the agent fetched for a caller the replica never allowed")


# --------------------------------------------------------------------------- finding 2


class UploadForwarding(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cluster = bt.Cluster(2, config={"auth": {"htpasswd": "htpasswd", "rules": RULES}, "log": {"access": True}})
        for r in cluster.replicas:
            r.cleanup()
        cluster.replicas = [AuthReplica(cluster, i) for i in range(2)]
        cls.cluster = cluster
        cls.addClassCleanup(cluster.cleanup)
        for r in cluster:
            bt.write_htpasswd(os.path.join(r.tmp, "htpasswd"), USERS)
        cluster.start()
        cls.a, cls.b = cluster[0], cluster[1]  # berth-0 owns the sessions it opens
        cls.alice_image = push_as(cls.a, "alice/app", "1", ALICE)
        cls.bob_image = push_as(cls.a, "bob/x", "1", BOB)
        cls.versions = cls.a.peer_request("GET", "status").header("Berth-Protocol")

    def peer_headers(self, who):
        h = {bt.PEER_SECRET_HEADER: self.cluster.secret, "Berth-Forwarded": "1", "Berth-Replica": "berth-1"}
        if self.versions:
            h["Berth-Protocol"] = self.versions
        return {**h, **who}

    def test_2a_crafted_upload_ids_write_nothing_into_alice(self):
        # On the replica that does not own berth-0_..., an id with %2F and %3F became the path
        # and query of a request the owner trusted: here blobs and a manifest in alice/bob/x/...
        victim = "alice/bob/x/blobs/uploads/berth-0_q"
        image = bt.make_image((700,))
        for digest, data in image["blobs"].items():
            crafted = urllib.parse.quote(f"berth-0_q/blobs/uploads/?ns=alice&digest={digest}", safe="")
            r = self.b.request("POST", f"/v2/bob/x/blobs/uploads/{crafted}", body=data, headers={**BOB, **OCTETS})
            self.assertIn(r.status, (404, 405), r)
            self.assertIn(r.error_codes(), (["BLOB_UPLOAD_UNKNOWN"], ["UNSUPPORTED"]), r)
        crafted = urllib.parse.quote("berth-0_q/manifests/v1?ns=alice", safe="")
        r = self.b.request("PUT", f"/v2/bob/x/blobs/uploads/{crafted}", body=image["manifest"],
                           headers={**BOB, "Content-Type": bt.OCI_MANIFEST})
        self.assertEqual(r.status, 404, r)
        self.assertEqual(r.error_codes(), ["BLOB_UPLOAD_UNKNOWN"], r)
        for replica in (self.a, self.b):
            r = replica.get(f"/v2/{victim}/manifests/v1", headers={**ALICE, "Accept": bt.OCI_MANIFEST})
            self.assertEqual(r.status, 404, (replica.replica_id, r))
            for digest in image["blobs"]:
                self.assertEqual(replica.head(f"/v2/{victim}/blobs/{digest}", headers=ALICE).status, 404)

    def test_2b_malformed_upload_ids_are_unknown_and_never_forwarded(self):
        ids = ["berth-0_a%2Fb", "berth-0_a%3Fb%3D1", "berth-0_a%23b", "berth-0_%2e%2e",
               "berth-0_%2e%2e%2F%2e%2e%2Fmanifests%2Fv1", "berth-0_a%2F..%2F..%2Fblobs%2Fuploads%2F",
               "BERTH-0_abc", "berth-0_" + "a" * 121]
        data = os.urandom(64)
        for upload_id in ids:
            for method, query, body in (("GET", "", None), ("PATCH", "", data),
                                        ("PUT", f"?digest={bt.sha256_digest(data)}", data), ("DELETE", "", None)):
                with self.subTest(id=upload_id, method=method):
                    headers = {**BOB, **OCTETS} if body is not None else {**BOB, "Content-Length": "0"}
                    r = self.b.request(method, f"/v2/bob/crafted/blobs/uploads/{upload_id}{query}", body=body,
                                       headers=headers)
                    self.assertEqual(r.status, 404, r)
                    self.assertEqual(r.error_codes(), ["BLOB_UPLOAD_UNKNOWN"], r)
        forwarded = [t for t in synced_targets(self.a, BOB) if "bob/crafted" in t]
        self.assertEqual(forwarded, [], "the owner was sent requests for malformed upload ids")

    def test_2c_peer_secret_and_forwarded_header_authorise_nothing(self):
        alice_layer = bt.sha256_digest(self.alice_image["layers"][0])
        bob_layer = bt.sha256_digest(self.bob_image["layers"][0])
        start = self.a.request("POST", "/v2/alice/app/blobs/uploads/", headers={**ALICE, "Content-Length": "0"})
        self.assertEqual(start.status, 202, start)
        session = bt.location_path(start.header("Location"))
        chunk = os.urandom(256)
        attempts = [
            ("PUT manifest", "PUT", "/v2/alice/app/manifests/evil", self.alice_image["manifest"],
             {"Content-Type": bt.OCI_MANIFEST}),
            ("mount into alice", "POST", f"/v2/alice/app/blobs/uploads/?mount={bob_layer}&from=bob/x", None,
             {"Content-Length": "0"}),
            ("mount out of alice", "POST", f"/v2/bob/x/blobs/uploads/?mount={alice_layer}&from=alice/app", None,
             {"Content-Length": "0"}),
            ("PATCH alice's upload", "PATCH", session, chunk, OCTETS),
            ("PUT alice's upload", "PUT", bt.with_query(session, digest=bt.sha256_digest(chunk)), chunk, OCTETS),
        ]
        for who, status, code in ((BOB, 403, "DENIED"), (ANON, 401, "UNAUTHORIZED")):
            for what, method, path, body, extra in attempts:
                with self.subTest(what=what, who=who or "no credentials"):
                    r = self.a.request(method, path, body=body, headers={**self.peer_headers(who), **extra})
                    self.assertEqual(r.status, status, r)
                    self.assertEqual(r.error_codes(), [code], r)
        for replica in (self.a, self.b):
            r = replica.get("/v2/alice/app/manifests/evil", headers={**ALICE, "Accept": bt.OCI_MANIFEST})
            self.assertEqual(r.status, 404, (replica.replica_id, r))
            self.assertEqual(replica.head(f"/v2/alice/app/blobs/{bob_layer}", headers=ALICE).status, 404)
            self.assertEqual(replica.head(f"/v2/bob/x/blobs/{alice_layer}", headers=BOB).status, 404)
        r = self.a.get(session, headers=ALICE)
        self.assertEqual(r.status, 204, r)
        self.assertEqual(r.header("Range"), "0-0", "bytes were appended to alice's upload")

    def test_2d_guard_chunked_upload_across_replicas(self):
        # Holds on the old binary too: a genuine forwarded upload keeps working.
        first, second = os.urandom(5000), os.urandom(3000)
        digest = bt.sha256_digest(first + second)
        start = self.a.request("POST", "/v2/bob/chunked/blobs/uploads/", headers={**BOB, "Content-Length": "0"})
        self.assertEqual(start.status, 202, start)
        session = bt.location_path(start.header("Location"))
        self.assertIn("berth-0_", session)
        r = self.b.request("PATCH", session, body=first,
                           headers={**BOB, **OCTETS, "Content-Range": f"0-{len(first) - 1}"})
        self.assertEqual(r.status, 202, r)
        session = bt.location_path(r.header("Location"))
        r = self.b.request("PUT", bt.with_query(session, digest=digest), body=second, headers={**BOB, **OCTETS})
        self.assertEqual(r.status, 201, r)
        for replica in (self.b, self.a):
            got = bt.poll(lambda: (lambda x: x if x.status == 200 else None)(
                replica.get(f"/v2/bob/chunked/blobs/{digest}", headers=BOB)), 20, what="blob readable")
            self.assertEqual(got.body, first + second)


if __name__ == "__main__":
    unittest.main(verbosity=2)
