#!/usr/bin/env python3
"""Issue 34, findings 3, 4, 10 and 11 (/work/notes/contract-34.md): what the policies judge.

Finding 3, require_signature on prod/**: an unsigned image stays refused (GET and HEAD, by tag
and by digest: 403 DENIED) however it is dressed as an artifact: with a `subject`, an
`artifactType`, tagged sha256-<hex>.sig / .att / .sbom or bare sha256-<hex>, or with its tar
layers relabelled application/vnd.dev.cosign.simplesigning.v1+json (also a JSON layer over
64 KiB). An index is always judged, even with a subject or under an attachment tag.
Guards: cosign .sig manifests (cosign and containers/image writers, Docker media types), a
cosign .att, the referrers-API signature, a Sigstore bundle and an SBOM with an empty config and
artifactType stay readable unsigned; a correctly signed image is served. What stays readable is
told by shape, not by reference: an SBOM without subject and a cosign .att are readable by digest.

Finding 4, base_images on tools/**: PUT /v2/tools/x/manifests/sha256-<hex>.sig?tag=1 (and
.att, .sbom, bare) of an image on no approved base is 403 and tools/x:1 stays unknown; the same
image with a subject (or artifactType) is 403; tar layers relabelled simple signing too.
Guards: an image on the approved base, a cosign .sig and an SBOM referrer are accepted.

Finding 10, threads.io 1: an image with a .sig and 63 referrers, each of 1,000 simple-signing
layers over one 64 KiB payload signed by a key the policy does not trust: the anonymous GET
(and HEAD) answers 403 within 3 s and /healthz answers within 0.5 s all the while.

Finding 11, match_repository: a Sigstore bundle made for dev/app (no subject name, or a name
naming dev/app) copied with the image into prod/app does not make prod/app's copy readable.
Guards: a .sig whose docker-reference names prod/app, or a bundle whose in-toto subject name
names prod/app, makes it readable.
"""

import base64
import gzip
import http.client
import io
import json
import os
import sys
import tarfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
import cosign  # noqa: E402

INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"
OCI_TAR = "application/vnd.oci.image.layer.v1.tar"
SPDX = "application/spdx+json"
DSSE = "application/vnd.dsse.envelope.v1+json"
SLSA = "https://slsa.dev/provenance/v1"
ARTIFACT_CONFIG = "application/vnd.example.thing.config.v1+json"
ACCEPT = {"Accept": ", ".join([bt.OCI_MANIFEST, INDEX, cosign.DOCKER_MANIFEST, DOCKER_LIST])}
KIB = 1024


# --------------------------------------------------------------------------- content made here


def tar_of(files):
    """An uncompressed tar holding {name: bytes}, as a real image layer."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o755, 1700000000
            t.addfile(info, io.BytesIO(data))
    return out.getvalue()


def a_tar():
    return tar_of({"bin/hello": b"\x7fELF" + os.urandom(600), "etc/motd": os.urandom(64)})


def image_config(layers):
    return json.dumps({"architecture": "amd64", "os": "linux", "config": {"Entrypoint": ["/bin/hello"]},
                       "rootfs": {"type": "layers", "diff_ids": [bt.sha256_digest(x) for x in layers]},
                       "nonce": os.urandom(8).hex()}).encode()


def descriptor(media_type, data, **extra):
    return dict({"mediaType": media_type, "digest": bt.sha256_digest(data), "size": len(data)}, **extra)


def manifest_of(config, config_type, layers, media_type=bt.OCI_MANIFEST, **extra):
    """(manifest bytes, blobs) of a manifest: layers is [(media type, bytes, {extra descriptor keys})]."""
    doc = {"schemaVersion": 2, "mediaType": media_type, "config": descriptor(config_type, config),
           "layers": [descriptor(t, d, **(x[0] if x else {})) for t, d, *x in layers]}
    doc.update(extra)
    blobs = {bt.sha256_digest(config): config}
    blobs.update({bt.sha256_digest(d): d for _, d, *_ in layers})
    return json.dumps(doc).encode(), blobs


def runnable_image(layer_type=bt.OCI_LAYER, config_type=bt.OCI_CONFIG, media_type=bt.OCI_MANIFEST, gz=True, **extra):
    """An image a runtime would run (image config, a tar layer) with whatever the caller adds."""
    tar = a_tar()
    layer = gzip.compress(tar) if gz else tar
    return manifest_of(image_config([tar]), config_type, [(layer_type, layer)], media_type, **extra)


def sbom_manifest(**extra):
    """(manifest, blobs) of an SPDX SBOM as oras/syft attach it: empty config, artifactType."""
    sbom = json.dumps({"spdxVersion": "SPDX-2.3", "name": os.urandom(4).hex()}).encode()
    return manifest_of(b"{}", cosign.OCI_EMPTY, [(SPDX, sbom)], artifactType=SPDX, **extra)


def attachment_tag(suffix):
    """cosign's sha256-<hex>.sig/.att/.sbom tags, or the referrers fallback tag (suffix "")."""
    return "sha256-" + os.urandom(32).hex() + suffix


