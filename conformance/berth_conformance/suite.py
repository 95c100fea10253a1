"""The Suite: one run's repositories, fixtures, state between checks, and request helpers."""

import http.client

from .checklist import FIXTURES
from .client import OCTET, location, manifests, uploads
from .content import rand_name
from .expect import Failure, Skipped, expect, expect_status


class Suite:
    def __init__(self, client, namespace, crossmount, sparse=False, ro=None):
        self.client = client
        self.run_id = rand_name(8)
        self.namespace = namespace
        self.crossmount = crossmount or self.repo("mount")
        self.sparse = sparse  # --sparse: the registry is expected to accept sparse manifests
        self.ro = ro          # --ro-*: content a read-only registry was preloaded with
        self.state = {}
        self._fixtures = {}

    def repo(self, suffix):
        return f"{self.namespace}/{self.run_id}-{suffix}"

    def need(self, fixture_func):
        """Result of a fixture, computed on first use; a failed fixture fails every user."""
        assert fixture_func in FIXTURES
        if fixture_func not in self._fixtures:
            try:
                self._fixtures[fixture_func] = (fixture_func(self), None)
            except (Failure, Skipped, OSError, http.client.HTTPException) as err:
                self._fixtures[fixture_func] = (None, err)
        value, err = self._fixtures[fixture_func]
        if err:
            raise Failure(f"setup {fixture_func.__name__} failed: {err}")
        return value

    def requires(self, key):
        """State left by an earlier check of the same flow."""
        if key not in self.state:
            raise Skipped(f"the earlier step that produces '{key}' did not succeed")
        return self.state[key]

    def request(self, method, target, body=None, headers=None, params=None, chunked=False):
        return self.client.request(method, target, body=body, headers=headers, params=params, chunked=chunked)

    def get(self, target, **kw):
        return self.request("GET", target, **kw)

    def head(self, target, **kw):
        return self.request("HEAD", target, **kw)

    def delete(self, target, **kw):
        return self.request("DELETE", target, **kw)

    def start_upload(self, repo, params=None):
        return self.request("POST", uploads(repo), headers={"Content-Length": "0"}, params=params)

    def put_blob(self, upload_url, blob, body=None, headers=None):
        """Close an upload session with ?digest=; `body` defaults to the whole blob."""
        return self.request("PUT", upload_url, body=blob.data if body is None else body,
                            headers={**OCTET, **(headers or {})}, params={"digest": blob.digest})

    def patch(self, upload_url, chunk, start=None):
        headers = dict(OCTET)
        if start is not None:
            headers["Content-Range"] = f"{start}-{start + len(chunk) - 1}"
        return self.request("PATCH", upload_url, body=chunk, headers=headers)

    def upload_blob(self, repo, blob):
        """POST then PUT; fails unless the blob was stored (201)."""
        resp = self.start_upload(repo)
        expect_status(resp, 202)
        resp = self.put_blob(location(resp), blob)
        expect_status(resp, 201)
        return resp

    def put_manifest(self, repo, ref, manifest, params=None, content_type=None, chunked=False):
        return self.request("PUT", manifests(repo, ref), body=manifest.data, params=params, chunked=chunked,
                            headers={"Content-Type": content_type or manifest.media_type})

    def push_manifest(self, repo, ref, manifest, **kw):
        resp = self.put_manifest(repo, ref, manifest, **kw)
        expect_status(resp, 201)
        return resp

    def push_image(self, repo, image, *refs):
        for blob in image.blobs:
            self.upload_blob(repo, blob)
        for ref in refs or (image.manifest.digest,):
            self.push_manifest(repo, ref, image.manifest)

    def tags(self, repo, **params):
        resp = self.get(f"/v2/{repo}/tags/list", params=params or None)
        expect_status(resp, 200)
        doc = resp.json()
        expect(isinstance(doc, dict) and isinstance(doc.get("tags", []), list),
               f"tags list body is not {{'name', 'tags'}}: {resp.snippet()!r}")
        return resp, doc.get("tags") or []

    def referrers(self, repo, digest, **params):
        resp = self.get(f"/v2/{repo}/referrers/{digest}", params=params or None)
        expect_status(resp, 200)
        doc = resp.json()
        expect(isinstance(doc, dict) and isinstance(doc.get("manifests"), list),
               f"referrers body is not an image index: {resp.snippet()!r}")
        return resp, doc["manifests"]
