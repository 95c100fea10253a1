"""What the proxy tests (tests/integration/test_proxy*.py) share: ProxyTestCase pulls an image through
berth (manifest and every blob) and compares it with what was pushed upstream.

Standard library only.
"""

import json
import unittest

import berthtest as bt

ACCEPT = ", ".join([bt.OCI_MANIFEST, "application/vnd.oci.image.index.v1+json",
                    "application/vnd.docker.distribution.manifest.v2+json",
                    "application/vnd.docker.distribution.manifest.list.v2+json"])


class ProxyTestCase(unittest.TestCase):
    def pull(self, b, repo, ref, query="", img=None, expect_ns=None, what=""):
        """GET manifest + every blob through berth; compare with img; returns the manifest Resp."""
        who = f"{what} {repo}:{ref}{query}"
        r = b.get(f"/v2/{repo}/manifests/{ref}{query}", headers={"Accept": ACCEPT})
        self.assertEqual(r.status, 200, f"manifest {who}: {r}")
        if img is not None:
            self.assertEqual(r.body, img["manifest"], f"manifest bytes {who}")
            self.assertEqual(r.header("Docker-Content-Digest"), img["digest"], f"digest {who}")
        if expect_ns is not None:
            self.assertEqual(r.header("OCI-Namespace"), expect_ns, f"OCI-Namespace of manifest {who}")
        doc = json.loads(r.body)
        for desc in [doc["config"], *doc["layers"]]:
            blob = b.get(f"/v2/{repo}/blobs/{desc['digest']}{query}")
            self.assertEqual(blob.status, 200, f"blob {desc['digest']} {who}: {blob}")
            self.assertEqual(bt.sha256_digest(blob.body), desc["digest"], f"blob bytes {who}")
            if img is not None:
                self.assertEqual(blob.body, img["blobs"][desc["digest"]])
            if expect_ns is not None:
                self.assertEqual(blob.header("OCI-Namespace"), expect_ns, f"OCI-Namespace of blob {who}")
        return r

    def assertError(self, r, status, code, what=""):
        self.assertEqual(r.status, status, f"{what}: {r}")
        self.assertEqual(r.error_codes(), [code], f"{what}: {r}")
