#!/usr/bin/env python3
"""Registry proxying on servers of their own (test_proxy.py has one berth mirroring many real
CNCF Distribution upstreams): limits.max_blob_bytes and max_manifest_bytes hold for fetched
content (a Distribution upstream); berth as the upstream of berth, through its token endpoint
(realm, service, scope) with the downstream's username and password_file, and refused with a
wrong password; bad proxy configuration refused with the key named, and a configuration with
every documented key accepted.

Skipped as a whole (exit 0) when /usr/bin/docker-registry is not installed. BERTH_KEEP=1 prints
the berths' logs of a failing berth-upstream test.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
import distribution as dist  # noqa: E402
from proxycase import ACCEPT, ProxyTestCase  # noqa: E402


class ProxyLimitsTest(ProxyTestCase):
    """limits.max_blob_bytes and limits.max_manifest_bytes hold for fetched content too."""

    @classmethod
    def setUpClass(cls):
        cls.a = dist.Distribution()
        cls.addClassCleanup(cls.a.cleanup)
        cls.a.start()
        cls.b = bt.serve(cls.addClassCleanup, {"limits": {"max_blob_bytes": 1 << 20, "max_manifest_bytes": 4096},
                                               "proxy": {"upstreams": [{"host": "docker.io", "url": cls.a.url}]}})

    def test_blob_limit(self):
        b, a = self.b, self.a
        small, big = os.urandom(1 << 20), os.urandom((1 << 20) + 1)
        small_digest, big_digest = a.push_blob("library/limits", small), a.push_blob("library/limits", big)
        r = b.get(f"/v2/library/limits/blobs/{small_digest}?ns=docker.io")
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.body == small)
        res = dist.slow_get(b.port, f"/v2/library/limits/blobs/{big_digest}?ns=docker.io")
        self.assertFalse(res["status"] == 200 and res["complete"], "a blob over max_blob_bytes was served whole")
        self.assertNotIn(big_digest.split(":")[1], bt.blob_files(b.root), "a blob over max_blob_bytes was stored")

    def test_manifest_limit(self):
        b, a = self.b, self.a
        img = a.push_image("library/limits", "small", (100,))
        self.pull(b, "library/limits", "small", "?ns=docker.io", img, what="manifest under the limit")
        base = bt.make_image((100,))
        doc = json.loads(base["manifest"])
        doc["annotations"] = {"pad": "x" * 5000}
        big = dict(base, manifest=json.dumps(doc).encode())
        big["digest"] = bt.sha256_digest(big["manifest"])
        a.push_image("library/limits", "big", img=big)
        for ref in ("big", big["digest"]):
            r = b.get(f"/v2/library/limits/manifests/{ref}?ns=docker.io", headers={"Accept": ACCEPT})
            self.assertNotEqual(r.status, 200, f"a manifest over max_manifest_bytes was served by {ref}")
            self.assertEqual(r.status, 404, r)
        r = b.get(f"/v2/docker.io/library/limits/manifests/{big['digest']}", headers={"Accept": ACCEPT})
        self.assertEqual(r.status, 404, r)


class BerthUpstreamTest(ProxyTestCase):
    """berth proxying berth: the upstream berth has htpasswd users and its own token endpoint;
    the downstream follows the Bearer challenge (realm, service, scope) with its username and
    password_file. The downstream's only upstream is also its default for unprefixed names."""

    @classmethod
    def setUpClass(cls):
        cls.up = up = bt.serve(cls.addClassCleanup, cls.upstream_config, {"root": "root-pw", "mirror": "mirror-pw"})

        def mirror(name, password, log):
            """A berth mirroring up as its user mirror, with this password."""
            def config(b):
                with open(os.path.join(b.tmp, name), "w") as f:
                    f.write(password + "\n")
                return {**log, "proxy": {"upstreams": [
                    {"host": "registry.internal", "url": f"http://127.0.0.1:{up.port}", "username": "mirror",
                     "password_file": os.path.join(b.tmp, name)}]}}
            return bt.serve(cls.addClassCleanup, config)
        cls.down = mirror("mirror.pw", "mirror-pw", {"log": {"access": True}})
        cls.bad = mirror("bad.pw", "not-the-password", {})
        cls.root = bt.basic_auth("root", "root-pw")

    @classmethod
    def upstream_config(cls, up):
        bt.gen_ec_key(os.path.join(up.tmp, "token.key"))
        return {"log": {"access": True}, "auth": {
            "htpasswd": "htpasswd",
            "token": {"signing_key": "token.key", "issuer": "berth-upstream", "service": "berth-upstream",
                      "ttl_seconds": 300},
            "rules": [{"repository": "**", "principals": ["user:root"], "actions": ["pull", "push", "delete"]},
                      {"repository": "**", "principals": ["user:mirror"], "actions": ["pull"]}]}}

    def setUp(self):
        self.addCleanup(self.print_logs_on_failure)

    def print_logs_on_failure(self):
        if bt.failed(self) or os.environ.get("BERTH_KEEP"):
            print(f"\n--- downstream stderr:\n{self.down.stderr()[-3000:]}\n--- upstream stderr:\n"
                  f"{self.up.stderr()[-3000:]}", file=sys.stderr)

    def push_up(self, repo, tag, sizes=(1500,)):
        img = bt.make_image(sizes)
        for digest, data in img["blobs"].items():
            r = self.up.request("POST", f"/v2/{repo}/blobs/uploads/?digest={digest}", body=data,
                                headers={**self.root, "Content-Type": "application/octet-stream"})
            self.assertEqual(r.status, 201, r)
        r = self.up.request("PUT", f"/v2/{repo}/manifests/{tag}", body=img["manifest"],
                            headers={**self.root, "Content-Type": bt.OCI_MANIFEST})
        self.assertEqual(r.status, 201, r)
        return img

    def test_token_flow(self):
        img = self.push_up("team/app", "v1", (1500, 900))
        # the upstream refuses anonymous pulls (so the downstream must authenticate)
        self.assertEqual(self.up.get("/v2/team/app/manifests/v1", headers={"Accept": ACCEPT}).status, 401)
        self.pull(self.down, "team/app", "v1", "?ns=registry.internal", img, expect_ns="registry.internal",
                  what="berth upstream with tokens")
        self.pull(self.down, "registry.internal/team/app", img["digest"], "", img, what="prefixed")
        up_lines = [x for x in self.up.log_lines() if x.get("msg") == "request"]
        token_requests = [x for x in up_lines if x["target"].startswith("/auth/token")]
        self.assertTrue(token_requests, "the downstream never asked the upstream's token endpoint")
        queries = [urllib.parse.parse_qs(urllib.parse.urlsplit(x["target"]).query) for x in token_requests]
        self.assertTrue(any("repository:team/app:pull" in " ".join(q.get("scope", [])).split() for q in queries),
                        [x["target"] for x in token_requests])
        self.assertTrue(all(q.get("service") == ["berth-upstream"] for q in queries), queries)
        self.assertTrue(all(x["status"] == 200 for x in token_requests), token_requests)
        pulls = [x for x in up_lines if x["target"].startswith("/v2/team/app/")]
        self.assertTrue(any(x["status"] == 200 and x["principal"] == "mirror" for x in pulls), pulls)

    def test_only_upstream_is_the_default(self):
        img = self.push_up("team/other", "v3")
        self.pull(self.down, "team/other", "v3", "", img, what="unprefixed, the only upstream")
        self.pull(self.down, "registry.internal/team/other", "v3", "", img, what="prefixed")

    def test_wrong_password(self):
        img = self.push_up("team/locked", "v1")
        r = self.bad.get("/v2/team/locked/manifests/v1?ns=registry.internal", headers={"Accept": ACCEPT})
        self.assertError(r, 404, "MANIFEST_UNKNOWN", "wrong upstream password")
        r = self.bad.get(f"/v2/team/locked/blobs/{next(iter(img['blobs']))}?ns=registry.internal")
        self.assertError(r, 404, "BLOB_UNKNOWN", "wrong upstream password")
        self.assertTrue(self.bad.alive())