def in_toto(digest, name=None, variant="v3.0.6"):
    """cosign's signing statement, with an in-toto subject `name` when given."""
    statement = json.loads(cosign.in_toto_statement(digest, variant=variant))
    if name is not None:
        statement["subject"][0] = {"name": name, **statement["subject"][0]}
    return cosign.proto_json(statement)


class PolicyServer(unittest.TestCase):
    """One berth with the policies of findings 3, 4 and 11, and the helpers their tests share."""

    @classmethod
    def setUpClass(cls):
        b = bt.Berth()
        cls.b = b
        cls.addClassCleanup(b.cleanup)
        cls.release, public = cosign.generate_key("p256")
        cls.stranger, _ = cosign.generate_key("p256")
        with open(os.path.join(b.tmp, "release.pub"), "wb") as f:
            f.write(public)
        b.config = {"log": {"access": False}, "policies": [
            {"repositories": ["prod/**"], "require_signature": {"keys": ["release.pub"], "match_repository": True}},
            {"name": "bases", "repositories": ["tools/**"], "base_images": ["base/debian:bookworm*"]}]}
        b.start()
        cls.host = f"127.0.0.1:{b.port}"
        cls.base_tar = a_tar()
        manifest, blobs = manifest_of(image_config([cls.base_tar]), bt.OCI_CONFIG, [(OCI_TAR, cls.base_tar)])
        cls.push_ok("base/debian", "bookworm", manifest, blobs)

    # ---- helpers

    @classmethod
    def push_blobs(cls, repo, blobs):
        for data in blobs.values():
            cls.b.push_blob(repo, data)

    @classmethod
    def push_ok(cls, repo, ref, manifest, blobs, media_type=bt.OCI_MANIFEST):
        cls.push_blobs(repo, blobs)
        r = cls.b.put_manifest(repo, ref or bt.sha256_digest(manifest), manifest, media_type)
        assert r.status == 201, (repo, ref, r)
        return bt.sha256_digest(manifest)

    def get(self, repo, ref, method="GET"):
        return self.b.request(method, f"/v2/{repo}/manifests/{ref}", headers=ACCEPT)

    def assertRefused(self, repo, refs, what=""):
        for ref in refs:
            for method in ("GET", "HEAD"):
                r = self.get(repo, ref, method)
                self.assertEqual(r.status, 403, f"{what}: {method} {repo}:{ref} -> {r}")
                if method == "GET":
                    self.assertEqual(r.error_codes(), ["DENIED"], f"{what}: {r}")

    def assertServed(self, repo, refs, digest, what=""):
        for ref in refs:
            for method in ("GET", "HEAD"):
                r = self.get(repo, ref, method)
                self.assertEqual(r.status, 200, f"{what}: {method} {repo}:{ref} -> {r}")
                self.assertEqual(r.header("Docker-Content-Digest"), digest, what)

    def target(self, repo):
        """An unsigned image pushed by digest, to be a subject: its descriptor."""
        manifest, blobs = runnable_image()
        self.push_ok(repo, None, manifest, blobs)
        return descriptor(bt.OCI_MANIFEST, manifest)

    def sig_entry(self, repo, digest, key=None, reference=None):
        payload = cosign.simple_signing_payload(reference or f"{self.host}/{repo}", digest)
        return payload, cosign.sign(key or self.release, payload)


