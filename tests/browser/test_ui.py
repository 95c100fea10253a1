#!/usr/bin/env python3
"""The web UI at /ui/ in a real browser: Debian's headless chromium, driven by chromedriver through
python3-selenium, against a real berth. Every image is pushed by a real client: skopeo (an OCI
layout of one image or an amd64+arm64 index, tests/lib/oci.sh) and buildah (from scratch, with
labels, annotations, environment and history holding hostile strings); the SBOM and other
referrers are artifact manifests with a subject, pushed over HTTP from here.

One berth with htpasswd users alice and bob (public/** readable by everyone, pushed by alice;
${user}/** private to its user), a mirror of a dead upstream, a retention policy (never run) and
a quota. The browser, one per class, proves:

1. sign-in at /ui/login lands on the repositories page naming the user; a wrong password says
   so; the session cookie is HttpOnly and SameSite=Strict;
2. search: the hash carries ?q=, only matching repositories are listed; a repository opened
   from the list survives a reload, and Back returns to the results;
3. an index's platforms with the sizes /v2/ gives; a platform's layers with the sizes its
   manifest gives, its config and labels; the SBOM under the index's referrers with its artifact
   type; the links from index to child, to referrer, and from the referrer to its subject;
4. copying a pull command: the element is marked copied, the text is exactly the docker
   command, and the clipboard holds it;
5. privacy: bob sees neither alice's private repository in the list nor its pages (an error
   instead), and the JSON API says 404 to him (200 to alice); anonymous sees public/** only, is
   told to sign in for a private repository (and on any page whose view answers it 401), and
   has the sign-in link on every page; signing out works;
6. hostile labels, annotations (values and keys), environment, history and referrer
   annotations are shown as literal text: no element, link or script comes of them; the pages
   and the JSON views carry a CSP without inline script and without framing, and nosniff;
7. behind a reverse proxy that adds a path prefix (/registry/), sign-in, assets and API calls
   all stay under the prefix;
9. mirrors (the upstream's URL, unreachable after a failed pull), namespaces (only those the
   caller may read, the quota), retention (a dry run listing what keep_last would delete,
   which stays) render; every page is saved as a screenshot.

(8, the cluster page with a killed replica, is test_ui_cluster.py's.)

The browser and its waits are tests/lib/browsercase.py's: screenshots go to $BERTH_ARTIFACTS, else
<directory of BERTH_BIN>/test-artifacts/ui/; waits are WebDriverWait polls, never sleeps. The
browser's console must stay free of errors other than the failed requests a test causes on purpose.
"""

import http.client
import http.server
import json
import os
import subprocess
import sys
import threading
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
from browsercase import BrowserTestCase, new_driver, screenshot  # noqa: E402

LIB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib")

PASSWORDS = {"alice": "alice-pw", "bob": "bob-pw"}
RULES = [
    {"repository": "public/**", "principals": ["anonymous", "authenticated"], "actions": ["pull"]},
    {"repository": "public/**", "principals": ["user:alice"], "actions": ["pull", "push"]},
    {"repository": "${user}/**", "principals": ["authenticated"], "actions": ["pull", "push", "delete"]},
    # For the mirror page's pull (test 9), and because with a single upstream a read of a
    # repository not here yet is a read of mirror.invalid/NAME: skopeo's and buildah's HEAD of a
    # blob before the first push into a new repository is checked against this rule (without
    # it the HEAD is 403 and the push fails).
    {"repository": "mirror.invalid/**", "principals": ["authenticated"], "actions": ["pull"]},
]
PUBLIC = {"public/multiarch", "public/app-frontend", "public/app-backend", "public/hostile"}
PRIVATE_ALICE, PRIVATE_BOB = "alice/secret-app", "bob/tools"
QUOTA = 10 * 1024 * 1024
DEAD_UPSTREAM = "http://127.0.0.1:9"

INDEX = "application/vnd.oci.image.index.v1+json"
EMPTY = "application/vnd.oci.empty.v1+json"
SBOM = "application/spdx+json"
ACCEPT = f"{bt.OCI_MANIFEST}, {INDEX}"

HOSTILE_IMG = '<img src=x onerror="window.__pwned=1">'
HOSTILE_SCRIPT = "</script><script>window.__pwned=1</script>"
HOSTILE_URL = "javascript:window.__pwned=1"


# ---- helpers: HTTP, the clients that push, a reverse proxy


