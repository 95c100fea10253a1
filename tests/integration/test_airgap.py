#!/usr/bin/env python3
"""Across the air gap (docs/airgap.md) with real carriers: skopeo writes OCI layouts (oci:DIR:REPO:TAG,
an index of two platforms and a bare tag), oci-archive and docker-archive tarballs from a real
berth; `berth import` loads them into a store directly (--root, the server stopped) and through a
running berth's API (--url); the images are then served with their digests, tags and referrers.
A second run writes nothing; a corrupt blob fails its image only. `berth export` writes a layout
(directory and tar) that imports back identically, and --since leaves out the layers the other
side has."""

import gzip
import json
import os
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402


def image(sizes):
    """An image whose layers are gzip streams, as real layers are: skopeo then copies them as they are
    (it compresses a layer it finds uncompressed, which would change its digest)."""
    return bt.image_of([gzip.compress(os.urandom(n)) for n in sizes])


def push(b, repo, tag, img):
    for data in img["blobs"].values():
        b.push_blob(repo, data)
    r = b.put_manifest(repo, tag or img["digest"], img["manifest"])
    assert r.status == 201, r
    img = dict(img, repo=repo, tag=tag)
    return img

INDEX = "application/vnd.oci.image.index.v1+json"
ACCEPT = f"{bt.OCI_MANIFEST}, {INDEX}"


