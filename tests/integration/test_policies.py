#!/usr/bin/env python3
"""Policies (the top-level `policies` list, docs/policies.md) on one registry.

require_signature: a manifest in prod/** is served only with a valid signature by one of the
policy's keys, made here exactly as cosign and containers/image make them (tests/lib/cosign.py):
the sha256-<hex>.sig tag, the same attached through the referrers API, and a Sigstore bundle
v0.3 (DSSE). Unsigned, signed by another key, for another digest or another repository
(match_repository): 403 DENIED naming the policy; signature artifacts, tag lists and referrers
stay readable; a signature pushed later, or a key rotated, takes effect without a restart; the
children of a signed index are served with it.

immutable_tags: a tag once pushed keeps its digest (the same digest again is fine); moving or
deleting it, or deleting the manifest it names, is 403 and changes nothing; retention keeps it.
"""

import base64
import json
import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
import cosign  # noqa: E402
import distribution as dist  # noqa: E402

INDEX = "application/vnd.oci.image.index.v1+json"


class SignaturePolicy(bt.ServerTest):
    @classmethod
    def configure(cls, b):
        cls.keys = {}
        for name, kind in (("release", "p256"), ("rsa", "rsa"), ("p384", "p384"), ("ed", "ed25519"),
                           ("stranger", "p256")):
            private, public = cosign.generate_key(kind)
            cls.keys[name] = private
            with open(os.path.join(b.tmp, f"{name}.pub"), "wb") as f:
                f.write(public)
        return {"policies": [
            {"repositories": ["prod/**"],
             "require_signature": {"keys": ["release.pub", "rsa.pub", "p384.pub", "ed.pub"],
                                   "match_repository": True}},
            {"repositories": ["tools/**"], "immutable_tags": True}],
            "retention": {"interval_seconds": 1,
                          "policies": [{"repositories": ["tools/**"], "keep_last": 1}]}}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.host = f"127.0.0.1:{cls.b.port}"

    # ---- helpers

    def push(self, repo, tag, manifest, blobs, media_type=bt.OCI_MANIFEST):
        for data in blobs.values():
            self.b.push_blob(repo, data)
        r = self.b.put_manifest(repo, tag, manifest, media_type)
        self.assertEqual(r.status, 201, r)
        return bt.sha256_digest(manifest)

    def image(self, repo, tag="v1"):
        img = bt.make_image((300,))
        self.push(repo, tag, img["manifest"], img["blobs"])
        return img

    def sign_tag(self, repo, digest, key="release", reference=None, signed_digest=None, scheme="cosign"):
        payload = cosign.simple_signing_payload(reference or f"{self.host}/{repo}", signed_digest or digest)
        entry = (payload, cosign.sign(self.keys[key], payload, scheme))
        manifest, _, blobs = cosign.signature_manifest([entry])
        self.push(repo, cosign.sig_tag(digest), manifest, blobs)

    def get(self, repo, ref, method="GET"):
        return self.b.request(method, f"/v2/{repo}/manifests/{ref}",
                              headers={"Accept": f"{bt.OCI_MANIFEST}, {INDEX}"})

    def assertRefused(self, repo, ref, words):
        r = self.get(repo, ref)
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.error_codes(), ["DENIED"])
        message = r.json()["errors"][0]["message"]
        self.assertIn("policies[0]", message)
        self.assertIn(words, message)
        self.assertEqual(self.get(repo, ref, "HEAD").status, 403)

    # ---- tests

    def test_unsigned_refused_signed_served_signatures_readable(self):
        repo = "prod/app"
        img = self.image(repo)
        self.assertRefused(repo, "v1", "unsigned")
        self.assertRefused(repo, img["digest"], "unsigned")
        self.assertEqual(self.b.get(f"/v2/{repo}/tags/list").status, 200)
        self.sign_tag(repo, img["digest"])  # pushed after the image: takes effect at once
        for ref in ("v1", img["digest"]):
            for method in ("GET", "HEAD"):
                r = self.get(repo, ref, method)
                self.assertEqual(r.status, 200, (ref, method, r))
        # The signature itself, its blobs, the referrers list: readable.
        sig = self.get(repo, cosign.sig_tag(img["digest"]))
        self.assertEqual(sig.status, 200)
        for layer in json.loads(sig.body)["layers"]:
            self.assertEqual(self.b.get(f"/v2/{repo}/blobs/{layer['digest']}").status, 200)
        self.assertEqual(self.b.get(f"/v2/{repo}/referrers/{img['digest']}").status, 200)
        metrics = self.b.metrics()
        self.assertGreater(metrics['berth_policy_refusals_total{policy="policies[0]",reason="unsigned"}'], 0)
        self.assertGreater(metrics['berth_signature_verifications_total{result="signed",cached="true"}'], 0)

    def test_bad_signatures_refused(self):
        cases = [
            ("another key", dict(key="stranger"), "does not verify"),
            ("another digest", dict(signed_digest="sha256:" + "0" * 64), "another manifest"),
            ("another repository", dict(reference=None, other_repo=True), "another repository"),
        ]
        for n, (what, kw, words) in enumerate(cases):
            with self.subTest(what):
                repo = f"prod/bad{n}"
                img = self.image(repo)
                if kw.pop("other_repo", False):
                    kw["reference"] = f"{self.host}/prod/elsewhere"
                self.sign_tag(repo, img["digest"], **kw)
                self.assertRefused(repo, "v1", words)

    def test_names_of_the_repository(self):
        for n, reference in enumerate(["prod/names0", "registry.example/prod/names1:v1", "localhost:5000/prod/names2"]):
            repo = f"prod/names{n}"
            img = self.image(repo)
            self.sign_tag(repo, img["digest"], reference=reference)
            self.assertEqual(self.get(repo, "v1").status, 200, reference)

    def test_key_kinds_and_writers(self):
        # RSA and P-384 as cosign 2.6+ signs; P-256 and Ed25519 as containers/image does.
        for n, (key, scheme) in enumerate((("rsa", "cosign"), ("p384", "cosign"), ("p384", "legacy"),
                                           ("ed", "legacy"), ("release", "legacy"))):
            with self.subTest(key=key, scheme=scheme):
                repo = f"prod/kind{n}"
                img = self.image(repo)
                self.sign_tag(repo, img["digest"], key=key, scheme=scheme)
                self.assertEqual(self.get(repo, "v1").status, 200)

    def test_skopeo_writes_the_signature(self):
        """skopeo copies an image with its sigstore signature from a dir: layout, writing the .sig
        attachment itself (use-sigstore-attachments in a registries.d file), as containers/image
        does on every copy; the image then pulls."""
        if not shutil.which("skopeo"):
            self.skipTest("skopeo is not installed")
        repo = "prod/skopeo"
        img = bt.make_image((500,))
        src = os.path.join(self.b.tmp, "dir-image")
        os.makedirs(src)
        with open(os.path.join(src, "version"), "w") as f:
            f.write("Directory Transport Version: 1.1\n")
        with open(os.path.join(src, "manifest.json"), "wb") as f:
            f.write(img["manifest"])
        for digest, data in img["blobs"].items():
            with open(os.path.join(src, digest.split(":")[1]), "wb") as f:
                f.write(data)
        payload = cosign.containers_image_payload(f"{self.host}/{repo}:v1", img["digest"], "containers/image test",
                                                  1700000000)
        signature = base64.b64encode(cosign.sign(self.keys["release"], payload, "legacy")).decode()
        # containers/image's dir: signature file: NUL, the format's name, a newline, its JSON.
        with open(os.path.join(src, "signature-1"), "wb") as f:
            f.write(b"\x00sigstore-json\n" + json.dumps({
                "mimeType": cosign.SIMPLESIGNING, "payload": base64.b64encode(payload).decode(),
                "annotations": {cosign.SIG_ANNOTATION: signature}}).encode())
        registries = os.path.join(self.b.tmp, "registries.d")
        os.makedirs(registries)
        with open(os.path.join(registries, "berth.yaml"), "w") as f:
            f.write(f"docker:\n  {self.host}:\n    use-sigstore-attachments: true\n")
        copied = subprocess.run(["skopeo", "--registries.d", registries, "copy", "--dest-tls-verify=false",
                                 f"dir:{src}", f"docker://{self.host}/{repo}:v1"],
                                capture_output=True, text=True, timeout=120)
        self.assertEqual(copied.returncode, 0, copied.stderr)
        self.assertEqual(self.get(repo, cosign.sig_tag(img["digest"])).status, 200, "skopeo wrote the .sig")
        r = self.get(repo, "v1")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.header("Docker-Content-Digest"), img["digest"])

    def test_signature_through_referrers(self):
        repo = "prod/referred"
        img = self.image(repo)
        payload = cosign.simple_signing_payload(f"{self.host}/{repo}", img["digest"])
        manifest, _, blobs = cosign.referrers_signature_manifest(
            img["digest"], len(img["manifest"]), bt.OCI_MANIFEST, [(payload, cosign.sign(self.keys["release"], payload))])
        self.push(repo, bt.sha256_digest(manifest), manifest, blobs)
        self.assertEqual(self.get(repo, "v1").status, 200)

    def test_sigstore_bundle(self):
        for n, (key, spaced) in enumerate((("release", False), ("release", True), ("p384", False))):
            with self.subTest(key=key, spaced=spaced):
                repo = f"prod/bundle{n}"
                img = self.image(repo)
                self.assertRefused(repo, "v1", "unsigned")
                # cosign's statement binds the digest only: under match_repository it names no
                # repository, so the same bundle copied into another repository must not pass.
                manifest, _, blobs = cosign.bundle_manifest(img["digest"], len(img["manifest"]), bt.OCI_MANIFEST,
                                                            private_key=self.keys[key], spaced=spaced)
                self.push(repo, bt.sha256_digest(manifest), manifest, blobs)
                self.assertRefused(repo, "v1", "does not name this repository")
                algorithm, hex_digest = img["digest"].split(":")
                statement = cosign.proto_json({"_type": "https://in-toto.io/Statement/v1",
                                               "subject": [{"name": f"registry.example/{repo}",
                                                            "digest": {algorithm: hex_digest}}],
                                               "predicateType": cosign.SIGN_PREDICATE, "predicate": {}}, spaced)
                bundle = cosign.sigstore_bundle(self.keys[key], statement, spaced=spaced)
                manifest, _, blobs = cosign.bundle_manifest(img["digest"], len(img["manifest"]), bt.OCI_MANIFEST,
                                                            bundle=bundle)
                self.push(repo, bt.sha256_digest(manifest), manifest, blobs)
                self.assertEqual(self.get(repo, "v1").status, 200)
        # An attestation (another predicate) is no signature; nor is one over another digest.
        repo = "prod/bundle-bad"
        img = self.image(repo)
        algorithm, hex_digest = img["digest"].split(":")
        attestation = json.dumps({"_type": "https://in-toto.io/Statement/v1",
                                  "subject": [{"digest": {algorithm: hex_digest}}],
                                  "predicateType": "https://slsa.dev/provenance/v1", "predicate": {}}).encode()
        other = cosign.in_toto_statement("sha256:" + "1" * 64)
        for statement in (attestation, other):
            bundle = cosign.sigstore_bundle(self.keys["release"], statement)
            manifest, _, blobs = cosign.bundle_manifest(img["digest"], len(img["manifest"]), bt.OCI_MANIFEST,
                                                        bundle=bundle)
            self.push(repo, bt.sha256_digest(manifest), manifest, blobs)
        self.assertEqual(self.get(repo, "v1").status, 403)

    def test_signed_index_serves_its_children(self):
        repo = "prod/multi"
        children = [self.image(repo, tag=f"child{i}") for i in range(2)]
        index = json.dumps({"schemaVersion": 2, "mediaType": INDEX, "manifests": [
            {"mediaType": bt.OCI_MANIFEST, "digest": c["digest"], "size": len(c["manifest"]),
             "platform": {"architecture": arch, "os": "linux"}} for c, arch in zip(children, ("amd64", "arm64"))]}
        ).encode()
        digest = self.push(repo, "v1", index, {}, INDEX)
        self.assertRefused(repo, "v1", "unsigned")
        self.assertRefused(repo, children[0]["digest"], "unsigned")
        self.sign_tag(repo, digest)
        self.assertEqual(self.get(repo, "v1").status, 200)
        for child in children:
            self.assertEqual(self.get(repo, child["digest"]).status, 200)

    def test_rotated_key_takes_effect_without_restart(self):
        repo = "prod/rotated"
        img = self.image(repo)
        self.sign_tag(repo, img["digest"], key="ed", scheme="legacy")
        self.assertEqual(self.get(repo, "v1").status, 200)
        path = os.path.join(self.b.tmp, "ed.pub")
        with open(path, "rb") as f:
            original = f.read()

        def replace_key(pem, later):
            with open(path + ".new", "wb") as f:
                f.write(pem)
            os.replace(path + ".new", path)
            os.utime(path, (os.path.getmtime(path) + later,) * 2)  # a visibly newer mtime

        try:
            replace_key(cosign.generate_key("ed25519")[1], 5)
            bt.poll(lambda: self.get(repo, "v1").status == 403, 10, 0.2, "the rotated key to apply")
        finally:
            replace_key(original, 10)
        bt.poll(lambda: self.get(repo, "v1").status == 200, 10, 0.2, "the key restored")

    def test_immutable_tags(self):
        repo = "tools/x"
        first = bt.make_image((200,))
        self.push(repo, "v1", first["manifest"], first["blobs"])
        self.push(repo, "v1", first["manifest"], first["blobs"])  # the same digest again: fine
        second = bt.make_image((200,))
        for data in second["blobs"].values():
            self.b.push_blob(repo, data)
        r = self.b.put_manifest(repo, "v1", second["manifest"])
        self.assertEqual(r.status, 403, r)
        self.assertEqual(r.error_codes(), ["DENIED"])
        self.assertIn("policies[1]", r.json()["errors"][0]["message"])
        for target in ("v1", first["digest"]):
            r = self.b.request("DELETE", f"/v2/{repo}/manifests/{target}")
            self.assertEqual(r.status, 403, (target, r))
        self.assertEqual(self.get(repo, "v1").header("Docker-Content-Digest"), first["digest"])
        # Retention would keep only the newest tag of tools/**: v1 stays.
        self.push(repo, "v2", second["manifest"], {})
        before = self.b.metrics().get("berth_retention_runs_total", 0)
        bt.poll(lambda: self.b.metrics().get("berth_retention_runs_total", 0) >= before + 2, 20, 0.2,
                "two retention rounds")
        self.assertEqual(self.get(repo, "v1").header("Docker-Content-Digest"), first["digest"])
        self.assertEqual(self.get(repo, "v2").status, 200)
        self.assertGreater(self.b.metrics()['berth_policy_refusals_total{policy="policies[1]",reason="immutable_tag"}'], 0)