def http_get(url, headers=None):
    """(status, headers, body) of a GET with urllib; an error status is an answer too."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def run(args, env=None):
    r = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({r.returncode}): {r.stderr[-2000:]}")
    return r.stdout


def auth(user):
    return bt.basic_auth(user, PASSWORDS[user])


def hash_of(url):
    return urllib.parse.unquote(urllib.parse.urlsplit(url).fragment)


class PrefixProxy:
    """A reverse proxy on a free loopback port: /PREFIX/REST goes to berth's /REST with method,
    headers (Host and Cookie too) and body as they came, and the answer comes back as berth gave
    it (Set-Cookie and Location untouched). Every request is recorded as (method, path, status)."""

    HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}

    def __init__(self, prefix, port):
        self.prefix, self.target, self.seen = prefix, port, []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def forward(self):
                if not self.path.startswith(proxy.prefix + "/"):
                    proxy.seen.append((self.command, self.path, 404))
                    self.send_error(404)
                    return
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in proxy.HOP}
                conn = http.client.HTTPConnection("127.0.0.1", proxy.target, timeout=30)
                try:
                    conn.request(self.command, self.path[len(proxy.prefix):], body=body, headers=headers)
                    r = conn.getresponse()
                    data = r.read()
                finally:
                    conn.close()
                proxy.seen.append((self.command, self.path, r.status))
                self.send_response_only(r.status, r.reason)
                for k, v in r.getheaders():
                    if k.lower() not in proxy.HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_POST = do_HEAD = forward

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class WebUI(BrowserTestCase, bt.ServerTest):
    passwords = PASSWORDS
    config = {
        "auth": {"htpasswd": "htpasswd", "rules": RULES},
        "proxy": {"upstreams": [{"host": "mirror.invalid", "url": DEAD_UPSTREAM}]},
        "retention": {"interval_seconds": 0,
                      "policies": [{"name": "apps", "repositories": ["public/app-*"], "keep_last": 1}]},
        "quotas": [{"namespaces": "public", "max_bytes": QUOTA}],
        "log": {"access": False},
    }

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        b = cls.b
        cls.base = f"http://127.0.0.1:{b.port}"
        cls.host = f"127.0.0.1:{b.port}"
        cls.work = os.path.join(b.tmp, "work")
        os.makedirs(os.path.join(cls.work, "tmp"))
        cls.env = {**os.environ, "TMPDIR": os.path.join(cls.work, "tmp"), "BUILDAH_ISOLATION": "chroot"}
        started = time.monotonic()
        cls.push_images()
        print(f"\nimages pushed in {time.monotonic() - started:.1f}s", file=sys.stderr)
        cls.driver = new_driver()
        cls.addClassCleanup(cls.driver.quit)

    # ---- pushing, with real clients where a client can

    @classmethod
    def skopeo_layout(cls, layout, tag, dest, user, all_images=False):
        run(["skopeo", "copy", "--quiet", *(["--all"] if all_images else []), "--dest-tls-verify=false",
             "--dest-creds", f"{user}:{PASSWORDS[user]}", f"oci:{layout}:{tag}", f"docker://{cls.host}/{dest}"],
            env=cls.env)

    @classmethod
    def oci(cls, function, layout, *args):
        return run(["bash", "-c", f'. "{LIB}/oci.sh" && {function} "$@"', "oci", layout, *args], env=cls.env).strip()

    @classmethod
    def push_blob(cls, repo, data, user):
        r = cls.b.request("POST", f"/v2/{repo}/blobs/uploads/?digest={bt.sha256_digest(data)}", body=data,
                          headers={**auth(user), "Content-Type": "application/octet-stream"})
        if r.status != 201:
            raise AssertionError(f"POST blob to {repo}: {r}")

    @classmethod
    def put_manifest(cls, repo, ref, manifest, user, media_type=bt.OCI_MANIFEST):
        r = cls.b.request("PUT", f"/v2/{repo}/manifests/{ref}", body=manifest,
                          headers={**auth(user), "Content-Type": media_type})
        if r.status != 201:
            raise AssertionError(f"PUT manifest {repo}:{ref}: {r}")
        return r

    @classmethod
    def get_manifest(cls, repo, ref, user="alice"):
        """(digest, bytes, parsed) of a manifest as /v2/ serves it (urllib, Basic auth)."""
        status, headers, body = http_get(f"{cls.base}/v2/{repo}/manifests/{ref}", {**auth(user), "Accept": ACCEPT})
        if status != 200:
            raise AssertionError(f"GET manifest {repo}:{ref}: {status} {body[:300]}")
        return headers["Docker-Content-Digest"], body, json.loads(body)

    @classmethod
    def push_referrer(cls, repo, subject_ref, artifact_type, payload, annotations, user="alice"):
        """An artifact manifest (empty config, one layer) whose subject is repo:subject_ref."""
        digest, body, doc = cls.get_manifest(repo, subject_ref, user)
        cls.push_blob(repo, b"{}", user)
        cls.push_blob(repo, payload, user)
        manifest = json.dumps({
            "schemaVersion": 2, "mediaType": bt.OCI_MANIFEST, "artifactType": artifact_type,
            "config": {"mediaType": EMPTY, "digest": bt.sha256_digest(b"{}"), "size": 2, "data": "e30="},
            "layers": [{"mediaType": artifact_type, "digest": bt.sha256_digest(payload), "size": len(payload)}],
            "subject": {"mediaType": doc["mediaType"], "digest": digest, "size": len(body)},
            "annotations": annotations,
        }).encode()
        r = cls.put_manifest(repo, bt.sha256_digest(manifest), manifest, user)
        if r.header("OCI-Subject") != digest:
            raise AssertionError(f"referrer in {repo}: no OCI-Subject {digest}: {r}")
        return bt.sha256_digest(manifest)

    @classmethod
    def push_images(cls):
        w = cls.work
        # skopeo: an amd64+arm64 index, single images (two tags of app-frontend for retention)
        cls.oci("oci_make_index", f"{w}/multi", "v1", "amd64", "arm64")
        cls.skopeo_layout(f"{w}/multi", "v1", "public/multiarch:v1", "alice", all_images=True)
        for layout, tag, dest, user in (("front1", "v1", "public/app-frontend:v1", "alice"),
                                        ("front2", "v2", "public/app-frontend:v2", "alice"),
                                        ("back", "v1", "public/app-backend:v1", "alice"),
                                        ("secret", "v1", f"{PRIVATE_ALICE}:v1", "alice"),
                                        ("tools", "v1", f"{PRIVATE_BOB}:v1", "bob")):
            cls.oci("oci_make_image", f"{w}/{layout}", tag)
            cls.skopeo_layout(f"{w}/{layout}", tag, dest, user)
        sbom = json.dumps({"spdxVersion": "SPDX-2.3", "name": "multiarch"}).encode()
        cls.sbom = cls.push_referrer("public/multiarch", "v1", SBOM, sbom,
                                     {"org.opencontainers.image.created": "2024-01-01T00:00:00Z"})

        # buildah: hostile strings in labels, annotations, environment and history
        buildah = ["buildah", "--root", f"{w}/storage", "--runroot", f"{w}/run", "--storage-driver", "vfs"]
        ctr = run([*buildah, "from", "--quiet", "scratch"], env=cls.env).strip()
        run([*buildah, "config",
             "--label", f"org.example.img={HOSTILE_IMG}", "--label", f"org.example.script={HOSTILE_SCRIPT}",
             "--label", f"org.example.url={HOSTILE_URL}",
             "--annotation", f"org.example.img={HOSTILE_IMG}", "--annotation", f"org.example.script={HOSTILE_SCRIPT}",
             "--annotation", f"org.example.link={HOSTILE_URL}",
             "--env", f"HOSTILE={HOSTILE_SCRIPT}", "--created-by", HOSTILE_IMG, ctr], env=cls.env)
        run([*buildah, "commit", "--quiet", ctr, "localhost/hostile:v1"], env=cls.env)
        run([*buildah, "push", "--quiet", "--tls-verify=false", "--creds", f"alice:{PASSWORDS['alice']}",
             "localhost/hostile:v1", f"docker://{cls.host}/public/hostile:v1"], env=cls.env)
        # The same image with the strings as keys too (buildah splits KEY=VALUE at the first "="):
        # a config with hostile label keys, a manifest with hostile annotation keys, tag "keys".
        _, _, doc = cls.get_manifest("public/hostile", "v1")
        status, _, config = http_get(f"{cls.base}/v2/public/hostile/blobs/{doc['config']['digest']}", auth("alice"))
        if status != 200:
            raise AssertionError(f"GET config of public/hostile:v1: {status}")
        config = json.loads(config)
        config["config"]["Labels"].update({HOSTILE_IMG: "label key", HOSTILE_SCRIPT: "label key",
                                           HOSTILE_URL: "label key"})
        config = json.dumps(config).encode()
        cls.push_blob("public/hostile", config, "alice")
        doc["config"] = {**doc["config"], "digest": bt.sha256_digest(config), "size": len(config)}
        doc["annotations"].update({HOSTILE_IMG: "annotation key", HOSTILE_SCRIPT: "annotation key",
                                   HOSTILE_URL: HOSTILE_URL})
        cls.put_manifest("public/hostile", "keys", json.dumps(doc).encode(), "alice")
        cls.push_referrer("public/hostile", "v1", "application/vnd.example.note+json", b"note",
                          {HOSTILE_IMG: HOSTILE_URL, "org.example.link": HOSTILE_SCRIPT})

    # ---- browsing

    def ui(self, hash_part="", base=None):
        return f"{base or self.base}/ui/{hash_part}"

    def visit(self, hash_part, base=None):
        """A fresh load of the page (the session is asked again) at /ui/HASH."""
        self.driver.get("about:blank")
        self.driver.get(self.ui(hash_part, base))

    def clear_cookies(self):
        self.driver.execute_cdp_cmd("Network.clearBrowserCookies", {})

    def sign_in(self, user, password=None, base=None):
        self.clear_cookies()
        self.driver.get(f"{base or self.base}/ui/login")
        self.one("#username").send_keys(user)
        self.one("#password").send_keys(password or PASSWORDS[user])
        self.one("#sign-in").click()
        if password is None:
            self.wait(lambda: self.one("#user").text == user, f"#user to show {user}")

    def sign_out(self):
        self.one("form.logout button[type=submit]").click()
        self.wait(lambda: self.shown("#login-link") and not self.all("#user"), "the sign-in link after signing out")

    def heading(self):
        return self.one("#main h1").text

    def wait_heading(self, text):
        self.wait(lambda: self.heading() == text, f"the heading {text!r}")

    def listed_repositories(self):
        """Names in #repositories once the list has loaded."""
        self.wait(lambda: self.all("#repositories"), "#repositories")
        return {a.text for a in self.all("#repositories tr.repository a.repository-link")}

    def session_cookie(self):
        cookies = [c for c in self.driver.get_cookies() if c["name"] == "berth_session"]
        return cookies[0] if cookies else None

    def error_box(self):
        box = self.shown("#error")
        return box.text if box is not None and box.text else None

    # ---- 1. sign-in

    def test_01_sign_in(self):
        self.sign_in("alice", password="wrong")
        self.wait(lambda: self.shown("#login-error"), "the sign-in error")
        self.assertEqual(self.one("#login-error").text, "Wrong username or password.")
        self.assertTrue(self.driver.current_url.endswith("/ui/login?failed"), self.driver.current_url)
        self.assertIsNone(self.session_cookie())
        screenshot(self.driver, "login")

        self.sign_in("alice")
        self.assertEqual(self.driver.current_url, self.ui())
        self.wait_heading("Repositories")
        self.assertEqual(self.listed_repositories(), PUBLIC | {PRIVATE_ALICE})
        self.assertEqual(self.one("#user").text, "alice")
        self.assertFalse(self.all("#login-link"))
        cookie = self.session_cookie()
        self.assertIsNotNone(cookie, self.driver.get_cookies())
        self.assertIs(cookie["httpOnly"], True, cookie)
        self.assertEqual(cookie["sameSite"], "Strict", cookie)
        self.assertEqual(cookie["path"], "/ui", cookie)
        # Scripts cannot read it.
        self.assertNotIn("berth_session", self.driver.execute_script("return document.cookie"))
        screenshot(self.driver, "repositories")
        self.assertCleanConsole()

    # ---- 2. search, reload, back

    def test_02_search_reload_back(self):
        self.sign_in("alice")
        self.assertGreater(len(self.listed_repositories()), 2)
        search = self.one("#search")
        search.clear()
        search.send_keys("app-")
        self.one("#search-form button[type=submit]").click()
        self.wait(lambda: hash_of(self.driver.current_url) == "/?q=app-", "the hash to carry ?q=app-")
        self.wait_heading("Repositories matching “app-”")
        self.assertEqual(self.listed_repositories(), {"public/app-frontend", "public/app-backend"})
        self.assertEqual(self.one("#search").get_attribute("value"), "app-")

        self.one('#repositories a.repository-link[href="#/repository/public%2Fapp-frontend"]').click()
        self.wait(lambda: hash_of(self.driver.current_url) == "/repository/public/app-frontend", "the repository's hash")
        self.wait_heading("public/app-frontend")
        self.assertEqual({t.get_attribute("data-tag") for t in self.all("#tags tr.tag")}, {"v1", "v2"})

        self.driver.refresh()
        self.wait(lambda: self.all("#tags tr.tag"), "the tags after a reload")
        self.assertEqual(self.heading(), "public/app-frontend")
        self.assertEqual({t.get_attribute("data-tag") for t in self.all("#tags tr.tag")}, {"v1", "v2"})
        self.assertEqual(self.one("#user").text, "alice")

        self.driver.back()
        self.wait(lambda: hash_of(self.driver.current_url) == "/?q=app-", "Back to the search's hash")
        self.wait_heading("Repositories matching “app-”")
        self.assertEqual(self.listed_repositories(), {"public/app-frontend", "public/app-backend"})

        # A search that matches nothing says so.
        self.visit("#/?q=no-such-name")
        self.wait(lambda: self.shown("#main p.note"), "the note of an empty search")
        self.assertEqual(self.one("#main p.note").text, "No repository name contains “no-such-name”.")
        self.assertFalse(self.all("#repositories tr.repository"))
        self.assertCleanConsole()

    # ---- 3. index, platforms, layers, referrers

    def test_03_index_platforms_layers_referrers(self):
        self.sign_in("alice")
        index_digest, index_body, index = self.get_manifest("public/multiarch", "v1")
        self.assertEqual(index["mediaType"], INDEX)
        want_platforms = {f"{m['platform']['os']}/{m['platform']['architecture']}": (m["digest"], m["size"])
                          for m in index["manifests"]}
        self.assertEqual(set(want_platforms), {"linux/amd64", "linux/arm64"})

        self.visit("#/repository/public%2Fmultiarch")
        self.wait(lambda: self.all('#tags tr.tag[data-tag="v1"]'), "the tag v1")
        row = self.one('#tags tr.tag[data-tag="v1"]')
        self.assertEqual(self.one("td.platforms", row).text, "linux/amd64, linux/arm64")
        self.assertEqual(self.one("a.digest-link code", row).get_attribute("title"), index_digest)
        screenshot(self.driver, "repository")

        self.one("a.tag-link", row).click()
        self.wait(lambda: hash_of(self.driver.current_url) == "/manifest/public/multiarch/v1", "the manifest's hash")
        self.wait(lambda: len(self.all("#platforms tr.platform")) == 2, "two platform rows")
        shown = {}
        for tr in self.all("#platforms tr.platform"):
            shown[self.one("td.platform-name", tr).text] = (
                self.one("a.digest-link code", tr).get_attribute("title"),
                int(self.one("td.size", tr).get_attribute("data-bytes")))
        self.assertEqual(shown, want_platforms)
        facts = self.one("#summary").text
        self.assertIn("index", facts)
        self.assertIn(index_digest, facts)
        self.assertFalse(self.all("#layers"))
        referrers = self.all("#referrers tr.referrer")
        self.assertEqual(len(referrers), 1)
        self.assertEqual(self.one("td code", referrers[0]).text, SBOM)
        self.assertEqual(self.one("a.digest-link code", referrers[0]).get_attribute("title"), self.sbom)
        screenshot(self.driver, "manifest-index", full=True)

        # A platform: its layers as its manifest says, its config.
        child_digest = want_platforms["linux/arm64"][0]
        _, _, child = self.get_manifest("public/multiarch", child_digest)
        [platform_row] = [tr for tr in self.all("#platforms tr.platform")
                          if self.one("td.platform-name", tr).text == "linux/arm64"]
        self.one("a.digest-link", platform_row).click()
        self.wait(lambda: hash_of(self.driver.current_url) == f"/manifest/public/multiarch/{child_digest}",
                  "the platform's hash")
        self.wait(lambda: self.all("#layers tr.layer"), "layer rows")
        layers = [(self.one("code.digest", tr).get_attribute("title"),
                   int(self.one("td.size[data-bytes]", tr).get_attribute("data-bytes")))
                  for tr in self.all("#layers tr.layer")]
        self.assertEqual(layers, [(layer["digest"], layer["size"]) for layer in child["layers"]])
        self.assertIn("linux/arm64", self.one("#config").text)
        self.assertEqual(self.one("#config code.digest").get_attribute("title"), child["config"]["digest"])
        self.assertEqual(int(self.one("#config .size").get_attribute("data-bytes")), child["config"]["size"])
        labels = {self.one("th", tr).text: self.one("td", tr).text for tr in self.all("#labels tbody tr")}
        self.assertEqual(labels, {"berth.e2e": "true"})
        self.assertEqual(len(self.all("#history tr.history-step")), 2)
        self.assertIn("image", self.one("#summary").text)
        screenshot(self.driver, "manifest-image", full=True)

        # Back to the index, to the SBOM, and from it to its subject.
        self.driver.back()
        self.wait(lambda: len(self.all("#referrers tr.referrer")) == 1, "the index page again")
        self.one("#referrers tr.referrer a.digest-link").click()
        self.wait(lambda: hash_of(self.driver.current_url) == f"/manifest/public/multiarch/{self.sbom}",
                  "the SBOM's hash")
        self.wait(lambda: self.all("#subject a.digest-link"), "the SBOM's subject")
        self.assertIn(SBOM, self.one("#summary").text)
        self.assertIn("artifact", self.one("#summary").text)
        self.assertEqual(self.one("#subject a.digest-link code").get_attribute("title"), index_digest)
        self.assertEqual(int(self.one("#subject .size").get_attribute("data-bytes")), len(index_body))
        self.one("#subject a.digest-link").click()
        self.wait(lambda: hash_of(self.driver.current_url) == f"/manifest/public/multiarch/{index_digest}",
                  "the subject's hash")
        self.wait(lambda: len(self.all("#platforms tr.platform")) == 2, "the subject's platforms")
        self.assertIn(index_digest, self.one("#summary").text)
        self.assertCleanConsole()

    # ---- 4. copying a pull command

    def test_04_copy_pull_command(self):
        self.sign_in("alice")
        self.driver.execute_cdp_cmd("Browser.grantPermissions", {
            "origin": self.base, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]})
        self.visit("#/manifest/public%2Fapp-frontend/v2")
        self.wait(lambda: self.all('.pull-command[data-tool="docker"][data-by="tag"]'), "the pull commands")
        clipboard = ("const done = arguments[arguments.length - 1];"
                     "navigator.clipboard.readText().then(done, (e) => done('ERROR ' + e));")
        before = self.driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "navigator.clipboard.writeText('nothing yet').then(() => done('ok'), (e) => done('ERROR ' + e));")
        self.assertEqual(before, "ok")
        self.assertEqual(self.driver.execute_async_script(clipboard), "nothing yet")

        command = self.one('.pull-command[data-tool="docker"][data-by="tag"]')
        self.assertIsNone(command.get_attribute("data-copied"))
        want = f"docker pull {self.host}/public/app-frontend:v2"
        self.assertEqual(self.one("code", command).text, want)
        self.one("button.copy", command).click()
        self.wait(lambda: command.get_attribute("data-copied") == "true", "data-copied")
        self.assertEqual(self.one("button.copy", command).text, "Copied")
        self.assertEqual(self.driver.execute_async_script(clipboard), want)
        # Only the clicked one is marked.
        others = [c for c in self.all(".pull-command") if c.get_attribute("data-copied") == "true"]
        self.assertEqual(len(others), 1)
        self.assertCleanConsole()

    # ---- 5. privacy

    def test_05_privacy(self):
        secret_repo = "#/repository/alice%2Fsecret-app"
        secret_manifest = "#/manifest/alice%2Fsecret-app/v1"
        self.sign_in("alice")
        self.assertIn(PRIVATE_ALICE, self.listed_repositories())
        self.visit(secret_repo)
        self.wait(lambda: self.all('#tags tr.tag[data-tag="v1"]'), "alice's private tag for alice")
        self.visit(secret_manifest)
        self.wait(lambda: self.all("#summary"), "alice's private manifest for alice")
        self.sign_out()
        self.assertIsNone(self.session_cookie())

        self.sign_in("bob")
        self.assertEqual(self.listed_repositories(), PUBLIC | {PRIVATE_BOB})
        bob_cookie = self.session_cookie()
        for page in (secret_repo, secret_manifest):
            self.visit(page)
            self.wait(self.error_box, f"the error on {page}")
            self.assertEqual(self.error_box(), "Not found, or you may not see it.")
            self.assertEqual(self.one("#main").text, "", page)
            self.assertFalse(self.all("#tags, #summary, #layers"), page)
        self.visit("#/?q=secret")
        self.wait(lambda: self.shown("#main p.note"), "bob's empty search")
        self.assertFalse(self.all("#repositories tr.repository"))
        self.visit("#/namespaces")
        self.wait(lambda: self.all("#namespaces tr.namespace"), "bob's namespaces")
        self.assertEqual({tr.get_attribute("data-namespace") for tr in self.all("#namespaces tr.namespace")},
                         {"public", "bob"})

        # The JSON views: 404 for bob (Basic or his session), 200 for alice.
        views = ("repository?name=alice/secret-app", "manifest?name=alice/secret-app&reference=v1",
                 "retention?name=alice/secret-app")
        for view in views:
            for who, headers in (("bob", auth("bob")), ("bob's session", {"Cookie": f"berth_session={bob_cookie['value']}"})):
                status, _, body = http_get(f"{self.base}/ui/api/{view}", headers)
                self.assertEqual(status, 404, (view, who, body))
                self.assertEqual(json.loads(body)["errors"][0]["code"], "NAME_UNKNOWN", (view, who))
            status, _, body = http_get(f"{self.base}/ui/api/{view}", auth("alice"))
            self.assertEqual(status, 200, (view, body))
        status, _, body = http_get(f"{self.base}/ui/api/repositories?q=secret", auth("bob"))
        self.assertEqual((status, json.loads(body)["repositories"]), (200, []))
        # The console log is read at all: the refusals above are in it.
        refused = [e["message"] for e in self.driver.get_log("browser") if "Failed to load resource" in e["message"]]
        self.assertTrue(any("404" in m and "/ui/api/repository?name=alice%2Fsecret-app" in m for m in refused), refused)
        self.sign_out()

        # Anonymous: public/** only, the sign-in link everywhere.
        self.clear_cookies()
        self.visit("")
        self.assertEqual(self.listed_repositories(), PUBLIC)
        # Each page with what shows it loaded, and the view it reads: where that view says 401 to
        # anonymous callers (a server may keep mirrors and cluster to those signed in), the
        # page must say "sign in" instead.
        pages = (("", "#repositories", "repositories"),
                 ("#/repository/public%2Fapp-frontend", "#tags", "repository?name=public/app-frontend"),
                 ("#/manifest/public%2Fapp-frontend/v2", "#summary",
                  "manifest?name=public/app-frontend&reference=v2"),
                 ("#/mirrors", "#mirrors", "mirrors"), ("#/namespaces", "#namespaces", "namespaces"),
                 ("#/retention", "#retention-form", None),
                 ("#/retention/public%2Fapp-frontend", "#deletions", "retention?name=public/app-frontend"),
                 ("#/cluster", "#replicas", "cluster"))
        for page, ready, view in pages:
            status = http_get(f"{self.base}/ui/api/{view}")[0] if view else 200
            self.assertIn(status, (200, 401), (view, status))
            self.visit(page)
            if status == 200:
                self.wait(lambda: self.all(ready), f"{ready} on {page or '#/'} for anonymous")
                self.assertIsNone(self.error_box(), page)
            else:
                self.wait(self.error_box, f"the sign-in prompt on {page} for anonymous")
                self.assertEqual(self.error_box(), "Sign in to see this. Sign in", page)
                self.assertFalse(self.all(ready), page)
            link = self.shown("#login-link")
            self.assertIsNotNone(link, f"no sign-in link on {page}")
            self.assertEqual(link.get_attribute("href"), f"{self.base}/ui/login")
            self.assertFalse(self.all("#user"), page)
        self.visit("#/namespaces")
        namespaces = self.wait(lambda: self.all("#namespaces tr.namespace"), "anonymous namespaces")
        self.assertEqual({tr.get_attribute("data-namespace") for tr in namespaces}, {"public"})
        for page in (secret_repo, secret_manifest):
            self.visit(page)
            self.wait(self.error_box, f"the error on {page} for anonymous")
            self.assertEqual(self.error_box(), "Sign in to see this. Sign in")
            self.assertEqual(self.one("#error a.error-login").get_attribute("href"), f"{self.base}/ui/login")
            self.assertEqual(self.one("#main").text, "", page)
        status, _, _ = http_get(f"{self.base}/ui/api/repository?name=alice/secret-app")
        self.assertEqual(status, 401)
        self.assertCleanConsole()

    # ---- 6. hostile content

    def test_06_hostile_content(self):
        self.sign_in("alice")
        expected = {
            "v1": [HOSTILE_IMG, HOSTILE_SCRIPT, HOSTILE_URL, f"HOSTILE={HOSTILE_SCRIPT}"],
            "keys": [HOSTILE_IMG, HOSTILE_SCRIPT, HOSTILE_URL, "annotation key", "label key"],
        }
        for tag, strings in expected.items():
            with self.subTest(tag=tag):
                self.visit(f"#/manifest/public%2Fhostile/{tag}")
                self.wait(lambda: self.all("#annotations") and self.all("#labels"), "annotations and labels")
                text = self.one("#main").text
                for s in strings:
                    self.assertIn(s, text)
                annotations = {self.one("th", tr).text: self.one("td", tr).text
                               for tr in self.all("#annotations tbody tr")}
                self.assertEqual(annotations["org.example.img"], HOSTILE_IMG)
                self.assertEqual(annotations["org.example.script"], HOSTILE_SCRIPT)
                self.assertEqual(annotations["org.example.link"], HOSTILE_URL)
                labels = {self.one("th", tr).text: self.one("td", tr).text for tr in self.all("#labels tbody tr")}
                self.assertEqual(labels["org.example.url"], HOSTILE_URL)
                if tag == "keys":
                    self.assertEqual(annotations[HOSTILE_IMG], "annotation key")
                    self.assertEqual(annotations[HOSTILE_SCRIPT], "annotation key")
                    self.assertEqual(annotations[HOSTILE_URL], HOSTILE_URL)
                    self.assertEqual(labels[HOSTILE_IMG], "label key")
                else:
                    self.assertIn(HOSTILE_IMG, self.one("#history").text)
                    referrer = self.one("#referrers tr.referrer").text
                    self.assertIn(f"{HOSTILE_IMG}: {HOSTILE_URL}", referrer)
                    self.assertIn(f"org.example.link: {HOSTILE_SCRIPT}", referrer)
                # The raw manifest is text too: its bytes as pushed (buildah's Go encoder wrote
                # < and > as \u003c and \u003e, Python's json.dumps left them as they are).
                self.one("#raw summary").click()
                self.wait(lambda: self.one("#raw pre.raw").is_displayed(), "the raw manifest")
                raw = self.one("#raw pre.raw").text
                self.assertEqual(json.loads(raw), self.get_manifest("public/hostile", tag)[2])
                self.assertIn(HOSTILE_SCRIPT if tag == "keys" else "\\u003c/script\\u003e\\u003cscript\\u003e", raw)
                self.assertEqual(self.all('img[src="x"]'), [])
                self.assertEqual(self.all("img"), [])
                self.assertEqual(self.all('a[href^="javascript:"]'), [])
                self.assertEqual(self.all("[onerror]"), [])
                self.assertEqual([s.get_attribute("src") for s in self.all("script")], [f"{self.base}/ui/app.js"])
                self.assertIsNone(self.driver.execute_script("return window.__pwned"))
                if tag == "keys":
                    screenshot(self.driver, "manifest-hostile", full=True)
        self.assertCleanConsole()

        for path in ("/ui/", "/ui/login", "/ui/app.js", "/ui/api/manifest?name=public/hostile&reference=v1",
                     "/ui/api/repositories"):
            with self.subTest(path=path):
                status, headers, body = http_get(self.base + path, auth("alice"))
                self.assertEqual(status, 200, body[:300])
                csp = headers.get("Content-Security-Policy") or ""
                self.assertIn("script-src 'self'", csp)
                self.assertIn("frame-ancestors 'none'", csp)
                self.assertNotIn("unsafe-inline", csp)
                self.assertEqual(headers.get("X-Content-Type-Options"), "nosniff")
                if "/api/" in path:
                    self.assertTrue(headers.get("Content-Type", "").startswith("application/json"), headers)
        status, _, body = http_get(f"{self.base}/ui/api/manifest?name=public/hostile&reference=keys", auth("alice"))
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body)["annotations"][HOSTILE_IMG], "annotation key")

    # ---- 7. behind a path prefix

    def test_07_behind_a_path_prefix(self):
        proxy = PrefixProxy("/registry", self.b.port)
        self.addCleanup(proxy.stop)
        base = f"http://127.0.0.1:{proxy.port}/registry"
        self.sign_in("alice", base=base)
        self.assertEqual(self.driver.current_url, f"{base}/ui/")
        cookie = self.session_cookie()
        self.assertIsNotNone(cookie)
        self.assertEqual(cookie["path"], "/registry/ui")
        self.assertIn("public/app-backend", self.listed_repositories())
        self.one('#repositories a.repository-link[href="#/repository/public%2Fapp-backend"]').click()
        self.wait(lambda: self.all('#tags tr.tag[data-tag="v1"]'), "the repository through the proxy")
        self.assertEqual(self.heading(), "public/app-backend")
        self.one('#tags tr.tag[data-tag="v1"] a.tag-link').click()
        self.wait(lambda: self.all("#layers tr.layer"), "the manifest through the proxy")
        # The stylesheet applied, every resource and API call under the prefix, none failed.
        self.assertGreater(self.driver.execute_script(
            "return [...document.styleSheets].reduce((n, s) => n + s.cssRules.length, 0)"), 10)
        resources = self.driver.execute_script("return performance.getEntriesByType('resource').map((e) => e.name)")
        self.assertTrue(any(r.endswith("/ui/pages/manifest.js") for r in resources), resources)
        self.assertTrue(any("/ui/api/manifest?" in r for r in resources), resources)
        self.assertEqual([r for r in resources if not r.startswith(f"{base}/ui/")], [])
        paths = [path for _, path, _ in proxy.seen]
        self.assertIn("/registry/ui/style.css", paths)
        # who is signed in, the repositories, a repository, a manifest: four views through the proxy
        self.assertGreaterEqual(len({p.split("?")[0] for p in paths if p.startswith("/registry/ui/api/")}), 4, paths)
        self.assertEqual([s for s in proxy.seen if not s[1].startswith("/registry/ui/") or s[2] >= 400], [])
        self.assertEqual([s[2] for s in proxy.seen if s[0] == "POST"], [303])
        self.sign_out()
        self.assertEqual(self.driver.current_url, f"{base}/ui/")
        self.assertCleanConsole()

    # ---- 9. mirrors, namespaces, retention

    def test_09_mirrors_namespaces_retention(self):
        self.sign_in("alice")
        # A pull through the mirror fails (its upstream is down) and marks it unreachable.
        status, _, _ = http_get(f"{self.base}/v2/mirror.invalid/library/x/manifests/1", auth("alice"))
        self.assertEqual(status, 404)
        self.visit("#/mirrors")
        self.wait(lambda: self.all('#mirrors tr.mirror[data-host="mirror.invalid"]'), "the mirror")
        row = self.one('#mirrors tr.mirror[data-host="mirror.invalid"]')
        self.assertEqual(self.one("td.url", row).text, DEAD_UPSTREAM)
        self.assertIn("unreachable", self.one("td.reachable", row).text)
        self.assertIn("127.0.0.1:9", self.one("td.reachable .last-error", row).text)
        self.assertGreaterEqual(int(self.one("td.errors", row).text), 1)
        screenshot(self.driver, "mirrors")

        self.visit("#/namespaces")
        self.wait(lambda: self.all("#namespaces tr.namespace"), "the namespaces")
        rows = {tr.get_attribute("data-namespace"): tr for tr in self.all("#namespaces tr.namespace")}
        self.assertEqual(set(rows), {"public", "alice"})
        status, _, body = http_get(f"{self.base}/ui/api/namespaces", auth("alice"))
        used = {n["namespace"]: n["used_bytes"] for n in json.loads(body)["namespaces"]}
        for ns, tr in rows.items():
            self.assertEqual(int(self.one("td.size", tr).get_attribute("data-bytes")), used[ns])
        self.assertGreater(used["public"], 0)
        self.assertEqual(int(self.one("td.quota .size", rows["public"]).get_attribute("data-bytes")), QUOTA)
        self.assertEqual(self.one("td.quota", rows["alice"]).text, "—")
        self.assertIn("no quota", self.one("td.usage-cell", rows["alice"]).text)
        screenshot(self.driver, "namespaces")

        self.visit("#/retention")
        self.wait(lambda: self.all("#retention-repository"), "the retention form")
        self.one("#retention-repository").send_keys("public/app-frontend")
        self.one("#retention-form button[type=submit]").click()
        self.wait(lambda: self.all("#deletions tr.deletion"), "the retention dry run")
        self.assertEqual(hash_of(self.driver.current_url), "/retention/public/app-frontend")
        self.assertEqual(self.one("#policy").text, "apps")
        deletions = [(self.one("td.kind", tr).text, self.one("td.reference", tr).text)
                     for tr in self.all("#deletions tr.deletion")]
        self.assertIn(("tag", "v1"), deletions)
        self.assertNotIn(("tag", "v2"), deletions)
        screenshot(self.driver, "retention")
        # A dry run: v1 is still there.
        status, _, body = http_get(f"{self.base}/v2/public/app-frontend/tags/list", auth("alice"))
        self.assertEqual(sorted(json.loads(body)["tags"]), ["v1", "v2"])
        self.visit("#/retention/public%2Fapp-backend")
        self.wait(lambda: self.all("#no-deletions"), "nothing to delete in app-backend")
        self.visit("#/retention/public%2Fhostile")
        self.wait(lambda: self.all("#no-policy"), "no policy for public/hostile")
        self.assertCleanConsole()


if __name__ == "__main__":
    unittest.main(verbosity=2)