class SignaturesJudgeImagesNotTheirDress(PolicyServer):
    """Finding 3."""

    def test_unsigned_image_with_a_subject_or_artifact_type_is_refused(self):
        variants = [
            ("subject", {}, True),
            ("subject and artifactType", {"artifactType": "application/vnd.example.thing"}, True),
            ("artifactType", {"artifactType": "application/vnd.example.thing"}, False),
            ("artifact config, tar+gzip layer, subject", {"config_type": ARTIFACT_CONFIG}, True),
            ("artifact config, docker rootfs layer, subject",
             {"config_type": ARTIFACT_CONFIG, "layer_type": DOCKER_LAYER}, True),
            ("artifact config, uncompressed tar layer, artifactType, subject",
             {"config_type": ARTIFACT_CONFIG, "layer_type": OCI_TAR, "gz": False,
              "artifactType": "application/vnd.example.thing"}, True),
            ("tar relabelled octet-stream, subject", {"layer_type": "application/octet-stream", "gz": False}, True),
        ]
        for n, (what, kw, with_subject) in enumerate(variants):
            with self.subTest(what):
                repo = f"prod/dressed{n}"
                if with_subject:
                    kw = dict(kw, subject=self.target(repo))
                manifest, blobs = runnable_image(**kw)
                digest = self.push_ok(repo, "v1", manifest, blobs)
                self.assertRefused(repo, ["v1", digest], what)

    def test_unsigned_image_under_an_attachment_tag_is_refused(self):
        for n, suffix in enumerate((".sig", ".att", ".sbom", "")):
            with self.subTest(suffix=suffix or "bare sha256-<hex>"):
                repo = f"prod/tagged{n}"
                tag = attachment_tag(suffix)
                manifest, blobs = runnable_image()
                digest = self.push_ok(repo, tag, manifest, blobs)
                self.assertRefused(repo, [tag, digest], tag)
                # the same image also under an ordinary tag, pushed in one request
                self.push_blobs(repo, blobs)
                r = self.b.put_manifest(repo, attachment_tag(suffix), manifest, query="?tag=v1")
                self.assertEqual(r.status, 201, r)
                self.assertRefused(repo, ["v1"], tag)

    def test_tar_layers_relabelled_as_simple_signing_are_refused(self):
        tar = a_tar()
        config = image_config([tar])
        signature = base64.b64encode(cosign.sign(self.stranger, tar)).decode()
        big_json = json.dumps({"critical": {"type": "cosign container image signature"},
                               "optional": {"pad": "x" * (100 * KIB)}}).encode()
        variants = [
            ("OCI, tag v1", "v1", bt.OCI_MANIFEST, bt.OCI_CONFIG, [(cosign.SIMPLESIGNING, tar)]),
            ("OCI, under a .sig tag", attachment_tag(".sig"), bt.OCI_MANIFEST, bt.OCI_CONFIG,
             [(cosign.SIMPLESIGNING, tar)]),
            ("OCI, bare sha256-<hex> tag", attachment_tag(""), bt.OCI_MANIFEST, bt.OCI_CONFIG,
             [(cosign.SIMPLESIGNING, tar)]),
            ("Docker media types", "v1", cosign.DOCKER_MANIFEST, cosign.DOCKER_CONFIG, [(cosign.SIMPLESIGNING, tar)]),
            ("with cosign's signature annotation", "v1", bt.OCI_MANIFEST, bt.OCI_CONFIG,
             [(cosign.SIMPLESIGNING, tar, {"annotations": {cosign.SIG_ANNOTATION: signature}})]),
            ("gzip tar", "v1", bt.OCI_MANIFEST, bt.OCI_CONFIG, [(cosign.SIMPLESIGNING, gzip.compress(tar))]),
            ("a JSON layer over 64 KiB", "v1", bt.OCI_MANIFEST, bt.OCI_CONFIG, [(cosign.SIMPLESIGNING, big_json)]),
        ]
        for n, (what, tag, media_type, config_type, layers) in enumerate(variants):
            with self.subTest(what):
                repo = f"prod/relabelled{n}"
                manifest, blobs = manifest_of(config, config_type, layers, media_type)
                digest = self.push_ok(repo, tag, manifest, blobs, media_type)
                self.assertRefused(repo, [tag, digest], what)
        # the relabelled image with a subject
        repo = "prod/relabelled-subject"
        manifest, blobs = manifest_of(config, bt.OCI_CONFIG, [(cosign.SIMPLESIGNING, tar)],
                                      subject=self.target(repo))
        digest = self.push_ok(repo, "v1", manifest, blobs)
        self.assertRefused(repo, ["v1", digest], "relabelled, with a subject")

    def test_an_index_is_always_judged(self):
        variants = [("subject", "v1", True, {}),
                    ("subject and artifactType", "v1", True, {"artifactType": "application/vnd.example.thing"}),
                    ("under a .att tag", attachment_tag(".att"), False, {}),
                    ("under a bare sha256-<hex> tag", attachment_tag(""), False, {})]
        for n, (what, tag, with_subject, extra) in enumerate(variants):
            with self.subTest(what):
                repo = f"prod/index{n}"
                child = self.target(repo)
                doc = {"schemaVersion": 2, "mediaType": INDEX,
                       "manifests": [dict(child, platform={"os": "linux", "architecture": "amd64"})], **extra}
                if with_subject:
                    doc["subject"] = self.target(repo)
                index = json.dumps(doc).encode()
                digest = self.push_ok(repo, tag, index, {}, INDEX)
                self.assertRefused(repo, [tag, digest, child["digest"]], what)

    def test_guard_signature_artifacts_stay_readable_and_signed_images_are_served(self):
        """Guard: what signing and verifying clients read stays readable unsigned."""
        repo = "prod/guard"
        manifest, blobs = runnable_image()
        img = self.push_ok(repo, "v1", manifest, blobs)
        size = len(manifest)
        self.assertRefused(repo, ["v1", img], "unsigned before its signature")
        readable = []
        # cosign's .sig: makes the image served
        sig, _, blobs = cosign.signature_manifest([self.sig_entry(repo, img)])
        readable.append(("cosign .sig", cosign.sig_tag(img), self.push_ok(repo, cosign.sig_tag(img), sig, blobs)))
        self.assertServed(repo, ["v1", img], img, "a correctly signed image")
        # .sig manifests of other unsigned images, by a stranger's key: readable, their images not
        for writer, docker in (("cosign", True), ("containers-image", False)):
            other, other_blobs = runnable_image()
            other_digest = self.push_ok(repo, None, other, other_blobs)
            sig, _, blobs = cosign.signature_manifest([self.sig_entry(repo, other_digest, self.stranger)], writer,
                                                      docker_media_types=docker)
            media_type = cosign.DOCKER_MANIFEST if docker else bt.OCI_MANIFEST
            tag = cosign.sig_tag(other_digest)
            readable.append((f"{writer} .sig", tag, self.push_ok(repo, tag, sig, blobs, media_type)))
            self.assertRefused(repo, [other_digest], "signed by a stranger")
        # the signature through the referrers API, and a Sigstore bundle (by digest)
        entry = self.sig_entry(repo, img)
        sig, _, blobs = cosign.referrers_signature_manifest(img, size, bt.OCI_MANIFEST, [entry])
        readable.append(("referrers .sig", None, self.push_ok(repo, None, sig, blobs)))
        bundle, _, blobs = cosign.bundle_manifest(img, size, bt.OCI_MANIFEST, private_key=self.stranger)
        readable.append(("bundle", None, self.push_ok(repo, None, bundle, blobs)))
        # an SBOM: empty config, artifactType, with a subject; and one under the .sbom tag
        doc, blobs = sbom_manifest(subject=descriptor(bt.OCI_MANIFEST, manifest))
        readable.append(("SBOM referrer", None, self.push_ok(repo, None, doc, blobs)))
        tag = "sha256-" + img[7:] + ".sbom"
        readable.append(("SBOM .sbom", tag, self.push_ok(repo, tag, *sbom_manifest())))
        # cosign attest's .att: an image config, DSSE envelope layers
        tag = "sha256-" + img[7:] + ".att"
        readable.append(("cosign .att", tag, self.push_ok(repo, tag, *self.attestation(repo, img))))
        for what, tag, digest in readable:
            with self.subTest(what):
                # by tag when tagged (an untagged artifact by digest): as old and new berth serve them
                self.assertServed(repo, [tag] if tag else [digest], digest, what)

    def test_artifacts_are_readable_by_digest_too(self):
        """Contract: what stays readable is told by its shape, whatever the reference: an SBOM without
        subject (empty config) and a cosign .att (image config, JSON layers) by digest alone."""
        repo = "prod/shapes"
        manifest, blobs = runnable_image()
        img = self.push_ok(repo, "v1", manifest, blobs)
        sig, _, blobs = cosign.signature_manifest([self.sig_entry(repo, img, self.stranger)])
        for what, (doc, blobs) in (("SBOM, no subject", sbom_manifest()), ("cosign .att", self.attestation(repo, img)),
                                   ("cosign .sig", (sig, blobs))):
            with self.subTest(what):
                digest = self.push_ok(repo, None, doc, blobs)
                self.assertServed(repo, [digest], digest, what)
        self.assertRefused(repo, ["v1", img], "signed by a stranger only")

    def attestation(self, repo, digest):
        """(manifest, blobs) of cosign attest's .att image: an image config, one DSSE envelope layer."""
        statement = json.dumps({"_type": "https://in-toto.io/Statement/v1", "predicateType": SLSA,
                                "subject": [{"name": f"{self.host}/{repo}", "digest": {"sha256": digest[7:]}}],
                                "predicate": {}}).encode()
        signature = cosign.sign(self.release, cosign.pae(cosign.INTOTO, statement))
        envelope = json.dumps({"payloadType": cosign.INTOTO, "payload": base64.b64encode(statement).decode(),
                               "signatures": [{"keyid": "", "sig": base64.b64encode(signature).decode()}]}).encode()
        config = json.dumps({"architecture": "", "os": "", "config": {}, "created": cosign.ZERO_TIME,
                             "rootfs": {"type": "layers", "diff_ids": [bt.sha256_digest(envelope)]}}).encode()
        return manifest_of(config, bt.OCI_CONFIG, [(DSSE, envelope, {"annotations": {"predicateType": SLSA}})])