@unittest.skipUnless(dist.available(), "docker-registry is not installed")
class MirroredSignatures(unittest.TestCase):
    """A policy over a mirrored repository: the upstream's .sig is fetched with the image (a real
    Distribution as docker.io), so an image signed upstream pulls through berth and an unsigned
    one does not."""

    def test_signature_fetched_from_the_upstream(self):
        upstream = dist.Distribution()
        self.addCleanup(upstream.cleanup)
        upstream.start()
        b = bt.Berth()
        self.addCleanup(b.cleanup)
        private, public = cosign.generate_key("p256")
        with open(os.path.join(b.tmp, "release.pub"), "wb") as f:
            f.write(public)
        b.config = {"proxy": {"upstreams": [{"host": "docker.io", "url": upstream.url}]},
                    "policies": [{"repositories": ["docker.io/**"],
                                  "require_signature": {"keys": ["release.pub"], "match_repository": True}}]}
        b.start()
        signed = upstream.push_image("library/signed", "v1", layer_sizes=(300,))
        upstream.push_image("library/unsigned", "v1", layer_sizes=(300,))
        payload = cosign.simple_signing_payload("index.docker.io/library/signed", signed["digest"])
        manifest, _, blobs = cosign.signature_manifest([(payload, cosign.sign(private, payload))])
        for data in blobs.values():
            upstream.push_blob("library/signed", data)
        upstream.put_manifest("library/signed", cosign.sig_tag(signed["digest"]), manifest)

        accept = {"Accept": bt.OCI_MANIFEST}
        r = b.get("/v2/library/signed/manifests/v1?ns=docker.io", headers=accept)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.header("Docker-Content-Digest"), signed["digest"])
        r = b.get("/v2/library/unsigned/manifests/v1?ns=docker.io", headers=accept)
        self.assertEqual(r.status, 403, r)
        self.assertIn("unsigned", r.json()["errors"][0]["message"])
        # Stored here now: the signed image is served with the upstream gone.
        upstream.stop()
        self.assertEqual(b.get("/v2/docker.io/library/signed/manifests/v1", headers=accept).status, 200)


