#!/usr/bin/env python3
"""Issue 34, findings 7 and 8 (/work/notes/contract-34.md): what comes into the store from a carrier
or an upstream obeys the store's rules.

Finding 7, `berth import` of a docker-save directory (made here by hand: manifest.json, <hex>.json
configs, <id>/layer.tar layers), with --root (the server stopped) and with --url: a config or a
layer.tar that is a symlink (to a secret file in another directory, to /etc/passwd), or that sits
under a directory that is a symlink (<id>/ or blobs/), fails that image (exit != 0, reported) and
the linked bytes never become a blob (HEAD and GET of their digest 404, no file under
<root>/blobs); the carrier's other image loads. A layer.tar whose sha256 is not the config's
rootfs.diff_ids entry, or a config whose sha256 is not its <hex>.json name, fails its image too.
Guard: a genuine docker-save directory imports, config and layers byte for byte.

Finding 8: a repository mirrored from a real Distribution under an immutable_tags policy keeps
serving the digest it stored first when the upstream re-pushes the tag (GET and HEAD, ?ns= and
prefixed names), and counts the refusal (berth_policy_refusals_total{reason="immutable_tag"}).
`berth import --root` into a stopped server's store cannot move an immutable tag, with --config
(the server's configuration) and without it (the policies the server last started with); after a
restart the old digest is served. Mirrored blobs count against a namespace quota: a blob that
would pass it is 403 DENIED and the usage stays within the quota.
"""

import io
import json
import os
import shutil
import sys
import tarfile
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
import distribution as dist  # noqa: E402

INDEX = "application/vnd.oci.image.index.v1+json"
ACCEPT = {"Accept": ", ".join([bt.OCI_MANIFEST, INDEX, "application/vnd.docker.distribution.manifest.v2+json",
                               "application/vnd.docker.distribution.manifest.list.v2+json"])}


def hex_of(data):
    return bt.sha256_digest(data)[7:]


def tar_of(files):
    """An uncompressed tar holding {name: bytes}: a docker-save layer."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 1700000000
            t.addfile(info, io.BytesIO(data))
    return out.getvalue()


def a_layer():
    return tar_of({"app/bin": os.urandom(900), "etc/app.conf": os.urandom(40)})


def docker_config(layers):
    """A docker image config whose rootfs.diff_ids are these layers' digests."""
    return json.dumps({"architecture": "amd64", "os": "linux", "config": {"Cmd": ["/app/bin"]},
                       "rootfs": {"type": "layers", "diff_ids": [bt.sha256_digest(x) for x in layers]},
                       "comment": os.urandom(8).hex()}).encode()


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


class DockerSave:
    """A `docker save` directory written by hand: manifest.json, <hex>.json configs, <id>/layer.tar."""

    def __init__(self, path):
        self.path = path
        self.entries = []
        os.makedirs(path)

    def add(self, repo_tag, layers, config=None, config_name=None):
        """Writes an image's files; returns {"config": bytes, "config_path", "layer_paths"} to tamper with."""
        config = config or docker_config(layers)
        config_name = config_name or hex_of(config) + ".json"
        write(os.path.join(self.path, config_name), config)
        layer_paths = []
        for layer in layers:
            name = f"{os.urandom(32).hex()}/layer.tar"
            write(os.path.join(self.path, name), layer)
            layer_paths.append(name)
        self.entries.append({"Config": config_name, "RepoTags": [repo_tag], "Layers": layer_paths})
        with open(os.path.join(self.path, "manifest.json"), "w") as f:
            json.dump(self.entries, f)
        return {"config": config, "config_path": config_name, "layer_paths": layer_paths}

    def link(self, name, target):
        """Replaces the carrier's file (or directory) `name` by a symlink to target."""
        full = os.path.join(self.path, name)
        if os.path.isdir(full):
            shutil.rmtree(full)
        elif os.path.lexists(full):
            os.remove(full)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        os.symlink(target, full)


def output(r):
    return f"exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"


# --------------------------------------------------------------------------- finding 7