class BaseImagesJudgeImagesNotTheirDress(PolicyServer):
    """Finding 4."""

    def unapproved(self, **extra):
        return runnable_image(**extra)  # its one layer is on no approved base

    def assertNothingStored(self, repo, refs):
        for ref in refs:
            r = self.get(repo, ref)
            self.assertEqual(r.status, 404, f"{repo}:{ref} -> {r}")

    def test_attachment_tag_with_a_tag_query_is_judged(self):
        for suffix, repo in ((".sig", "tools/x"), (".att", "tools/x-att"), (".sbom", "tools/x-sbom"), ("", "tools/x-bare")):
            with self.subTest(suffix=suffix or "bare sha256-<hex>"):
                manifest, blobs = self.unapproved()
                self.push_blobs(repo, blobs)
                tag = attachment_tag(suffix)
                r = self.b.put_manifest(repo, tag, manifest, query="?tag=1")
                self.assertEqual(r.status, 403, r)
                self.assertEqual(r.error_codes(), ["DENIED"])
                self.assertNothingStored(repo, ["1", tag, bt.sha256_digest(manifest)])

    def test_image_with_a_subject_is_judged(self):
        repo = "tools/y"
        approved, blobs = manifest_of(image_config([self.base_tar]), bt.OCI_CONFIG, [(OCI_TAR, self.base_tar)])
        self.push_ok(repo, "approved", approved, blobs)
        subject = descriptor(bt.OCI_MANIFEST, approved)
        for what, extra in (("subject", {}), ("subject and artifactType", {"artifactType": "application/vnd.example"})):
            for ref in ("1", None):
                with self.subTest(what, by="tag" if ref else "digest"):
                    manifest, blobs = self.unapproved(subject=subject, **extra)
                    self.push_blobs(repo, blobs)
                    digest = bt.sha256_digest(manifest)
                    r = self.b.put_manifest(repo, ref or digest, manifest)
                    self.assertEqual(r.status, 403, r)
                    self.assertEqual(r.error_codes(), ["DENIED"])
                    self.assertNothingStored(repo, ["1", digest])

    def test_tar_layers_relabelled_as_simple_signing_are_judged(self):
        """By analogy with finding 3: a tar labelled simple signing is not a signature."""
        tar = a_tar()
        for n, (what, tag) in enumerate((("tag 1", "1"), ("a .sig tag", attachment_tag(".sig")))):
            with self.subTest(what):
                repo = f"tools/relabelled{n}"
                manifest, blobs = manifest_of(image_config([tar]), bt.OCI_CONFIG, [(cosign.SIMPLESIGNING, tar)])
                self.push_blobs(repo, blobs)
                r = self.b.put_manifest(repo, tag, manifest, query="?tag=2")
                self.assertEqual(r.status, 403, r)
                self.assertNothingStored(repo, [tag, "2", bt.sha256_digest(manifest)])

    def test_guard_approved_images_signatures_and_sboms_are_accepted(self):
        """Guard: an image on the approved base, its cosign .sig and an SBOM referrer are pushed."""
        repo = "tools/guard"
        extra = a_tar()
        layers = [(OCI_TAR, self.base_tar), (OCI_TAR, extra)]
        manifest, blobs = manifest_of(image_config([self.base_tar, extra]), bt.OCI_CONFIG, layers)
        img = self.push_ok(repo, "1", manifest, blobs)
        sig, _, blobs = cosign.signature_manifest([self.sig_entry(repo, img)])
        self.push_ok(repo, cosign.sig_tag(img), sig, blobs)
        sbom = b'{"spdxVersion": "SPDX-2.3"}'
        doc, blobs = manifest_of(b"{}", cosign.OCI_EMPTY, [(SPDX, sbom)], artifactType=SPDX,
                                 subject=descriptor(bt.OCI_MANIFEST, manifest))
        self.push_ok(repo, None, doc, blobs)
        self.assertEqual(self.get(repo, "1").header("Docker-Content-Digest"), img)


