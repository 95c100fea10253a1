#!/usr/bin/env python3
"""The security review of the hardening work (commit 2579190), one test per finding, each made from
the reviewer's reproduction script (exp_*.py).

1. Blob fills are shared per digest only with a repository its upstream confirms holds the digest:
   while alice's fill of D for private.test/team/secret is held open, an anonymous GET of D under
   public.test/library/pub (whose upstream lacks D) is 404, then and afterwards, and nothing of D is
   linked there (with that upstream down it is still not served). Guard: public.test/library/mirror,
   whose upstream does hold D, joins the fill (berth_proxy_coalesced_total) and one upstream GET of
   D serves both readers. Through the node agent: bob's GET of bob/x/blobs/D during and after
   alice's fill of alice/private/blobs/D is 404 or 403.
2. A Docker schema 2 manifest whose config says application/octet-stream or application/json and
   whose gzip-tar layer is typed as some other Docker document is judged: GET and HEAD 403 unsigned
   under require_signature, PUT 403 under base_images. Guard: an OCI artifact (its own config type,
   no layer-type layer) stays readable unsigned and is accepted off any base.
3. A signed image stays readable with 70 SBOM referrers whose digests sort before its signature's,
   and with 70 signature-typed referrers signed by a key the policy does not trust, attached after
   the real signature and sorting before it, also after a restart (the memory of the last good
   signature is gone; the oldest-first order finds it).
4. Paging as bob: /v2/_catalog?n=1&last=X, /_berth/v1/usage?n=1&last=X and, anonymously,
   /ui/api/namespaces?n=1&last=X answer for every X exactly what they would if the hidden names
   did not exist (the reviewer's binary search over `last` learns nothing); a namespace is listed
   only to a caller who may pull every repository in it. With 10,005 hidden repositories (the
   reading budget of a request is 10,000 names) the sealed cursors of all three have one length,
   whatever the length of the name they seal.
5. A web UI session of an htpasswd user ends (whoami user null) once the user is removed from the
   file, or given a new password; another user's session goes on.
6. htpasswd with bcrypt costs 4 and 10: a wrong password for the cost-4 user and an unknown user
   take about as long (medians of 15, each at least half the other).
7. `berth import --root` into the stopped store of a replica with peers (immutable_tags on prod/**)
   fails for a new tag ("too few replicas could be asked to decide it") and the tag stays unknown
   after the restart. Guard: the same import into a store without peers loads the tag.

Against /work/old/berth (before the fix, older than the binary reviewed) 1, 3, 4, 5, 7 and the
base_images half of 2 fail. That binary refused the unsigned GETs of 2 already, and the guard of 2
too (it judged every artifact); 6 fails there in the other direction only (it had no decoy hash: an
unknown user was answered in under a millisecond, far faster than a wrong password).
"""

import gzip
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import threading
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
import cosign  # noqa: E402
import hostile_upstream as hu  # noqa: E402

DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
ACCEPT = {"Accept": f"{bt.OCI_MANIFEST}, {DOCKER_MANIFEST}"}
OCTETS = {"Content-Type": "application/octet-stream"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
SPDX = "application/spdx+json"


# --------------------------------------------------------------------------- content


def descriptor(media_type, data, **extra):
    return dict({"mediaType": media_type, "digest": bt.sha256_digest(data), "size": len(data)}, **extra)


def manifest_of(config, config_type, layers, media_type=bt.OCI_MANIFEST, **extra):
    """(manifest bytes, blobs): layers is [(media type, bytes)]."""
    doc = {"schemaVersion": 2, "mediaType": media_type, "config": descriptor(config_type, config),
           "layers": [descriptor(t, d) for t, d in layers], **extra}
    blobs = {bt.sha256_digest(d): d for d in [config] + [d for _, d in layers]}
    return json.dumps(doc).encode(), blobs


def runnable(config_type=bt.OCI_CONFIG, layer_type=bt.OCI_LAYER, media_type=bt.OCI_MANIFEST):
    """An image a runtime runs: an image config and a gzip tar layer, typed as the caller says."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for name, data in {"bin/hello": b"\x7fELF" + os.urandom(600), "evil": b"unsigned content ran\n"}.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o755, 1700000000
            t.addfile(info, io.BytesIO(data))
    tar = out.getvalue()
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Entrypoint": ["/bin/hello"]},
                         "rootfs": {"type": "layers", "diff_ids": [bt.sha256_digest(tar)]}}).encode()
    return manifest_of(config, config_type, [(layer_type, gzip.compress(tar))], media_type)


def push_as(b, repo, ref, manifest, blobs, headers=None, media_type=bt.OCI_MANIFEST):
    """Push blobs (single POST) and the manifest; the manifest PUT's answer."""
    for digest, data in blobs.items():
        r = b.request("POST", f"/v2/{repo}/blobs/uploads/?digest={digest}", body=data, headers={**(headers or {}), **OCTETS})
        assert r.status == 201, (repo, r)
    return b.request("PUT", f"/v2/{repo}/manifests/{ref or bt.sha256_digest(manifest)}", body=manifest,
                     headers={**(headers or {}), "Content-Type": media_type})


def held_blob(data, gate):
    """An upstream blob answer: the head and the first MiB at once, the rest once `gate` is set."""
    def behaviour(conn, req):
        head = hu.head_bytes(200, [("Content-Length", str(len(data))), ("Docker-Content-Digest", hu.sha256_digest(data)),
                                   ("Content-Type", "application/octet-stream")])
        if not conn.send(head) or not conn.send(data[:1 << 20]):
            return False
        while not gate.wait(0.05):
            if conn.stopping:
                return False
        conn.send(data[1 << 20:])
        return False
    return behaviour


def background(fn):
    """Run fn in a thread: (thread, box) where box["r"] is its result once it ends."""
    box = {}
    t = threading.Thread(target=lambda: box.update(r=fn()), daemon=True)
    t.start()
    return t, box


def answer_during(testcase, fn, gate, within=8):
    """fn()'s answer while a held fill runs. A reader wrongly joined to it would wait for the fill:
    after `within` seconds the fill is let go (the finding) and the answer taken as it comes."""
    t, box = background(fn)
    try:
        bt.poll(lambda: not t.is_alive(), within, what="an answer while the other repository's fill runs")
    except AssertionError:
        gate.set()
    t.join(60)
    testcase.assertIn("r", box, "no answer")
    return box["r"]


def metric(b, name, upstream):
    label = f'upstream="{upstream}"'
    return sum(v for k, v in b.metrics().items() if k.startswith(name + "{") and label in k)


# --------------------------------------------------------------------------- finding 1


class FillsAreSharedOnlyWhereTheUpstreamConfirms(unittest.TestCase):
    def test_proxy_fill_of_a_private_repository(self):
        priv, pub = hu.HostileUpstream(name="priv").start(), hu.HostileUpstream(name="pub").start()
        self.addCleanup(priv.close)
        self.addCleanup(pub.close)
        gate = threading.Event()
        self.addCleanup(gate.set)
        secret = b"TOP-SECRET " + os.urandom(3 << 20)
        d = priv.add_blob("team/secret", secret)
        pub.add_blob("library/pub", b"public layer")
        pub.add_blob("library/mirror", secret)  # the guard: an upstream that does hold D
        priv.on(r"^/v2/team/secret/blobs/", held_blob(secret, gate), method="GET")
        rules = [{"repository": "private.test/**", "principals": ["user:alice"], "actions": ["pull"]},
                 {"repository": "public.test/**", "principals": ["anonymous", "authenticated"], "actions": ["pull"]}]
        b = bt.serve(self.addCleanup, passwords={"alice": "alice-pw"}, config={
            "auth": {"htpasswd": "htpasswd", "rules": rules}, "log": {"access": False},
            "proxy": {"upstreams": [{"host": "private.test", "url": priv.url}, {"host": "public.test", "url": pub.url}]}})
        alice = bt.basic_auth("alice", "alice-pw")
        pub_path = f"/v2/library/pub/blobs/{d}?ns=public.test"
        self.assertEqual(b.get(pub_path).status, 404)
        coalesced = metric(b, "berth_proxy_coalesced_total", "public.test")

        t_alice, got_alice = background(lambda: b.get(f"/v2/team/secret/blobs/{d}?ns=private.test", headers=alice,
                                                      timeout=60))
        bt.poll(lambda: any(d in r.target for r in priv.busy()), 15, what="alice's fill held at the upstream")
        r = answer_during(self, lambda: b.get(pub_path, timeout=60), gate)
        self.assertEqual(r.status, 404, f"anonymous GET via public.test during alice's fill: {r.status}, "
                                        f"{len(r.body)} bytes, secret={r.body[:10] == b'TOP-SECRET'}")
        # the guard: a repository whose upstream holds D joins the fill
        t_mirror, got_mirror = background(lambda: b.get(f"/v2/library/mirror/blobs/{d}?ns=public.test", timeout=60))
        bt.poll(lambda: metric(b, "berth_proxy_coalesced_total", "public.test") > coalesced, 15,
                what="the mirror's reader joined alice's fill")
        gate.set()
        t_alice.join(60)
        t_mirror.join(60)
        self.assertEqual(got_alice["r"].status, 200)
        self.assertTrue(got_alice["r"].body == secret, "alice's bytes")
        self.assertEqual(got_mirror["r"].status, 200)
        self.assertTrue(got_mirror["r"].body == secret, "the mirror reader's bytes")
        gets = [x.path for x in priv.received(contains=d, method="GET") + pub.received(contains=d, method="GET")]
        self.assertEqual([x for x in gets if "/library/pub/" not in x], [f"/v2/team/secret/blobs/{d}"],
                         "one upstream GET of D serves alice and the mirror's reader")

        r = b.get(pub_path)
        self.assertEqual(r.status, 404, f"anonymous GET via public.test after alice's fill: {r}")
        pub.on(r".*", hu.respond(503, hu.error_body("UNAVAILABLE"), [("Content-Type", "application/json")]))
        for path in (pub_path, f"/v2/public.test/library/pub/blobs/{d}"):
            r = b.get(path)
            self.assertNotEqual(r.status, 200, f"{path} with its upstream down: D is linked there")
            self.assertNotIn(b"TOP-SECRET", r.body)

    def test_node_agent_fill_of_alice_is_not_bobs(self):
        secret = b"ALICE-PRIVATE-LAYER " + os.urandom(3 << 20)
        d = hu.sha256_digest(secret)
        gate = threading.Event()
        self.addCleanup(gate.set)
        held = held_blob(secret, gate)
        users = {bt.basic_auth(u, f"{u}-pw")["Authorization"]: u for u in ("alice", "bob")}
        users[bt.basic_auth("node-agent", "agent-pw")["Authorization"]] = "node-agent"
        denied = (401, b"", [("WWW-Authenticate", 'Basic realm="berth"')])

        def replica(conn, req):  # a stub replica: ${user}/** for the authenticated, everything for node-agent
            user = users.get(req.header("Authorization") or "")
            if not user:
                return hu._write(conn, req, *denied)
            if req.path == "/_berth/v1/access":
                ok = user == "node-agent" or req.q("repository", "").startswith(user + "/")
                return hu._write(conn, req, 204 if ok else 403, b"", [("Berth-Access", "pull")] if ok else [])
            if req.path == "/v2/":
                return hu._write(conn, req, 200, b"{}", [])
            if user != "node-agent" and not req.path.startswith(f"/v2/{user}/"):
                return hu._write(conn, req, 403, hu.error_body("DENIED"), [("Content-Type", "application/json")])
            if req.path == f"/v2/alice/private/blobs/{d}" and req.method == "GET":
                return held(conn, req)
            if req.path == f"/v2/alice/private/blobs/{d}":
                return hu._write(conn, req, 200, b"", [("Content-Length", str(len(secret))), ("Docker-Content-Digest", d)],
                                 content_length=False)
            return hu._write(conn, req, 404, hu.error_body("BLOB_UNKNOWN"), [("Content-Type", "application/json")])
        rep = hu.HostileUpstream(name="replica").start()
        self.addCleanup(rep.close)
        rep.on(r".*", replica)
        agent = bt.Berth()
        self.addCleanup(agent.cleanup)
        with open(os.path.join(agent.tmp, "agent-password"), "w") as f:
            f.write("agent-pw\n")
        agent.config = {"agent": {"replicas": [rep.url], "username": "node-agent",
                                  "password_file": os.path.join(agent.tmp, "agent-password")}}
        agent.ready_statuses = (401, 200)
        agent.start()
        alice, bob = bt.basic_auth("alice", "alice-pw"), bt.basic_auth("bob", "bob-pw")
        bob_path = f"/v2/bob/x/blobs/{d}"
        self.assertIn(agent.get(bob_path, headers=bob).status, (403, 404))

        t_alice, got_alice = background(lambda: agent.get(f"/v2/alice/private/blobs/{d}", headers=alice, timeout=60))
        bt.poll(lambda: any(d in r.target and r.method == "GET" for r in rep.busy()), 15,
                what="alice's fill held at the replica")
        r = answer_during(self, lambda: agent.get(bob_path, headers=bob, timeout=60), gate)
        self.assertIn(r.status, (403, 404), f"bob's GET of bob/x during alice's fill: {r.status}, {len(r.body)} bytes")
        gate.set()
        t_alice.join(60)
        self.assertEqual(got_alice["r"].status, 200)
        self.assertTrue(got_alice["r"].body == secret, "alice's bytes")
        r = agent.get(bob_path, headers=bob)
        self.assertIn(r.status, (403, 404), f"bob's GET of bob/x after alice's fill: {r.status}, {len(r.body)} bytes")
        self.assertNotIn(b"ALICE-PRIVATE", r.body)


# --------------------------------------------------------------------------- finding 2


class DockerSchema2IsJudged(unittest.TestCase):
    # (config media type, what the gzip tar layer claims to be)
    VARIANTS = [("application/octet-stream", "application/vnd.docker.container.image.v1+json"),
                ("application/json", "application/vnd.docker.distribution.manifest.list.v2+json")]

    @classmethod
    def setUpClass(cls):
        def configure(b):
            _, public = cosign.generate_key("p256")
            with open(os.path.join(b.tmp, "release.pub"), "wb") as f:
                f.write(public)
            return {"log": {"access": False}, "policies": [
                {"repositories": ["prod/**"], "require_signature": {"keys": ["release.pub"]}},
                {"repositories": ["tools/**"], "base_images": ["base/debian:bookworm*"]}]}
        cls.b = bt.serve(cls.addClassCleanup, configure)

    def test_unsigned_schema2_with_an_odd_config_is_refused(self):
        for i, (config_type, layer_type) in enumerate(self.VARIANTS):
            manifest, blobs = runnable(config_type, layer_type, DOCKER_MANIFEST)
            r = push_as(self.b, "prod/app", f"s2-{i}", manifest, blobs, media_type=DOCKER_MANIFEST)
            self.assertEqual(r.status, 201, r)
            for ref in (f"s2-{i}", bt.sha256_digest(manifest)):
                for method in ("GET", "HEAD"):
                    r = self.b.request(method, f"/v2/prod/app/manifests/{ref}", headers=ACCEPT)
                    self.assertEqual(r.status, 403, f"{method} prod/app:{ref} ({config_type}, {layer_type}): {r}")

    def test_schema2_off_every_base_is_refused(self):
        for i, (config_type, layer_type) in enumerate(self.VARIANTS):
            manifest, blobs = runnable(config_type, layer_type, DOCKER_MANIFEST)
            r = push_as(self.b, "tools/x", f"s2-{i}", manifest, blobs, media_type=DOCKER_MANIFEST)
            self.assertEqual(r.status, 403, f"PUT tools/x:s2-{i} ({config_type}, {layer_type}): {r}")
            self.assertEqual(r.error_codes(), ["DENIED"])
            self.assertEqual(self.b.get(f"/v2/tools/x/manifests/s2-{i}", headers=ACCEPT).status, 404)

    def test_a_layer_type_in_other_letters_is_still_a_layer(self):
        # Media types are case-insensitive: an image whose layer says "Application/..." is judged.
        for i, layer_type in enumerate(["Application/vnd.oci.image.layer.v1.tar+gzip",
                                        " application/vnd.oci.image.layer.v1.tar+gzip",
                                        "APPLICATION/VND.DOCKER.IMAGE.ROOTFS.DIFF.TAR.GZIP"]):
            manifest, blobs = runnable("application/octet-stream", layer_type)
            r = push_as(self.b, "prod/app", f"case-{i}", manifest, blobs)
            if r.status == 400:  # refused outright as malformed: as good
                continue
            self.assertEqual(r.status, 201, r)
            r = self.b.get(f"/v2/prod/app/manifests/case-{i}", headers=ACCEPT)
            self.assertEqual(r.status, 403, f"{layer_type!r}: {r}")

    def test_guard_an_oci_artifact_stays_readable_unsigned(self):
        manifest, blobs = manifest_of(json.dumps({"thing": os.urandom(4).hex()}).encode(),
                                      "application/vnd.example.thing.config.v1+json",
                                      [("application/vnd.example.thing.data.v1", os.urandom(300))],
                                      artifactType="application/vnd.example.thing.v1")
        for repo in ("prod/app", "tools/x"):
            r = push_as(self.b, repo, "artifact", manifest, blobs)
            self.assertEqual(r.status, 201, f"{repo}: {r}")
            r = self.b.get(f"/v2/{repo}/manifests/artifact", headers=ACCEPT)
            self.assertEqual(r.status, 200, f"{repo}: {r}")
            self.assertEqual(r.body, manifest)


# --------------------------------------------------------------------------- finding 3


class SignatureAmongManyReferrers(unittest.TestCase):
    def setUp(self):
        def configure(b):
            self.release, public = cosign.generate_key("p256")
            self.stranger, _ = cosign.generate_key("p256")
            with open(os.path.join(b.tmp, "release.pub"), "wb") as f:
                f.write(public)
            return {"log": {"access": False}, "policies": [
                {"repositories": ["prod/**"], "require_signature": {"keys": ["release.pub"], "match_repository": True}}]}
        self.b = bt.serve(self.addCleanup, configure)
        self.ref = f"127.0.0.1:{self.b.port}/prod/app"
        self.pushed = set()
        self.manifest, blobs = runnable()
        self.image = self.push(self.manifest, blobs, "v1")
        self.subject = (self.image, len(self.manifest), bt.OCI_MANIFEST)
        self.assertEqual(self.status(), 403, "unsigned")

    def push(self, manifest, blobs, ref=None):
        for digest, data in blobs.items():
            if digest not in self.pushed:
                self.b.push_blob("prod/app", data)
                self.pushed.add(digest)
        r = self.b.put_manifest("prod/app", ref or bt.sha256_digest(manifest), manifest)
        self.assertEqual(r.status, 201, r)
        return bt.sha256_digest(manifest)

    def status(self, method="GET"):
        return self.b.request(method, "/v2/prod/app/manifests/v1", headers=ACCEPT).status

    def push_sorting(self, make, count, before):
        """Push `count` manifests from make() -> (manifest, blobs) whose digests sort before `before`."""
        pushed = 0
        while pushed < count:
            manifest, blobs = make()
            if bt.sha256_digest(manifest) < before:
                self.push(manifest, blobs)
                pushed += 1

    def high(self, make):
        """A manifest from make() whose digest sorts late (after three quarters of all digests)."""
        while True:
            manifest, blobs = make()
            if bt.sha256_digest(manifest) >= "sha256:c":
                return manifest, blobs

    def assertReadable(self, what):
        for method in ("GET", "HEAD"):
            self.assertEqual(self.status(method), 200, f"{method} prod/app:v1 {what}")

    def test_seventy_sboms_sorting_before_the_signature(self):
        def bundle():  # cosign's statement, its subject naming prod/app (match_repository)
            statement = json.loads(cosign.in_toto_statement(self.image))
            statement["subject"][0] = {"name": self.ref, **statement["subject"][0]}
            signed = cosign.sigstore_bundle(self.release, cosign.proto_json(statement))
            manifest, _, blobs = cosign.bundle_manifest(*self.subject, bundle=signed)
            return manifest, blobs
        signature = self.push(*self.high(bundle))
        self.assertReadable("signed with a bundle")

        def sbom():
            data = json.dumps({"spdxVersion": "SPDX-2.3", "n": os.urandom(8).hex()}).encode()
            return manifest_of(b"{}", cosign.OCI_EMPTY, [(SPDX, data)], artifactType=SPDX,
                               subject=dict(zip(("digest", "size", "mediaType"), self.subject)))
        self.push_sorting(sbom, 70, signature)
        self.assertReadable("with 70 SBOM referrers sorting before its signature")

    def test_seventy_untrusted_signatures_after_the_real_one_and_a_restart(self):
        def signature(key):
            payload = cosign.simple_signing_payload(self.ref, self.image)
            manifest, _, blobs = cosign.referrers_signature_manifest(*self.subject, [(payload, cosign.sign(key, payload))])
            return manifest, blobs
        real = self.push(*self.high(lambda: signature(self.release)))
        self.assertReadable("signed")
        self.push_sorting(lambda: signature(self.stranger), 70, real)
        self.assertReadable("with 70 untrusted signatures attached after its own")
        self.b.stop()
        self.b.restart()
        self.assertReadable("with 70 untrusted signatures, after a restart")


# --------------------------------------------------------------------------- finding 4


def link_last(r):
    """The `last` of an answer's Link, or None."""
    link = r.header("Link")
    if not link:
        return None
    query = urllib.parse.urlsplit(link[link.index("<") + 1:link.index(">")]).query
    return urllib.parse.parse_qs(query)["last"][0]


def unseen(names, visible, last):
    """What a page of one after `last` holds if the hidden names did not exist: ([name] or [],
    where the next page starts or None). A page read past hidden names says there is more only when
    a name follows the one it lists; no visible name is followed by hidden names alone here."""
    after = [x for x in visible if x > last]
    if not after:
        return [], None
    return [after[0]], (after[0] if any(x > after[0] for x in names) else None)


PROBES = ["", "a", "acme", "acme-merger", "acme-merger/plans", "acme-mergez", "b", "bob", "bob/app", "bob0", "c",
          "confidential", "confidential-project-62", "confidential-project-62/app", "d", "m", "mixed", "mixed/open",
          "mixed/s", "mixed/secret", "mixed/z", "mixed0", "p", "public", "public/base", "z"]


class PagesSayNothingOfHiddenNames(unittest.TestCase):
    REPOS = ["acme-merger/plans", "bob/app", "confidential-project-62/app", "mixed/open", "mixed/secret", "public/base"]

    @classmethod
    def setUpClass(cls):
        everyone = ["anonymous", "authenticated"]
        cls.b = bt.serve(cls.addClassCleanup, passwords={"admin": "admin-pw", "bob": "bob-pw"}, config={
            "auth": {"htpasswd": "htpasswd", "rules": [
                {"repository": "**", "principals": ["user:admin"], "actions": ["pull", "push", "delete"]},
                {"repository": "${user}/**", "principals": ["authenticated"], "actions": ["pull", "push"]},
                {"repository": "public/**", "principals": everyone, "actions": ["pull"]},
                {"repository": "mixed/open", "principals": everyone, "actions": ["pull"]}]},
            "ui": {"enabled": True}, "log": {"access": False}})
        cls.bob = bt.basic_auth("bob", "bob-pw")
        for repo in cls.REPOS:
            img = bt.make_image((100,))
            r = push_as(cls.b, repo, "v1", img["manifest"], img["blobs"], bt.basic_auth("admin", "admin-pw"))
            assert r.status == 201, r

    def get(self, path, last, headers):
        r = self.b.get(f"{path}?n=1&last={urllib.parse.quote(last, safe='')}", headers=headers)
        self.assertEqual(r.status, 200, f"{path} after {last!r}: {r}")
        return r

    def test_catalog(self):
        visible = ["bob/app", "mixed/open", "public/base"]
        self.assertEqual(self.b.get("/v2/_catalog", headers=self.bob).json(), {"repositories": visible})
        for last in PROBES:
            r = self.get("/v2/_catalog", last, self.bob)
            self.assertEqual((r.json()["repositories"], link_last(r)), unseen(self.REPOS, visible, last),
                             f"bob's catalog page after {last!r}: {r} Link {r.header('Link')}")

    def test_usage_and_namespaces(self):
        names = ["acme-merger", "bob", "confidential-project-62", "mixed", "public"]
        # mixed/secret is hidden from both: the namespace mixed is listed to neither
        for path, who, visible in (("/_berth/v1/usage", self.bob, ["bob", "public"]),
                                   ("/ui/api/namespaces", {}, ["public"])):
            for last in PROBES:
                r = self.get(path, last, who)
                doc = r.json()
                self.assertEqual(([x["namespace"] for x in doc["namespaces"]], doc["next"]),
                                 unseen(names, visible, last), f"{path} after {last!r} as {who or 'anonymous'}: {r}")


class SealedCursorsHaveOneLength(unittest.TestCase):
    """10,005 repositories bob may not see, each its own namespace, names of 8 to 47 characters: a
    page after one of the first reads 10,000 hidden names and ends on a sealed cursor."""

    COUNT = 10005

    @classmethod
    def setUpClass(cls):
        b = bt.Berth()
        cls.addClassCleanup(b.cleanup)
        cls.namespaces = [f"h{i:05d}{'x' * (i % 40)}" for i in range(cls.COUNT)]
        layout = os.path.join(b.tmp, "layout")
        os.makedirs(os.path.join(layout, "blobs", "sha256"))
        img = bt.make_image((100,))
        for digest, data in [*img["blobs"].items(), (img["digest"], img["manifest"])]:
            with open(os.path.join(layout, "blobs", "sha256", digest.split(":")[1]), "wb") as f:
                f.write(data)
        entries = [{"mediaType": bt.OCI_MANIFEST, "digest": img["digest"], "size": len(img["manifest"]),
                    "annotations": {"org.opencontainers.image.ref.name": f"{ns}/r:1"}} for ns in cls.namespaces]
        with open(os.path.join(layout, "index.json"), "w") as f:
            json.dump({"schemaVersion": 2, "manifests": entries}, f)
        r = bt.run_cli("import", "--root", b.root, layout, timeout=240)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        bt.write_htpasswd(os.path.join(b.tmp, "htpasswd"), {"bob": "bob-pw"})
        b.config = {"auth": {"htpasswd": "htpasswd", "rules": [
            {"repository": "${user}/**", "principals": ["authenticated"], "actions": ["pull", "push"]}]},
            "ui": {"enabled": True}, "log": {"access": False}}
        b.ready_statuses = (401,)
        cls.b = b.start(timeout=180)  # opening 10,005 repositories takes a Debug ASan build a while

    def test_catalog_usage_and_namespaces(self):
        bob = bt.basic_auth("bob", "bob-pw")
        cursors = {}
        for k in range(4):  # the name sealed is the (k + 10,000)th: its length is 8 + (k + 10,000) % 40
            after = urllib.parse.quote(self.namespaces[k])
            r = self.b.get(f"/v2/_catalog?n=1&last={after}/r", headers=bob)
            self.assertEqual(r.json()["repositories"], [], r)
            cursors[f"catalog after {k}"] = link_last(r)
            r = self.b.get(f"/_berth/v1/usage?n=1&last={after}", headers=bob)
            cursors[f"usage after {k}"] = r.json()["next"]
            self.assertEqual(link_last(r), r.json()["next"])
            cursors[f"ui namespaces after {k}"] = self.b.get(f"/ui/api/namespaces?n=1&last={after}").json()["next"]
        for what, cursor in cursors.items():
            self.assertTrue(cursor and cursor.startswith("~"), f"{what}: {cursor!r} is no sealed cursor")
        lengths = {what: len(cursor) for what, cursor in cursors.items()}
        self.assertEqual(len(set(lengths.values())), 1, f"sealed cursors of names of different lengths: {lengths}")
        r = self.b.get(f"/v2/_catalog?n=1&last={urllib.parse.quote(cursors['catalog after 0'])}", headers=bob)
        self.assertEqual(r.status, 200, f"following a sealed cursor: {r}")


# --------------------------------------------------------------------------- findings 5 and 6


def htpasswd_line(user, password, cost=5):
    r = subprocess.run(["htpasswd", "-nbB", "-C", str(cost), user, password], capture_output=True, text=True,
                       timeout=60, check=True)
    return r.stdout.strip() + "\n"


class SessionsEndWithTheirHtpasswdEntry(unittest.TestCase):
    def setUp(self):
        self.b = bt.serve(self.addCleanup, passwords={"admin": "admin-pw", "alice": "alice-pw"}, config={
            "auth": {"htpasswd": "htpasswd", "rules": [
                {"repository": "**", "principals": ["user:admin"], "actions": ["pull", "push", "delete"]},
                {"repository": "${user}/**", "principals": ["authenticated"], "actions": ["pull", "push"]}]},
            "log": {"access": False}})
        self.htpasswd = os.path.join(self.b.tmp, "htpasswd")
        self.admin = self.session("admin", "admin-pw")
        self.alice = self.session("alice", "alice-pw")

    def session(self, user, password):
        r = self.b.request("POST", "/ui/login", body=urllib.parse.urlencode({"username": user, "password": password})
                           .encode(), headers=FORM)
        self.assertEqual(r.status, 303, r)
        cookie = (r.header("Set-Cookie") or "").split(";")[0]
        self.assertTrue(cookie.startswith("berth_session="), r.headers)
        self.assertEqual(self.whoami(cookie), user)
        return cookie

    def whoami(self, cookie):
        return self.b.get("/ui/api/whoami", headers={"Cookie": cookie}).json()["user"]

    def rewrite_alice(self, line):
        """Replace alice's entry (None: remove it); admin's entry stays as it is."""
        with open(self.htpasswd) as f:
            kept = [x for x in f if not x.startswith("alice:")]
        with open(self.htpasswd + ".new", "w") as f:
            f.writelines(kept + ([line] if line else []))
        os.replace(self.htpasswd + ".new", self.htpasswd)

    def assertSessionEnds(self, what):
        bt.poll(lambda: self.whoami(self.alice) is None, 6, what=f"alice's session ending once {what}")
        self.assertEqual(self.whoami(self.admin), "admin", "admin's entry did not change: its session goes on")

    def test_user_removed_from_the_file(self):
        self.rewrite_alice(None)
        self.assertSessionEnds("she is removed from the htpasswd file")
        self.assertEqual(self.b.get("/v2/", headers=bt.basic_auth("alice", "alice-pw")).status, 401)

    def test_user_given_a_new_password(self):
        self.rewrite_alice(htpasswd_line("alice", "alice-new-pw"))
        self.assertSessionEnds("she has a new password")
        self.session("alice", "alice-new-pw")


class CheaperHashesWaitAsLong(unittest.TestCase):
    def test_wrong_password_of_a_cost_4_user_takes_what_an_unknown_user_does(self):
        def configure(b):
            with open(os.path.join(b.tmp, "htpasswd"), "w") as f:
                f.write(htpasswd_line("cheap", "cheap-pw", 4) + htpasswd_line("costly", "costly-pw", 10))
            return {"auth": {"htpasswd": "htpasswd", "rules": [
                {"repository": "**", "principals": ["authenticated"], "actions": ["pull"]}]}, "log": {"access": False}}
        b = bt.serve(self.addCleanup, configure)
        self.assertEqual(b.get("/v2/", headers=bt.basic_auth("cheap", "cheap-pw")).status, 200)
        times = {"cheap": [], "nobody": []}
        for i in range(15):
            for user in times:
                started = time.monotonic()
                r = b.get("/v2/", headers=bt.basic_auth(user, f"wrong-{i}"))
                times[user].append(time.monotonic() - started)
                self.assertEqual(r.status, 401, r)
        known, unknown = statistics.median(times["cheap"]), statistics.median(times["nobody"])
        self.assertGreaterEqual(known, 0.5 * unknown, f"cost-4 user's wrong password {known:.4f} s, unknown {unknown:.4f} s")
        self.assertGreaterEqual(unknown, 0.5 * known, f"unknown user {unknown:.4f} s, cost-4 wrong password {known:.4f} s")


# --------------------------------------------------------------------------- finding 7


POLICY = {"policies": [{"repositories": ["prod/**"], "immutable_tags": True}]}


class ImportIntoAStoppedReplica(unittest.TestCase):
    def test_new_immutable_tag_into_a_replica_with_peers_fails(self):
        cluster = bt.Cluster(n=2, config=dict(POLICY, log={"access": False}))
        self.addCleanup(cluster.cleanup)
        cluster.start()
        cluster[0].push_image("prod/app", "v1")
        cluster.wait_caught_up()
        stopped = cluster[1]
        stopped.stop()
        layout = os.path.join(stopped.tmp, "layout")
        bt.oci_layout(layout, {"prod/app:v2": bt.make_image((2000,))})
        r = bt.run_cli("import", "--root", stopped.root, layout, timeout=120)
        self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("FAILED prod/app:v2", r.stdout)
        self.assertIn("too few replicas could be asked to decide it", r.stdout + r.stderr)
        stopped.restart()
        stopped.wait_readyz()
        cluster.wait_caught_up()
        for replica in cluster:
            r = replica.get("/v2/prod/app/manifests/v2", headers=ACCEPT)
            self.assertEqual(r.status, 404, f"{replica.replica_id}: prod/app:v2 after the import: {r}")
            self.assertEqual(replica.get("/v2/prod/app/manifests/v1", headers=ACCEPT).status, 200)

    def test_guard_into_a_store_without_peers_it_loads(self):
        b = bt.Berth(config=POLICY)
        self.addCleanup(b.cleanup)
        b.start()
        b.stop()  # the store remembers the configuration, policies and all
        layout = os.path.join(b.tmp, "layout")
        img = bt.make_image((2000,))
        bt.oci_layout(layout, {"prod/app:v2": img})
        r = bt.run_cli("import", "--root", b.root, layout, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("loaded prod/app:v2", r.stdout)
        b.restart()
        r = b.get("/v2/prod/app/manifests/v2", headers=ACCEPT)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.header("Docker-Content-Digest"), img["digest"])


if __name__ == "__main__":
    unittest.main()