BASE_PASSWORDS = {"root": "root-pw", "alice": "alice-pw", "bob": "bob-pw"}


def layer(size=400):
    return os.urandom(size)


def image_on(layers, arch="amd64"):
    """An OCI image with these layers (bytes) and a config for linux/<arch>: (manifest, blobs)."""
    img = bt.image_of(layers, arch)
    return img["manifest"], img["blobs"]


class BaseImages(bt.ServerTest):
    """base_images: an image pushed to tools/**, alice/** or bob/** begins with the whole layer list of
    a manifest some base/debian:bookworm* or base/python:3.* tag names or named, for its platform."""

    passwords = BASE_PASSWORDS
    config = {
        "auth": {"htpasswd": "htpasswd", "rules": [
            {"repository": "**", "principals": ["user:root"], "actions": ["pull", "push", "delete"]},
            {"repository": "base/**", "principals": ["authenticated"], "actions": ["pull"]},
            {"repository": "${user}/**", "principals": ["authenticated"], "actions": ["pull", "push"]}]},
        "policies": [{"name": "bases", "repositories": ["tools/**", "alice/**", "bob/**"],
                      "base_images": ["base/debian:bookworm*", "base/python:3.*"]}]}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # base/debian:bookworm: an index of two platforms, each one layer
        cls.amd_layer, cls.arm_layer = layer(), layer()
        cls.amd = cls.push("base/debian", None, *image_on([cls.amd_layer], "amd64"))
        cls.arm = cls.push("base/debian", None, *image_on([cls.arm_layer], "arm64"))
        cls.bookworm = cls.push_index("base/debian", "bookworm", [(cls.amd, "amd64"), (cls.arm, "arm64")])
        # base/python:3.12 (two layers) and base/python:latest (not approved)
        cls.py_layers = [layer(), layer()]
        cls.python = cls.push("base/python", "3.12", *image_on(cls.py_layers))
        cls.latest_layer = layer()
        cls.push("base/python", "latest", *image_on([cls.latest_layer]))

    # ---- helpers

    @classmethod
    def push(cls, repo, tag, manifest, blobs, user="root", media_type=bt.OCI_MANIFEST, expect=201):
        headers = bt.basic_auth(user, BASE_PASSWORDS[user])
        for digest, data in blobs.items():
            r = cls.b.request("POST", f"/v2/{repo}/blobs/uploads/?digest={digest}", body=data,
                              headers={**headers, "Content-Type": "application/octet-stream"})
            assert r.status == 201, r
        digest = bt.sha256_digest(manifest)
        r = cls.b.request("PUT", f"/v2/{repo}/manifests/{tag or digest}", body=manifest,
                          headers={**headers, "Content-Type": media_type})
        assert r.status == expect, (r, r.body[:500])
        return digest if expect == 201 else r.json()["errors"][0]

    @classmethod
    def push_index(cls, repo, tag, children, user="root", expect=201):
        index = json.dumps({"schemaVersion": 2, "mediaType": INDEX, "manifests": [
            {"mediaType": bt.OCI_MANIFEST, "digest": d, "size": len(cls.manifest_bytes(repo, d)),
             "platform": {"os": "linux", "architecture": arch}} for d, arch in children]}).encode()
        return cls.push(repo, tag, index, {}, user, INDEX, expect)

    @classmethod
    def manifest_bytes(cls, repo, digest):
        r = cls.b.request("GET", f"/v2/{repo}/manifests/{digest}",
                          headers={**bt.basic_auth("root", "root-pw"), "Accept": bt.OCI_MANIFEST})
        assert r.status == 200, r
        return r.body

    def lineage(self, query, user="root"):
        headers = bt.basic_auth(user, BASE_PASSWORDS[user]) if user else {}
        return self.b.request("GET", f"/_berth/v1/lineage?{query}", headers=headers)

    def assertRefused(self, error, *words):
        self.assertEqual(error["code"], "DENIED", error)
        for word in ("bases:",) + words:
            self.assertIn(word, error["message"])

    # ---- tests

    def test_built_on_each_platform_of_an_approved_index(self):
        self.push("tools/amd", "1", *image_on([self.amd_layer, layer()], "amd64"))
        self.push("tools/arm", "1", *image_on([self.arm_layer, layer()], "arm64"))
        # the same base, image and all, with nothing added
        self.push("tools/same", "1", *image_on([self.amd_layer], "amd64"))

    def test_another_platforms_layers_are_refused(self):
        error = self.push("tools/mixed", "1", *image_on([self.arm_layer, layer()], "amd64"), expect=403)
        self.assertRefused(error, "linux/arm64", "not linux/amd64")

    def test_unrelated_and_partial_bases_are_refused_and_nothing_is_stored(self):
        stranger = layer()
        error = self.push("tools/y", "1", *image_on([stranger, layer()]), expect=403)
        self.assertRefused(error, "layer 1 (" + bt.sha256_digest(stranger) + ")", "diverges")
        # the first of python's two layers only
        error = self.push("tools/short", "1", *image_on([self.py_layers[0], layer()]), expect=403)
        self.assertRefused(error, "layer 2 (", "shares 1 of its 2 layers")
        error = self.push("tools/shorter", "1", *image_on([self.py_layers[0]]), expect=403)
        self.assertRefused(error, "only the beginning of base/python@" + self.python)
        # base/python:latest is not 3.*
        error = self.push("tools/latest", "1", *image_on([self.latest_layer, layer()]), expect=403)
        self.assertRefused(error, "layer 1 (")
        for repo in ("tools/y", "tools/short", "tools/shorter", "tools/latest"):
            r = self.b.request("GET", f"/v2/{repo}/manifests/1", headers=bt.basic_auth("root", "root-pw"))
            self.assertEqual(r.status, 404, repo)
        self.assertGreaterEqual(
            self.b.metrics()['berth_policy_refusals_total{policy="bases",reason="unapproved_base"}'], 4)

    def test_an_older_untagged_version_stays_approved(self):
        old_layer = layer()
        old = self.push("base/python", "3.11", *image_on([old_layer]))
        self.push("base/python", "3.11", *image_on([layer()]))  # the tag moves on; old is untagged
        self.push("tools/old", "1", *image_on([old_layer, layer()]))
        answer = self.lineage("repository=base/python&reference=3.11").json()
        self.assertEqual(answer["base"]["versions"][0], old)
        derived = {d["repository"]: d for d in answer["derived"]}
        self.assertEqual(derived["tools/old"]["base_digest"], old)
        self.assertFalse(derived["tools/old"]["current"])

    def test_signatures_and_artifacts_are_not_judged(self):
        target = self.push("tools/signed", "1", *image_on([self.py_layers[0], self.py_layers[1], layer()]))
        key, _ = cosign.generate_key("p256")
        payload = cosign.simple_signing_payload("example.com/tools/signed", target)
        for writer in ("cosign", "containers/image"):
            manifest, _, blobs = cosign.signature_manifest([(payload, cosign.sign(key, payload, "cosign"))], writer)
            self.push("tools/signed", None if writer == "cosign" else cosign.sig_tag(target), manifest, blobs)
        # an artifact attached through the referrers API
        sbom = b'{"sbom": true}'
        manifest = json.dumps({"schemaVersion": 2, "mediaType": bt.OCI_MANIFEST, "artifactType": "application/spdx+json",
                               "config": {"mediaType": "application/vnd.oci.empty.v1+json",
                                          "digest": bt.sha256_digest(b"{}"), "size": 2},
                               "layers": [{"mediaType": "application/spdx+json", "digest": bt.sha256_digest(sbom),
                                           "size": len(sbom)}],
                               "subject": {"mediaType": bt.OCI_MANIFEST, "digest": target,
                                           "size": len(self.manifest_bytes("tools/signed", target))}}).encode()
        self.push("tools/signed", None, manifest, {bt.sha256_digest(b"{}"): b"{}", bt.sha256_digest(sbom): sbom})

    def test_an_index_is_judged_by_its_children(self):
        amd = self.push("tools/multi", None, *image_on([self.amd_layer, layer()], "amd64"))
        arm = self.push("tools/multi", None, *image_on([self.arm_layer, layer()], "arm64"))
        index = self.push_index("tools/multi", "1", [(amd, "amd64"), (arm, "arm64")])
        answer = self.lineage("repository=base/debian&reference=bookworm").json()
        found = {(d["repository"], d["digest"]): d for d in answer["derived"]}
        self.assertEqual(found[("tools/multi", amd)]["base_digest"], self.bookworm)
        self.assertEqual(found[("tools/multi", arm)]["base_digest"], self.bookworm)
        self.assertNotIn(("tools/multi", index), found)

    def test_lineage_lists_what_the_caller_may_pull(self):
        alice = self.push("alice/app", "v1", *image_on([self.amd_layer, layer()]), user="alice")
        bob = self.push("bob/app", "v1", *image_on([self.amd_layer, layer()]), user="bob")
        seen = {}
        for user in ("root", "alice", "bob"):
            answer = self.lineage("repository=base/debian&reference=bookworm", user)
            self.assertEqual(answer.status, 200, answer)
            seen[user] = {(d["repository"], d["digest"]) for d in answer.json()["derived"]}
            self.assertEqual(answer.json()["base"]["digest"], self.bookworm)
        self.assertIn(("alice/app", alice), seen["root"])
        self.assertIn(("bob/app", bob), seen["root"])
        self.assertEqual(seen["alice"], {("alice/app", alice)})
        self.assertEqual(seen["bob"], {("bob/app", bob)})
        self.assertEqual(self.lineage("repository=base/debian&reference=bookworm", None).status, 401)
        # a base the caller may not pull: refused, not an empty list
        r = self.lineage("repository=bob/app&reference=v1", "alice")
        self.assertEqual(r.status, 403, r)

    def test_lineage_pages_and_current(self):
        for i in range(5):
            self.push(f"tools/page{i}", "1", *image_on([self.amd_layer, layer()]))
        everything = self.lineage("repository=base/debian&reference=bookworm&n=1000").json()["derived"]
        pages, query = [], "repository=base/debian&reference=bookworm&n=2"
        while True:
            r = self.lineage(query)
            self.assertEqual(r.status, 200, r)
            pages.extend(r.json()["derived"])
            if r.json()["next"] is None:
                self.assertIsNone(r.header("Link"))
                break
            self.assertEqual(r.header("Link"), f'<{r.json()["next"]}>; rel="next"')
            query = r.json()["next"].split("?", 1)[1]
        self.assertEqual(pages, everything)
        self.assertTrue(all(d["current"] for d in everything if d["base_digest"] == self.bookworm))

    def test_lineage_refuses_bad_questions(self):
        for query, status, code in (
                ("repository=base/debian&reference=trixie", 404, "MANIFEST_UNKNOWN"),
                ("repository=Base&reference=bookworm", 400, "NAME_INVALID"),
                ("repository=base/debian&reference=bookworm&last=nonsense", 400, None),
                ("repository=base/debian&reference=bookworm&n=x", 400, None)):
            with self.subTest(query=query):
                r = self.lineage(query)
                self.assertEqual(r.status, status, r)
                if code:
                    self.assertEqual(r.json()["errors"][0]["code"], code)


class PolicyConfiguration(unittest.TestCase):
    def test_checked_at_start(self):
        for policies, message in (
                ([{"repositories": ["prod/**"]}], "has no rule"),
                ([{"repositories": ["prod/**"], "require_signature": {"keys": ["missing.pub"]}}], "cannot read"),
                ([{"repositories": ["prod/**"], "require_signature": {"keys": []}}], "must list PEM public key"),
                ([{"repositories": ["prod/**"], "base_images": ["base/debian"]}], "is not REPOSITORY:TAG"),
                ([{"repositories": ["prod/**"], "immutable_tags": True, "colour": 1}], "unknown key policies[0].colour")):
            with self.subTest(message=message):
                b = bt.Berth(config={"policies": policies})
                self.addCleanup(b.cleanup)
                with self.assertRaises(AssertionError) as failed:
                    b.start(timeout=10)
                self.assertIn(message, str(failed.exception))


if __name__ == "__main__":
    unittest.main(verbosity=2)