class MatchRepositoryAndBundles(PolicyServer):
    """Finding 11."""

    def copy(self, src, dst, manifest, blobs, ref):
        self.push_ok(src, ref, manifest, blobs)
        return self.push_ok(dst, ref, manifest, blobs)

    def test_bundle_signed_for_another_repository_does_not_sign_the_copy(self):
        variants = [("cosign v3 bundle, no subject name", None, "v3.0.6"),
                    ("cosign v2.6 bundle, no subject name", None, "v2.6"),
                    ("subject name naming dev/app", "{host}/dev/app{n}", "v3.0.6"),
                    ("bare subject name dev/app", "dev/app{n}", "v3.0.6")]
        for n, (what, name, variant) in enumerate(variants):
            with self.subTest(what):
                dev, prod = f"dev/app{n}", f"prod/app{n}"
                manifest, blobs = runnable_image()
                img = self.copy(dev, prod, manifest, blobs, "v1")
                statement = in_toto(img, name and name.format(host=self.host, n=n), variant)
                bundle = cosign.sigstore_bundle(self.release, statement)
                referrer, _, rblobs = cosign.bundle_manifest(img, len(manifest), bt.OCI_MANIFEST, bundle=bundle)
                self.copy(dev, prod, referrer, rblobs, None)
                self.assertServed(dev, ["v1"], img, "dev/app has no policy")
                self.assertEqual(self.b.get(f"/v2/{prod}/referrers/{img}").status, 200)
                self.assertRefused(prod, ["v1", img], what)
                # Guard: a .sig whose docker-reference names prod/app makes the copy readable.
                sig, _, sblobs = cosign.signature_manifest([self.sig_entry(prod, img)])
                self.push_ok(prod, cosign.sig_tag(img), sig, sblobs)
                self.assertServed(prod, ["v1", img], img, "signed for prod/app")

    def test_guard_bundle_naming_the_repository_is_served(self):
        """Guard: a bundle whose in-toto subject name names prod/app satisfies match_repository."""
        repo = "prod/named"
        manifest, blobs = runnable_image()
        img = self.push_ok(repo, "v1", manifest, blobs)
        self.assertRefused(repo, ["v1"], "unsigned")
        bundle = cosign.sigstore_bundle(self.release, in_toto(img, f"{self.host}/{repo}"))
        referrer, _, rblobs = cosign.bundle_manifest(img, len(manifest), bt.OCI_MANIFEST, bundle=bundle)
        self.push_ok(repo, None, referrer, rblobs)
        self.assertServed(repo, ["v1", img], img, "bundle naming the repository")