class DockerSaveCarriers(unittest.TestCase):
    """Finding 7."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="berth-intake-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        # Where the secrets live: not part of any carrier.
        self.outside = tempfile.mkdtemp(prefix="berth-secrets-")
        self.addCleanup(shutil.rmtree, self.outside, True)
        with open("/etc/passwd", "rb") as f:
            self.passwd = f.read()

    def fresh(self):
        b = bt.Berth()
        self.addCleanup(b.cleanup)
        return b

    def carrier(self, name):
        return DockerSave(os.path.join(self.tmp, name))

    # ---- the four ways a carrier reaches out, each beside a good image

    def symlinked(self, name, n):
        """Carrier with intake/good{n}:1 and intake/bad{n}:1, bad reaching out by a link; returns
        (carrier, good image's files, [bytes the link reaches that must not become blobs])."""
        c = self.carrier(f"{name}-{n}")
        good_layer = a_layer()
        good = c.add(f"intake/good{n}:1", [good_layer])
        good["layer"] = good_layer
        bad_repo = f"intake/bad{n}:1"
        if name == "config-links-outside":
            layer = a_layer()
            secret = docker_config([layer])  # a secret shaped as a config, so nothing else is wrong
            write(os.path.join(self.outside, f"secret{n}.json"), secret)
            files = c.add(bad_repo, [layer], config=secret)
            c.link(files["config_path"], os.path.join(self.outside, f"secret{n}.json"))
            return c, good, [secret]
        if name == "layer-links-to-etc-passwd":
            files = c.add(bad_repo, [self.passwd])
            c.link(files["layer_paths"][0], "/etc/passwd")
            return c, good, [self.passwd]
        if name == "layer-directory-links-outside":
            secret = tar_of({"root/.ssh/id_ed25519": os.urandom(400)})
            write(os.path.join(self.outside, f"layers{n}", "layer.tar"), secret)
            files = c.add(bad_repo, [secret])
            c.link(os.path.dirname(files["layer_paths"][0]), os.path.join(self.outside, f"layers{n}"))
            return c, good, [secret]
        if name == "config-directory-links-outside":
            layer = a_layer()
            secret = docker_config([layer])
            config_name = f"blobs/sha256/{hex_of(secret)}"
            write(os.path.join(self.outside, f"blobs{n}", "sha256", hex_of(secret)), secret)
            c.add(bad_repo, [layer], config=secret, config_name=config_name)
            c.link("blobs", os.path.join(self.outside, f"blobs{n}"))
            return c, good, [secret]
        raise ValueError(name)

    CASES = ("config-links-outside", "layer-links-to-etc-passwd", "layer-directory-links-outside",
             "config-directory-links-outside")

    def assertNotABlob(self, b, repos, data):
        digest = bt.sha256_digest(data)
        for repo in repos:
            for method in ("HEAD", "GET"):
                r = b.request(method, f"/v2/{repo}/blobs/{digest}")
                self.assertEqual(r.status, 404, f"{method} {repo} blob {digest}: {r}")
        self.assertNotIn(digest[7:], bt.blob_files(b.root), f"{digest} is a blob file under the root")

    def assertImported(self, b, repo, tag, files):
        r = b.get(f"/v2/{repo}/manifests/{tag}", headers=ACCEPT)
        self.assertEqual(r.status, 200, f"{repo}:{tag}: {r}")
        manifest = r.json()
        self.assertEqual(manifest["config"]["digest"], bt.sha256_digest(files["config"]))
        if "layer" in files:
            got = b.get(f"/v2/{repo}/blobs/{manifest['layers'][0]['digest']}")
            self.assertEqual(got.body, files["layer"])

    def assertFailed(self, r):
        self.assertNotEqual(r.returncode, 0, output(r))
        self.assertIn("fail", (r.stdout + r.stderr).lower(), output(r))

    def test_symlinks_with_root(self):
        for n, case in enumerate(self.CASES):
            with self.subTest(case):
                c, good, secrets = self.symlinked(case, n)
                b = self.fresh()
                r = bt.run_cli("import", "--root", b.root, c.path, timeout=60)
                self.assertFailed(r)
                b.start()
                self.assertImported(b, f"intake/good{n}", "1", good)
                self.assertEqual(b.get(f"/v2/intake/bad{n}/manifests/1", headers=ACCEPT).status, 404)
                for data in secrets:
                    self.assertNotABlob(b, [f"intake/bad{n}", f"intake/good{n}"], data)

    def test_symlinks_with_url(self):
        b = self.fresh()
        b.start()
        for n, case in enumerate(self.CASES):
            with self.subTest(case):
                c, good, secrets = self.symlinked(case, n)
                r = bt.run_cli("import", "--url", f"http://127.0.0.1:{b.port}", c.path, timeout=60)
                self.assertFailed(r)
                self.assertImported(b, f"intake/good{n}", "1", good)
                self.assertEqual(b.get(f"/v2/intake/bad{n}/manifests/1", headers=ACCEPT).status, 404)
                for data in secrets:
                    self.assertNotABlob(b, [f"intake/bad{n}", f"intake/good{n}"], data)

    def mismatched(self, case, n, mode):
        c = self.carrier(f"mismatch-{n}{mode}")
        good_layer = a_layer()
        good = dict(c.add(f"intake/good{n}:1", [good_layer]), layer=good_layer)
        layer = a_layer()
        if case == "layer is not its diff_id":
            c.add(f"intake/bad{n}:1", [layer], config=docker_config([a_layer()]))
        elif case == "config is not its <hex>.json name":
            c.add(f"intake/bad{n}:1", [layer], config_name=os.urandom(32).hex() + ".json")
        else:
            raise ValueError(case)
        return c, good

    def test_digests_must_match(self):
        for mode in ("--root", "--url"):
            for n, case in enumerate(("layer is not its diff_id", "config is not its <hex>.json name")):
                with self.subTest(case, mode=mode):
                    c, good = self.mismatched(case, n, mode)
                    b = self.fresh()
                    if mode == "--url":
                        b.start()
                        r = bt.run_cli("import", "--url", f"http://127.0.0.1:{b.port}", c.path, timeout=60)
                    else:
                        r = bt.run_cli("import", "--root", b.root, c.path, timeout=60)
                        b.start()
                    self.assertFailed(r)
                    self.assertImported(b, f"intake/good{n}", "1", good)
                    self.assertEqual(b.get(f"/v2/intake/bad{n}/manifests/1", headers=ACCEPT).status, 404)

    def test_guard_a_genuine_docker_save_imports(self):
        """Guard: config named by its digest, diff_ids right, real files: loaded byte for byte."""
        for mode in ("--root", "--url"):
            with self.subTest(mode=mode):
                c = self.carrier(f"genuine{mode}")
                layers = [a_layer(), a_layer()]
                files = c.add("intake/genuine:1.0", layers)
                b = self.fresh()
                if mode == "--url":
                    b.start()
                    r = bt.run_cli("import", "--url", f"http://127.0.0.1:{b.port}", c.path, timeout=60)
                else:
                    r = bt.run_cli("import", "--root", b.root, c.path, timeout=60)
                    b.start()
                self.assertEqual(r.returncode, 0, output(r))
                manifest = b.get("/v2/intake/genuine/manifests/1.0", headers=ACCEPT).json()
                self.assertEqual(manifest["config"]["digest"], "sha256:" + files["config_path"][:-5])
                got = [b.get(f"/v2/intake/genuine/blobs/{x['digest']}").body for x in manifest["layers"]]
                self.assertEqual(got, layers)


# --------------------------------------------------------------------------- finding 8

POLICY = {"name": "pinned", "immutable_tags": True}
QUOTA_BYTES = 6000


def refusals(b):
    return sum(v for k, v in b.metrics().items()
               if k.startswith("berth_policy_refusals_total{") and 'reason="immutable_tag"' in k)


@unittest.skipUnless(dist.available(), "docker-registry is not installed")
class MirroredContentObeysTheStore(unittest.TestCase):
    """Finding 8, mirrors: immutable tags and quotas hold for what berth fetches from an upstream."""

    @classmethod
    def setUpClass(cls):
        cls.up = dist.Distribution()
        cls.addClassCleanup(cls.up.cleanup)
        cls.up.start()
        b = bt.Berth()
        cls.b = b
        cls.addClassCleanup(b.cleanup)
        b.config = {"log": {"access": False},
                    "proxy": {"upstreams": [
                        {"host": "mirror.test", "url": cls.up.url, "check_interval_seconds": 1},
                        {"host": "quota.test", "url": cls.up.url, "check_interval_seconds": 1}]},
                    "policies": [dict(POLICY, repositories=["mirror.test/**"])],
                    "quotas": [{"namespaces": "quota.test", "max_bytes": QUOTA_BYTES}]}
        b.start()

    def test_upstream_cannot_move_an_immutable_tag(self):
        b, up = self.b, self.up
        first = up.push_image("library/app", "v1", (700,))
        paths = ["/v2/library/app/manifests/v1?ns=mirror.test", "/v2/mirror.test/library/app/manifests/v1"]
        r = b.get(paths[0], headers=ACCEPT)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.header("Docker-Content-Digest"), first["digest"])
        for digest, data in first["blobs"].items():
            self.assertEqual(b.get(f"/v2/library/app/blobs/{digest}?ns=mirror.test").body, data)
        before = refusals(b)
        # the upstream re-pushes v1 as another image
        second = bt.make_image((800,))
        for data in second["blobs"].values():
            up.push_blob("library/app", data)
        up.put_manifest("library/app", "v1", second["manifest"])

        def still_first():
            for path in paths:
                for method in ("GET", "HEAD"):
                    r = b.request(method, path, headers=ACCEPT)
                    self.assertEqual(r.status, 200, f"{method} {path}: {r}")
                    self.assertEqual(r.header("Docker-Content-Digest"), first["digest"],
                                     f"{method} {path}: the immutable tag moved")
            return refusals(b) > before

        bt.poll(still_first, 20, 0.2, "the upstream's move of v1 to be refused and counted")
        self.assertTrue(still_first())
        self.assertEqual(b.get(paths[1], headers=ACCEPT).body, first["manifest"])

    def test_mirrored_blobs_count_against_the_quota(self):
        b, up = self.b, self.up
        img = up.push_image("library/big", "v1", (4000, 4000))  # config + 4000 fit in 6000; + 4000 more do not
        r = b.get("/v2/library/big/manifests/v1?ns=quota.test", headers=ACCEPT)
        self.assertEqual(r.status, 200, r)
        manifest = r.json()
        first, second = (x["digest"] for x in manifest["layers"])
        for digest in (manifest["config"]["digest"], first):
            r = b.get(f"/v2/library/big/blobs/{digest}?ns=quota.test")
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.body, img["blobs"][digest])
        for path in (f"/v2/library/big/blobs/{second}?ns=quota.test", f"/v2/quota.test/library/big/blobs/{second}"):
            r = b.get(path)
            self.assertEqual(r.status, 403, f"{path}: {r}")
            self.assertEqual(r.error_codes(), ["DENIED"], r)
        usage = b.get("/_berth/v1/usage")
        self.assertEqual(usage.status, 200, usage)
        used = {x["namespace"]: x["used_bytes"] for x in usage.json()["namespaces"]}.get("quota.test", 0)
        self.assertGreaterEqual(used, 4000, "the mirrored blobs count")
        self.assertLessEqual(used, QUOTA_BYTES)


