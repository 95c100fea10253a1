#!/usr/bin/env python3
"""The web UI's JSON API (/ui/api/) on registries of their own, each started for its test or class
(test_ui_api.py is the API on one registry with users, rules and policies): mirrors (a real CNCF
Distribution upstream and one on a closed port: hits, misses, fetched bytes, reachability and its
last error, the cached repositories the caller may pull); an image config with ExposedPorts in the
manifest view; a registry without authentication ({"auth": false}, everything listed, login sets no
cookie); ui.enabled false (404 for files, API and login; /v2/ unaffected); configurations berth
refuses to start with (ui.session_seconds 10 or past a week, a registry_host with "/" or "<", a
non-boolean enabled, an unknown key).

Mirrors are skipped when /usr/bin/docker-registry is not installed.
"""

import http.client
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
import distribution as dist  # noqa: E402
from uicase import FORM, PASSWORDS, SESSION_VIEW, UiCase, auth, config_of, manifest_of  # noqa: E402


class UiMirrorsTest(UiCase, bt.ServerTest):
    """/ui/api/mirrors with a real Distribution upstream (docker.io) and one on a closed port."""

    passwords = {u: PASSWORDS[u] for u in ("alice", "bob")}

    @classmethod
    def setUpClass(cls):
        if not dist.available():
            raise unittest.SkipTest(f"{dist.BIN} (Debian's docker-registry) is not installed")
        cls.a = dist.Distribution()
        cls.addClassCleanup(cls.a.cleanup)
        cls.a.start()
        cls.dead_url = f"http://127.0.0.1:{bt.free_port()}"
        super().setUpClass()

    @classmethod
    def configure(cls, b):
        return {"log": {"access": False},
                "auth": {"htpasswd": "htpasswd", "rules": [
                    {"repository": "docker.io/library/**", "principals": ["anonymous", "authenticated"],
                     "actions": ["pull"]},
                    {"repository": "dead.test/**", "principals": ["anonymous"], "actions": ["pull"]},
                    {"repository": "docker.io/private/**", "principals": ["user:alice"], "actions": ["pull"]}]},
                "proxy": {"upstreams": [{"host": "docker.io", "url": cls.a.url},
                                        {"host": "dead.test", "url": cls.dead_url}]}}

    def mirrors(self, who="bob"):
        # Upstream URLs and errors are for those signed in: bob may pull docker.io/library/** only.
        doc = self.ok("mirrors", who)
        return {m["host"]: m for m in doc["mirrors"]}

    def pull_all(self, repo, ref, who=None):
        """Manifest and every blob through berth; returns the bytes of the blobs."""
        headers = {**(auth(who) if who else {}), "Accept": bt.OCI_MANIFEST}
        r = self.b.get(f"/v2/{repo}/manifests/{ref}", headers=headers)
        self.assertEqual(r.status, 200, r)
        doc = json.loads(r.body)
        total = 0
        for desc in [doc["config"], *doc["layers"]]:
            blob = self.b.get(f"/v2/{repo}/blobs/{desc['digest']}", headers=headers)
            self.assertEqual(blob.status, 200, blob)
            total += len(blob.body)
        return total

    def test_mirror_status(self):
        self.assertError(self.api("mirrors", None), 401, "UNAUTHORIZED")
        before = self.mirrors()
        self.assertEqual(sorted(before), ["dead.test", "docker.io"])
        for m in before.values():
            self.assertEqual((m["hits"], m["misses"], m["fetched_bytes"], m["errors"]), (0, 0, 0, 0), m)
            self.assertEqual((m["reachable"], m["last_error"], m["repositories"], m["repositories_more"]),
                             (None, None, [], False), m)
        self.assertEqual(before["docker.io"]["urls"], [self.a.url])
        self.assertEqual(before["dead.test"]["urls"], [self.dead_url])

        public = self.a.push_image("library/hello", "v1", (3000, 2000))
        self.a.push_image("private/thing", "v1", (100,))
        blob_bytes = self.pull_all("docker.io/library/hello", "v1")
        self.assertEqual(blob_bytes, sum(map(len, public["blobs"].values())))
        self.pull_all("docker.io/private/thing", "v1", "alice")
        first = self.mirrors()["docker.io"]
        self.assertGreaterEqual(first["misses"], 2)
        self.assertGreaterEqual(first["fetched_bytes"], blob_bytes)
        self.assertIs(first["reachable"], True)
        self.assertIsNone(first["last_error"])
        self.pull_all("docker.io/library/hello", "v1")  # from the cache now
        second = self.mirrors()["docker.io"]
        self.assertGreater(second["hits"], first["hits"])
        self.assertEqual(second["misses"], first["misses"])
        self.assertEqual(second["fetched_bytes"], first["fetched_bytes"])
        # The cached repositories, as far as the caller may pull them.
        self.assertEqual(self.mirrors()["docker.io"]["repositories"], ["docker.io/library/hello"])
        self.assertEqual(self.mirrors("alice")["docker.io"]["repositories"],
                         ["docker.io/library/hello", "docker.io/private/thing"])
        self.assertEqual(self.ok("repository", name="docker.io/library/hello")["mirrored"], True)

        # The upstream gone: a new tag cannot be had, and the mirror is unreachable, saying why.
        self.a.kill()
        r = self.b.get("/v2/docker.io/library/hello/manifests/v2", headers={"Accept": bt.OCI_MANIFEST})
        self.assertNotEqual(r.status, 200, r)
        down = bt.poll(lambda: (lambda m: m if m["reachable"] is False else None)(self.mirrors()["docker.io"]), 10,
                       0.1, "docker.io to be reported unreachable")
        self.assertIsInstance(down["last_error"], str)
        self.assertTrue(down["last_error"])
        self.assertGreater(down["errors"], 0)
        self.assertEqual(self.pull_all("docker.io/library/hello", "v1"), blob_bytes)  # still served from the cache

        # An upstream nobody listens for: unreachable after the first try.
        r = self.b.get("/v2/dead.test/library/x/manifests/v1", headers={"Accept": bt.OCI_MANIFEST})
        self.assertNotEqual(r.status, 200, r)
        dead = bt.poll(lambda: (lambda m: m if m["reachable"] is False else None)(self.mirrors()["dead.test"]), 10,
                       0.1, "dead.test to be reported unreachable")
        self.assertTrue(dead["last_error"])
        self.assertEqual(dead["repositories"], [])