class ProxyConfigTest(unittest.TestCase):
    """Bad proxy configuration: `berth serve` refuses to start and names the key."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="berth-proxy-config-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def serve(self, config):
        path = os.path.join(self.tmp, "config.json")
        with open(path, "w") as f:
            json.dump(config, f)
        try:
            return bt.run_cli("serve", "--config", path, "--root", os.path.join(self.tmp, "root"),
                              "--listen", f"127.0.0.1:{bt.free_port()}", timeout=10)
        except subprocess.TimeoutExpired:
            self.fail(f"berth started with a bad configuration: {json.dumps(config)[:300]}")

    def test_bad_upstreams(self):
        pw = os.path.join(self.tmp, "pw")
        with open(pw, "w") as f:
            f.write("secret\n")
        good = {"host": "docker.io", "url": "http://127.0.0.1:1"}
        cases = [
            ([{"host": "docker.io"}], "proxy.upstreams[0].url"),
            ([{"url": "http://127.0.0.1:1"}], "proxy.upstreams[0].host"),
            ([{"host": "docker.io", "url": "ftp://x"}], "proxy.upstreams[0].url"),
            ([{"host": "docker.io", "url": "127.0.0.1:5000"}], "proxy.upstreams[0].url"),
            ([{"host": "docker.io", "url": 5}], "proxy.upstreams[0].url"),
            ([good, {"host": "docker.io", "url": "http://127.0.0.1:2"}], "proxy.upstreams[1].host"),
            ([{"host": "docker.io:443", "url": "http://127.0.0.1:1"}], "proxy.upstreams[0].host"),
            ([{"host": "Docker.io", "url": "http://127.0.0.1:1"}], "proxy.upstreams[0].host"),
            ([{"host": "..bad", "url": "http://127.0.0.1:1"}], "proxy.upstreams[0].host"),
            ([good, {"host": "quay.io", "url": "http://127.0.0.1:1", "username": "u",
                     "password_file": os.path.join(self.tmp, "missing.pw")}], "proxy.upstreams[1].password_file"),
            ([{**good, "username": "u", "password_file": self.tmp}], "proxy.upstreams[0].password_file"),
            ([{**good, "password_file": pw}], "proxy.upstreams[0]"),  # password_file without username
            ([{**good, "bogus": 1}], "proxy.upstreams[0].bogus"),
            ([{**good, "insecure": "yes"}], "proxy.upstreams[0].insecure"),
            ([{**good, "check_interval_seconds": -1}], "proxy.upstreams[0].check_interval_seconds"),
            ([{**good, "max_concurrent": 0}], "proxy.upstreams[0].max_concurrent"),
            ([{**good, "ca_file": os.path.join(self.tmp, "missing.crt")}], "proxy.upstreams[0].ca_file"),
            ([{**good, "username": "u", "password_file": pw}, {**good, "host": "quay.io", "bogus": 1}],
             "proxy.upstreams[1].bogus"),
            ({"host": "docker.io"}, "proxy.upstreams"),
        ]
        for upstreams, key in cases:
            with self.subTest(key=key, upstreams=json.dumps(upstreams)[:120]):
                r = self.serve({"proxy": {"upstreams": upstreams}})
                self.assertNotEqual(r.returncode, 0, r.stderr)
                self.assertEqual(r.returncode, 2, f"exit code of a configuration error: {r.stderr[-500:]}")
                self.assertIn(key, r.stderr)
        r = self.serve({"proxy": {"upstreams": [good], "bogus": True}})
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("proxy.bogus", r.stderr)

    def test_good_config_starts(self):
        # the negative cases above must be able to pass: every documented key, accepted
        ca, _ = bt.make_ca(self.tmp)
        pw = os.path.join(self.tmp, "pw")
        with open(pw, "w") as f:
            f.write("secret\n")
        b = bt.Berth(config={"proxy": {"upstreams": [
            {"host": "docker.io", "url": "http://127.0.0.1:1", "ca_file": ca, "insecure": False,
             "username": "alice", "password_file": pw, "check_interval_seconds": 300, "max_concurrent": 16},
            {"host": "registry.k8s.io", "url": "https://127.0.0.1:2", "insecure": True}]}})
        try:
            b.start()
            self.assertEqual(b.get("/v2/").status, 200)
        finally:
            b.cleanup()


if __name__ == "__main__":
    dist.skip_unless_available("test_proxy_standalone.py")
    unittest.main()
