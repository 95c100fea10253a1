"""The web UI's JSON API (/ui/api/) as its tests call it: UiCase asks a view as anonymous, as a user
(Basic credentials) or with a session cookie and checks the headers every UI answer carries;
the users (PASSWORDS, auth), the session cookie of an answer (cookie_of, flip) and the manifests
and configs those tests push.

Standard library only. Used by tests/integration/test_ui_api*.py.
"""

import json
import os
import unittest
import urllib.parse

import berthtest as bt

FORM = {"Content-Type": "application/x-www-form-urlencoded"}
# The session view's name and the key of media types in the views' JSON, as the binary under test
# has them (the brief and HEAD d299040); one place to change should they be renamed.
SESSION_VIEW = "whoami"
MEDIA_TYPE = "mediaType"

PASSWORDS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "b0b pw&+=%"}


def auth(user):
    return bt.basic_auth(user, PASSWORDS[user])


def manifest_of(config, layers, media_types=None, annotations=None, subject=None, artifact_type=None,
                config_type=bt.OCI_CONFIG):
    doc = {"schemaVersion": 2, "mediaType": bt.OCI_MANIFEST}
    if artifact_type:
        doc["artifactType"] = artifact_type
    doc["config"] = {"mediaType": config_type, "digest": bt.sha256_digest(config), "size": len(config)}
    doc["layers"] = [{"mediaType": (media_types or {}).get(i, bt.OCI_LAYER), "digest": bt.sha256_digest(x),
                      "size": len(x)} for i, x in enumerate(layers)]
    if subject:
        doc["subject"] = subject
    if annotations:
        doc["annotations"] = annotations
    return json.dumps(doc).encode()


def config_of(arch="amd64", **extra):
    doc = {"architecture": arch, "os": "linux", "nonce": os.urandom(8).hex(),
           "rootfs": {"type": "layers", "diff_ids": []}}
    doc.update(extra)
    return json.dumps(doc).encode()


def cookie_of(resp):
    """(value, attributes) of the berth_session Set-Cookie of an answer, or None."""
    header = resp.header("Set-Cookie")
    if header is None:
        return None
    first, *attributes = [part.strip() for part in header.split(";")]
    name, _, value = first.partition("=")
    if name != "berth_session":
        return None
    return value, attributes


def flip(text, index):
    """text with the base64url character at index changed to another one."""
    c = text[index]
    return text[:index] + ("A" if c != "A" else "B") + text[index + 1:]


class UiCase(unittest.TestCase):
    """API calls as anonymous, as a user (Basic) or with a session cookie."""

    b = None

    @classmethod
    def headers_of(cls, who=None, cookie=None):
        h = {}
        if who:
            h.update(auth(who))
        if cookie:
            h["Cookie"] = cookie if "=" in cookie else f"berth_session={cookie}"
        return h

    @classmethod
    def api(cls, view, who=None, cookie=None, method="GET", **params):
        path = f"/ui/api/{view}"
        if params:
            path += "?" + urllib.parse.urlencode(params, quote_via=urllib.parse.quote)
        return cls.b.request(method, path, headers=cls.headers_of(who, cookie))

    def ok(self, view, who=None, cookie=None, **params):
        r = self.api(view, who, cookie, **params)
        self.assertEqual(r.status, 200, f"{view} {params} as {who}: {r}")
        self.assertEqual(r.header("Content-Type"), "application/json", view)
        self.assertUiHeaders(r, api=True)
        doc = r.json()
        self.assertIsInstance(doc, dict, r)
        return doc

    def assertError(self, r, status, code, what=""):
        self.assertEqual(r.status, status, f"{what}: {r}")
        self.assertEqual(r.error_codes(), [code], f"{what}: {r}")

    def assertUiHeaders(self, r, api=False, what=""):
        csp = r.header("Content-Security-Policy") or ""
        directives = {d.strip().split(" ", 1)[0]: d.strip() for d in csp.split(";") if d.strip()}
        self.assertEqual(directives.get("script-src"), "script-src 'self'", f"{what}: CSP {csp!r}")
        self.assertEqual(directives.get("frame-ancestors"), "frame-ancestors 'none'", f"{what}: CSP {csp!r}")
        self.assertNotIn("unsafe-inline", csp, what)
        self.assertNotIn("unsafe-eval", csp, what)
        self.assertEqual(r.header("X-Content-Type-Options"), "nosniff", what)
        self.assertEqual(r.header("X-Frame-Options"), "DENY", what)
        if api:
            self.assertEqual(r.header("Cache-Control"), "no-store", what)

    def all_repositories(self, who=None, cookie=None, n=50, **params):
        """Every page of /ui/api/repositories, following next; returns (entries, pages)."""
        entries, pages, last = [], 0, None
        while True:
            query = dict(params, n=n)
            if last is not None:
                query["last"] = last
            doc = self.ok("repositories", who, cookie, **query)
            pages += 1
            self.assertLessEqual(len(doc["repositories"]), n, doc)
            entries += doc["repositories"]
            if doc["next"] is None:
                return entries, pages
            self.assertNotEqual(doc["next"], last, "next did not move on")
            last = doc["next"]
            self.assertLess(pages, 100, "paging does not end")

    def names(self, who=None, cookie=None, **params):
        entries, _ = self.all_repositories(who, cookie, **params)
        return [e["name"] for e in entries]