def skopeo(*args):
    r = subprocess.run(["skopeo", "--insecure-policy", *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r


@unittest.skipUnless(shutil.which("skopeo"), "needs skopeo")
class AirGap(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.source = bt.serve(cls.addClassCleanup)
        s = cls.source
        cls.host = f"127.0.0.1:{s.port}"
        # an index of two platforms, with a signature-like artifact attached to it
        children = []
        for arch in ("amd64", "arm64"):
            children.append((push(s, "app/multi", None, image((3000, 5000))), arch))
        cls.children = children
        index = json.dumps({"schemaVersion": 2, "mediaType": INDEX, "manifests": [
            {"mediaType": bt.OCI_MANIFEST, "digest": img["digest"], "size": len(img["manifest"]),
             "platform": {"os": "linux", "architecture": arch}} for img, arch in children]}).encode()
        assert s.put_manifest("app/multi", "1", index, INDEX).status == 201
        cls.index_digest = bt.sha256_digest(index)
        sbom = b'{"spdx": true}'
        s.push_blob("app/multi", sbom)
        s.push_blob("app/multi", b"{}")
        cls.sbom = json.dumps({
            "schemaVersion": 2, "mediaType": bt.OCI_MANIFEST, "artifactType": "application/spdx+json",
            "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": bt.sha256_digest(b"{}"), "size": 2},
            "layers": [{"mediaType": "application/spdx+json", "digest": bt.sha256_digest(sbom), "size": len(sbom)}],
            "subject": {"mediaType": INDEX, "digest": cls.index_digest, "size": len(index)}}).encode()
        assert s.put_manifest("app/multi", bt.sha256_digest(cls.sbom), cls.sbom).status == 201
        cls.one = push(s, "app/one", "1.0", image((40000, 7000)))
        cls.two = push(s, "app/two", "2.0", image((9000,)))
        # the carriers, as skopeo writes them
        cls.tmp = s.tmp
        cls.layout = os.path.join(s.tmp, "layout")
        src = f"docker://{cls.host}"
        skopeo("copy", "--all", "--src-tls-verify=false", f"{src}/app/multi:1", f"oci:{cls.layout}:airgap/multi:1")
        skopeo("copy", "--src-tls-verify=false", f"{src}/app/one:1.0", f"oci:{cls.layout}:airgap/one:1.0")
        cls.archive = os.path.join(s.tmp, "two.tar")
        skopeo("copy", "--src-tls-verify=false", f"{src}/app/two:2.0", f"oci-archive:{cls.archive}:airgap/two:2.0")
        cls.docker = os.path.join(s.tmp, "docker.tar")
        skopeo("copy", "--src-tls-verify=false", f"{src}/app/one:1.0", f"docker-archive:{cls.docker}:legacy/one:1.0")

    # ---- helpers

    def fresh(self, **kw):
        b = bt.Berth(**kw)
        self.addCleanup(b.cleanup)
        return b

    def manifest(self, b, repo, ref):
        r = b.get(f"/v2/{repo}/manifests/{ref}", headers={"Accept": ACCEPT})
        return r

    def assertCarried(self, b, prefix=""):
        """The layout's and the archive's images are served with their source digests and bytes."""
        p = prefix + "/" if prefix else ""
        r = self.manifest(b, f"{p}airgap/multi", "1")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.header("Docker-Content-Digest"), self.index_digest)
        for img, _ in self.children:
            for digest, data in img["blobs"].items():
                self.assertEqual(b.get(f"/v2/{p}airgap/multi/blobs/{digest}").body, data)
        self.assertEqual(self.manifest(b, f"{p}airgap/one", "1.0").header("Docker-Content-Digest"), self.one["digest"])
        self.assertEqual(self.manifest(b, f"{p}airgap/two", "2.0").header("Docker-Content-Digest"), self.two["digest"])

    # ---- import

    def test_import_into_a_store_then_serve(self):
        b = self.fresh()
        # Into a store a server holds: refused before anything of the server's is touched.
        b.start()
        fetch = os.path.join(b.root, "uploads", "fetch-0123456789abcdef")
        with open(fetch, "wb") as f:
            f.write(b"the server's copy from a peer, in progress")
        r = bt.run_cli("import", "--root", b.root, self.layout, timeout=120)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("import into it with --url", r.stderr)
        self.assertTrue(os.path.exists(fetch))
        b.stop()
        r = bt.run_cli("import", "--root", b.root, self.layout, self.archive, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("loaded airgap/multi:1", r.stdout)
        b.start()
        self.assertCarried(b)
        b.stop()
        again = bt.run_cli("import", "--root", b.root, self.layout, self.archive, timeout=120)
        self.assertEqual(again.returncode, 0, again.stdout)
        self.assertIn(" 0 blobs written", again.stdout)  # resumable: only what is missing

    def test_a_zarf_package_is_its_images_layout(self):
        # an unpacked Zarf package: images/ is an OCI layout naming each image in base.name
        package = os.path.join(self.tmp, "zarf-package")
        shutil.copytree(self.layout, os.path.join(package, "images"))
        index_path = os.path.join(package, "images", "index.json")
        with open(index_path) as f:
            index = json.load(f)
        for entry in index["manifests"]:
            name = entry["annotations"].pop("org.opencontainers.image.ref.name")
            entry["annotations"]["org.opencontainers.image.base.name"] = "registry.example:443/" + name
        with open(index_path, "w") as f:
            json.dump(index, f)
        b = self.fresh()
        r = bt.run_cli("import", "--root", b.root, package, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        b.start()
        r = self.manifest(b, "registry.example/airgap/multi", "1")
        self.assertEqual(r.header("Docker-Content-Digest"), self.index_digest)

    def test_import_through_the_api_with_a_prefix(self):
        b = self.fresh()
        b.start()
        r = bt.run_cli("import", "--url", f"http://127.0.0.1:{b.port}", "--repository-prefix", "site",
                       "--parallel", "3", self.layout, self.archive, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertCarried(b, "site")

    def test_import_and_export_answer_a_token_realm(self):
        """--url speaks the token flow: a registry that challenges with Bearer gets a token from its
        realm for the credentials given, as docker does; wrong credentials change nothing."""
        def configure(b):
            bt.gen_ec_key(os.path.join(b.tmp, "token.key"))
            return {"auth": {"htpasswd": "htpasswd",
                             "token": {"signing_key": "token.key", "issuer": "berth", "service": "berth"},
                             "rules": [{"repository": "site/**", "principals": ["user:ci"],
                                        "actions": ["pull", "push"]}]}}
        b = bt.serve(self.addCleanup, configure, passwords={"ci": "ci-pw"})
        self.assertTrue(b.get("/v2/").header("WWW-Authenticate").startswith("Bearer realm="))
        url = f"http://127.0.0.1:{b.port}"
        wrong, right = os.path.join(b.tmp, "wrong"), os.path.join(b.tmp, "right")
        for path, password in ((wrong, "nope"), (right, "ci-pw")):
            with open(path, "w") as f:
                f.write(password + "\n")
        r = bt.run_cli("import", "--url", url, "--username", "ci", "--password-file", wrong,
                       "--repository-prefix", "site", self.archive, timeout=120)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertEqual(b.get("/v2/site/airgap/two/tags/list", headers=bt.basic_auth("ci", "ci-pw")).status, 404)
        r = bt.run_cli("import", "--url", url, "--username", "ci", "--password-file", right,
                       "--repository-prefix", "site", self.archive, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn('"target":"/auth/token?', b.stderr().replace(" ", ""))  # the realm was asked
        r = b.get("/v2/site/airgap/two/manifests/2.0", headers={**bt.basic_auth("ci", "ci-pw"), "Accept": ACCEPT})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.header("Docker-Content-Digest"), self.two["digest"])
        out = os.path.join(b.tmp, "out.tar")
        r = bt.run_cli("export", "--url", url, "--username", "ci", "--password-file", right,
                       "site/airgap/two:2.0", "--to", out, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertGreater(os.path.getsize(out), 9000)

    def test_images_sharing_a_base_upload_it_once(self):
        # two repositories' images on one base layer: the second gets it by a cross-repository mount
        layout = os.path.join(self.tmp, "shared")
        os.makedirs(os.path.join(layout, "blobs", "sha256"))
        base = gzip.compress(os.urandom(50000))
        entries, images = [], []
        for name in ("shared/a:1", "shared/b:1"):
            img = bt.image_of([base, gzip.compress(os.urandom(3000))])
            for digest, data in list(img["blobs"].items()) + [(img["digest"], img["manifest"])]:
                with open(os.path.join(layout, "blobs", "sha256", digest.split(":")[1]), "wb") as f:
                    f.write(data)
            entries.append({"mediaType": bt.OCI_MANIFEST, "digest": img["digest"], "size": len(img["manifest"]),
                            "annotations": {"org.opencontainers.image.ref.name": name}})
            images.append(img)
        with open(os.path.join(layout, "index.json"), "w") as f:
            json.dump({"schemaVersion": 2, "manifests": entries}, f)
        b = self.fresh()
        b.start()
        r = bt.run_cli("import", "--url", f"http://127.0.0.1:{b.port}", "--parallel", "1", layout, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("5 blobs written", r.stdout)  # 2 configs, 2 own layers, the base once
        self.assertIn("1 already there", r.stdout)
        self.assertEqual(b.get(f"/v2/shared/b/blobs/{bt.sha256_digest(base)}").body, base)
        self.assertEqual(self.manifest(b, "shared/b", "1").body, images[1]["manifest"])

    def test_a_docker_archive_keeps_its_layers_and_config(self):
        b = self.fresh()
        b.start()
        r = bt.run_cli("import", "--url", f"http://127.0.0.1:{b.port}", self.docker, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        # skopeo writes RepoTags as docker.io/legacy/one:1.0: berth's name for Docker Hub's legacy/one
        manifest = self.manifest(b, "docker.io/legacy/one", "1.0").json()
        self.assertEqual(manifest["config"]["digest"], bt.sha256_digest(self.one["config"]))
        # docker archives hold layers uncompressed: skopeo wrote each pushed layer decompressed
        got = [b.get(f"/v2/docker.io/legacy/one/blobs/{layer['digest']}").body for layer in manifest["layers"]]
        self.assertEqual(got, [gzip.decompress(x) for x in self.one["layers"]])
        self.assertEqual({layer["mediaType"] for layer in manifest["layers"]}, {"application/vnd.oci.image.layer.v1.tar"})

    def test_a_bare_tag_needs_a_repository_and_a_corrupt_blob_fails_only_its_image(self):
        bare = os.path.join(self.tmp, "bare")
        skopeo("copy", "--src-tls-verify=false", f"docker://{self.host}/app/two:2.0", f"oci:{bare}:2.0")
        b = self.fresh()
        r = bt.run_cli("import", "--root", b.root, bare)
        self.assertEqual(r.returncode, 1)
        self.assertIn("bare tag: give --repository", r.stdout)
        neither = os.path.join(self.tmp, "neither")
        os.makedirs(neither, exist_ok=True)
        r = bt.run_cli("import", "--root", b.root, neither)
        self.assertEqual(r.returncode, 1)
        self.assertIn("neither an OCI image layout nor a docker save archive", r.stdout)
        self.assertEqual(bt.run_cli("import", "--root", b.root, "--repository", "named/two", bare).returncode, 0)

        broken = os.path.join(self.tmp, "broken")
        shutil.copytree(self.layout, broken)
        layer = bt.sha256_digest(self.one["layers"][0]).split(":")[1]
        path = os.path.join(broken, "blobs", "sha256", layer)
        os.chmod(path, 0o644)
        with open(path, "r+b") as f:
            f.write(b"corrupt")
        r = bt.run_cli("import", "--root", b.root, broken, timeout=120)
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"FAILED airgap/one:1.0: blob sha256:{layer} holds bytes of", r.stdout)
        self.assertIn("loaded airgap/multi:1", r.stdout)
        b.start()
        self.assertEqual(self.manifest(b, "airgap/one", "1.0").status, 404)
        self.assertEqual(self.manifest(b, "airgap/multi", "1").status, 200)
        self.assertEqual(self.manifest(b, "named/two", "2.0").header("Docker-Content-Digest"), self.two["digest"])

    # ---- export

    def test_export_and_import_back_with_referrers(self):
        for target in ("out", "out.tar"):
            with self.subTest(target=target):
                to = os.path.join(self.tmp, target)
                r = bt.run_cli("export", "--url", f"http://{self.host}", "app/multi:1", "app/one:1.0",
                               f"app/two@{self.two['digest']}", "--to", to, timeout=120)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                b = self.fresh()
                r = bt.run_cli("import", "--root", b.root, to, timeout=120)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                b.start()
                self.assertEqual(self.manifest(b, "app/multi", "1").header("Docker-Content-Digest"), self.index_digest)
                self.assertEqual(self.manifest(b, "app/one", "1.0").body, self.one["manifest"])
                self.assertEqual(self.manifest(b, "app/two", self.two["digest"]).status, 200)
                referrers = b.get(f"/v2/app/multi/referrers/{self.index_digest}").json()["manifests"]
                self.assertEqual([m["digest"] for m in referrers], [bt.sha256_digest(self.sbom)])
                # skopeo reads the exported layout too
                if target == "out":
                    skopeo("inspect", "--raw", f"oci:{to}:app/one:1.0")

    def test_export_since_leaves_out_what_the_other_side_has(self):
        # --root reads the store beside the running server
        first = os.path.join(self.tmp, "first")
        self.assertEqual(bt.run_cli("export", "--root", self.source.root, "app/one:1.0", "--to", first).returncode, 0)
        cut = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 1))
        bt.poll(lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) > cut, 5, what="the cut in the past")
        # a new image sharing one.1.0's big layer, pushed after the cut
        big = bt.sha256_digest(self.one["layers"][0])
        newer = image((6000,))
        manifest = json.loads(newer["manifest"])
        manifest["layers"].insert(0, {"mediaType": bt.OCI_LAYER, "digest": big, "size": len(self.one["layers"][0])})
        body = json.dumps(manifest).encode()
        for data in newer["blobs"].values():
            self.source.push_blob("app/one", data)
        self.assertEqual(self.source.put_manifest("app/one", "1.1", body).status, 201)
        update = os.path.join(self.tmp, "update.tar")
        r = bt.run_cli("export", "--root", self.source.root, "app/one:1.1", "--to", update, "--since", cut)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("1 blobs older than --since left out", r.stdout)
        self.assertLess(os.path.getsize(update), len(self.one["layers"][0]))
        # the other side had 1.0: the update loads; an empty registry lacks the big layer
        b = self.fresh()
        self.assertEqual(bt.run_cli("import", "--root", b.root, first).returncode, 0)
        r = bt.run_cli("import", "--root", b.root, update)
        self.assertEqual(r.returncode, 0, r.stdout)
        empty = self.fresh()
        r = bt.run_cli("import", "--root", empty.root, update)
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"blob {big} is in neither the carrier nor the registry", r.stdout)
        b.start()
        self.assertEqual(self.manifest(b, "app/one", "1.1").body, body)


if __name__ == "__main__":
    unittest.main(verbosity=2)