class UiExposedPortsTest(UiCase):
    """An image config with ExposedPorts (most server images have them), on a registry of its own
    so that a crash cannot take the other tests with it."""

    def test_exposed_ports(self):
        b = bt.serve(self.addCleanup, {"log": {"access": False}})
        type(self).b = b
        self.addCleanup(setattr, type(self), "b", None)
        config = config_of(config={"Cmd": ["nginx"], "ExposedPorts": {"80/tcp": {}, "443/tcp": {}, "53/udp": {}}})
        layer = os.urandom(100)
        b.push_blob("web/nginx", config)
        b.push_blob("web/nginx", layer)
        self.assertEqual(b.put_manifest("web/nginx", "v1", manifest_of(config, [layer])).status, 201)
        for _ in range(3):
            try:
                r = b.get("/ui/api/manifest?name=web/nginx&reference=v1")
            except (OSError, http.client.HTTPException) as e:
                self.fail(f"GET /ui/api/manifest of an image with ExposedPorts: {e!r}; berth exited with "
                          f"{b.proc.wait(5)}")
            self.assertEqual(r.status, 200, f"{r}; berth alive: {b.alive()}")
            self.assertEqual(sorted(r.json()["config"]["exposed_ports"]), ["443/tcp", "53/udp", "80/tcp"])
            self.assertEqual(r.json()["config"]["cmd"], ["nginx"])
        self.assertTrue(b.alive())


class UiConfigTest(UiCase):
    """Without authentication; turned off; refused configurations."""

    def serve(self, config):
        return bt.serve(self.addCleanup, dict(config, log={"access": False}))

    def test_without_authentication(self):
        b = self.serve({})
        type(self).b = b
        self.addCleanup(setattr, type(self), "b", None)
        img = b.push_image("any/thing", "v1")
        b.push_image("other", "v1")
        self.assertEqual(self.ok(SESSION_VIEW, "alice"), {"user": None, "auth": False, "registry": None})
        self.assertEqual(self.names(), ["any/thing", "other"])
        self.assertEqual(self.ok("manifest", name="any/thing", reference="v1")["digest"], img["digest"])
        r = b.request("POST", "/ui/login", body=b"username=alice&password=x", headers=FORM)
        self.assertEqual((r.status, r.header("Location"), r.header("Set-Cookie")), (303, "./", None))
        self.assertEqual([x["namespace"] for x in self.ok("namespaces")["namespaces"]], ["any", "other"])

    def test_disabled(self):
        b = self.serve({"ui": {"enabled": False}})
        self.assertEqual(b.get("/v2/").status, 200)
        b.push_image("x/y", "v1")
        for method, path in (("GET", "/ui/"), ("GET", "/ui"), ("GET", "/ui/app.js"), ("GET", "/ui/login"),
                             ("GET", "/ui/api/session"), ("GET", "/ui/api/repositories"), ("POST", "/ui/login"),
                             ("HEAD", "/ui/")):
            with self.subTest(method=method, path=path):
                r = b.request(method, path, body=b"username=a&password=b" if method == "POST" else None,
                              headers=FORM if method == "POST" else {})
                self.assertEqual(r.status, 404, r)
                self.assertNotIn(b"x/y", r.body)
                self.assertIsNone(r.header("Set-Cookie"))
        self.assertEqual(b.get("/v2/x/y/manifests/v1").status, 200)

    def test_refused_configurations(self):
        tmp = tempfile.mkdtemp(prefix="berth-ui-config-")
        self.addCleanup(shutil.rmtree, tmp, True)
        path = os.path.join(tmp, "config.json")
        for ui, message in (({"session_seconds": 10}, "ui.session_seconds must be between 60 and 604800"),
                            ({"session_seconds": 604801}, "ui.session_seconds must be between 60 and 604800"),
                            ({"registry_host": "evil.example/<script>"}, "ui.registry_host"),
                            ({"enabled": "yes"}, "ui.enabled"),
                            ({"sessions": 60}, "ui.sessions")):
            with self.subTest(ui=ui):
                with open(path, "w") as f:
                    json.dump({"ui": ui}, f)
                r = bt.run_cli("serve", "--config", path, "--root", os.path.join(tmp, "root"),
                               "--listen", f"127.0.0.1:{bt.free_port()}", timeout=10)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(message, r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