# --------------------------------------------------------------------------- finding 10


LAYERS = 1000
REFERRERS = 63
PAYLOAD_BYTES = 64 * KIB
HEALTHZ_SECONDS = 0.5
ANSWER_SECONDS = 3.0


def padded_payload(reference, digest):
    """A simple-signing payload for the digest, padded to exactly 64 KiB."""
    bare = cosign.simple_signing_payload(reference, digest, {"pad": ""})
    payload = cosign.simple_signing_payload(reference, digest, {"pad": "x" * (PAYLOAD_BYTES - len(bare))})
    assert len(payload) == PAYLOAD_BYTES
    return payload


class SignatureJudgementCost(unittest.TestCase):
    """Finding 10: judging many wrong signatures neither stalls the I/O thread nor takes long."""

    @classmethod
    def setUpClass(cls):
        b = bt.Berth()
        cls.b = b
        cls.addClassCleanup(b.cleanup)
        _, trusted = cosign.generate_key("p256")
        cls.wrong, _ = cosign.generate_key("p256")
        with open(os.path.join(b.tmp, "trusted.pub"), "wb") as f:
            f.write(trusted)
        b.config = {"threads": {"io": 1}, "log": {"access": False},
                    "limits": {"max_manifest_bytes": 4 << 20},
                    "policies": [{"repositories": ["heavy/**"], "require_signature": {"keys": ["trusted.pub"]}}]}
        b.start()
        cls.host = f"127.0.0.1:{b.port}"

    def flooded_image(self, repo):
        """An image with a .sig and 63 referrers, each 1,000 layers over one wrongly signed payload."""
        b = self.b
        img = b.push_image(repo, "v1", (500,))
        payload = padded_payload(f"{self.host}/{repo}", img["digest"])
        signature = cosign.sign(self.wrong, payload)
        pushed = set()

        def put(ref, manifest, blobs):
            for digest, data in blobs.items():
                if digest not in pushed:
                    b.push_blob(repo, data)
                    pushed.add(digest)
            r = b.put_manifest(repo, ref or bt.sha256_digest(manifest), manifest)
            self.assertEqual(r.status, 201, r)

        manifest, _, blobs = cosign.signature_manifest([(payload, signature)] * LAYERS)
        put(cosign.sig_tag(img["digest"]), manifest, blobs)
        for i in range(REFERRERS):
            entries = [(payload, signature, {"n": str(i)})] + [(payload, signature)] * (LAYERS - 1)
            manifest, _, blobs = cosign.referrers_signature_manifest(img["digest"], len(img["manifest"]),
                                                                     bt.OCI_MANIFEST, entries)
            self.assertGreater(len(manifest), 200 * KIB)
            put(None, manifest, blobs)
        listed = b.get(f"/v2/{repo}/referrers/{img['digest']}").json()["manifests"]
        self.assertEqual(len(listed), REFERRERS)
        return img

    def probe(self):
        """Seconds /healthz takes to answer 200 (inf when it does not within 3 s)."""
        started = time.monotonic()
        try:
            r = self.b.get("/healthz", timeout=3)
        except (OSError, http.client.HTTPException):
            return float("inf")
        return time.monotonic() - started if r.status == 200 else float("inf")

    def pull_while_probing(self, method, path):
        answer = {}

        def pull():
            started = time.monotonic()
            try:
                answer["response"] = self.b.request(method, path, headers=ACCEPT, timeout=60)
            except Exception as error:  # noqa: BLE001 - reported by the assertions below
                answer["error"] = repr(error)
            answer["seconds"] = time.monotonic() - started

        thread = threading.Thread(target=pull, daemon=True)
        started = time.monotonic()
        thread.start()
        probes = []
        while True:
            probes.append(self.probe())
            if probes[-1] > HEALTHZ_SECONDS or time.monotonic() - started > ANSWER_SECONDS + 0.5:
                break
            thread.join(0.05)
            if not thread.is_alive():
                break
        probes.append(self.probe())  # and once more with the answer given (or not)
        thread.join(max(0.0, started + ANSWER_SECONDS + 0.5 - time.monotonic()))
        self.assertLess(max(probes), HEALTHZ_SECONDS, f"/healthz latencies while judging: {probes}")
        self.assertFalse(thread.is_alive(), f"{method} {path} not answered within {ANSWER_SECONDS} s")
        self.assertNotIn("error", answer, answer)
        r = answer["response"]
        self.assertEqual(r.status, 403, r)
        self.assertLessEqual(answer["seconds"], ANSWER_SECONDS)
        return r

    def test_get_by_tag_is_refused_quickly_and_healthz_answers(self):
        self.flooded_image("heavy/get")
        r = self.pull_while_probing("GET", "/v2/heavy/get/manifests/v1")
        self.assertEqual(r.error_codes(), ["DENIED"])

    def test_head_by_digest_is_refused_quickly_and_healthz_answers(self):
        img = self.flooded_image("heavy/head")
        self.pull_while_probing("HEAD", f"/v2/heavy/head/manifests/{img['digest']}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