class ImportCannotMoveImmutableTags(unittest.TestCase):
    """Finding 8, berth import --root into a stopped server's store."""

    def test_import_root_with_and_without_config(self):
        b = bt.Berth({"log": {"access": False}, "policies": [dict(POLICY, repositories=["pinned/**"])]})
        self.addCleanup(b.cleanup)
        b.start()
        first = b.push_image("pinned/app", "1")
        b.stop()
        config = b.config_path()
        moving = bt.oci_layout(os.path.join(b.tmp, "moving"), {"pinned/app:1": bt.make_image()})
        docker = DockerSave(os.path.join(b.tmp, "moving-docker"))
        docker.add("pinned/app:1", [a_layer()])
        for carrier in (moving, docker.path):
            for with_config in (True, False):
                with self.subTest(os.path.basename(carrier), config=with_config):
                    args = ["--config", config] if with_config else []
                    r = bt.run_cli("import", "--root", b.root, *args, carrier, timeout=60)
                    self.assertNotEqual(r.returncode, 0, output(r))
        # --config is understood: a new tag in the same repository loads
        third = bt.make_image()
        fresh = bt.oci_layout(os.path.join(b.tmp, "fresh"), {"pinned/app:2": third})
        r = bt.run_cli("import", "--root", b.root, "--config", config, fresh, timeout=60)
        self.assertEqual(r.returncode, 0, output(r))
        b.restart()
        for method in ("GET", "HEAD"):
            r = b.request(method, "/v2/pinned/app/manifests/1", headers=ACCEPT)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.header("Docker-Content-Digest"), first["digest"], "the immutable tag moved")
        self.assertEqual(b.get("/v2/pinned/app/manifests/2", headers=ACCEPT).header("Docker-Content-Digest"),
                         third["digest"])
        # Guard: through the API too (a push refused as any other)
        r = bt.run_cli("import", "--url", f"http://127.0.0.1:{b.port}", moving, timeout=60)
        self.assertNotEqual(r.returncode, 0, output(r))
        self.assertEqual(b.get("/v2/pinned/app/manifests/1", headers=ACCEPT).header("Docker-Content-Digest"),
                         first["digest"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
