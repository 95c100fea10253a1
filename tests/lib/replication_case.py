"""The harness of the replication fault tests (tests/fault/test_replication*.py): three real berth
replicas (separate temp roots, free loopback ports, peered with each other) per test, random images
from a seeded generator, and what a replica must serve.

BERTH_REPL_SEED fixes the seed (printed with the replicas' logs when a test fails; BERTH_KEEP=1
prints them for every test). Synchronisation is by polling (/readyz, /_berth/v1/status, the
registry API) with bounded timeouts, never by fixed sleeps. Standard library only.
"""

import json
import os
import random
import sys
import time
import unittest

import berthtest as bt

SEED = int(os.environ.get("BERTH_REPL_SEED", str(random.randrange(1 << 30))))
CONVERGE = 20  # seconds any convergence may take (poll interval is 100 ms)
ACCEPT = ", ".join([bt.OCI_MANIFEST, "application/vnd.docker.distribution.manifest.v2+json"])


def image(rng, layer_sizes, note=""):
    """A random image (deterministic from rng): config + layers + manifest."""
    config = json.dumps({"architecture": "amd64", "os": "linux", "note": note, "nonce": rng.getrandbits(64),
                         "rootfs": {"type": "layers", "diff_ids": []}}).encode()
    layers = [rng.randbytes(n) for n in layer_sizes]
    blobs = {bt.sha256_digest(config): config}
    for layer in layers:
        blobs[bt.sha256_digest(layer)] = layer
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": bt.OCI_MANIFEST,
        "config": {"mediaType": bt.OCI_CONFIG, "digest": bt.sha256_digest(config), "size": len(config)},
        "layers": [{"mediaType": bt.OCI_LAYER, "digest": bt.sha256_digest(x), "size": len(x)} for x in layers],
    }).encode()
    return {"blobs": blobs, "manifest": manifest, "digest": bt.sha256_digest(manifest)}


def push(replica, repo, tag, img):
    """Push blobs + manifest by tag through one replica; returns the manifest PUT response."""
    for data in img["blobs"].values():
        replica.push_blob(repo, data)
    return replica.put_manifest(repo, tag, img["manifest"])


def push_ok(testcase, replica, repo, tag, img):
    r = push(replica, repo, tag, img)
    testcase.assertEqual(r.status, 201, f"PUT {repo}:{tag} on {replica.replica_id}: {r}")
    testcase.assertEqual(r.header("Docker-Content-Digest"), img["digest"])
    return r


def tag_map(replica, repo):
    """{tag: digest} of a repository as one replica serves it (tags/list + HEAD of each tag)."""
    r = replica.get(f"/v2/{repo}/tags/list?n=10000")
    if r.status == 404:
        return {}
    if r.status != 200:
        raise AssertionError(f"tags/list {repo} on {replica.replica_id}: {r}")
    out = {}
    for tag in r.json().get("tags") or []:
        h = replica.head(f"/v2/{repo}/manifests/{tag}", headers={"Accept": ACCEPT})
        out[tag] = h.header("Docker-Content-Digest") if h.status == 200 else f"HTTP {h.status}"
    return out


class ReplicationTestCase(unittest.TestCase):
    write_quorum = "quorum"

    def setUp(self):
        self.rng = random.Random(SEED ^ hash(self.id()) & 0xFFFFFFFF)
        self.cluster = bt.Cluster(3, write_quorum=self.write_quorum)
        self.addCleanup(self.cluster.cleanup)
        self.addCleanup(self.print_logs_on_failure)
        self.started = time.monotonic()

    def print_logs_on_failure(self):
        if bt.failed(self) or os.environ.get("BERTH_KEEP"):
            print(f"\n(BERTH_REPL_SEED={SEED})\n{self.cluster.dump_logs()}", file=sys.stderr)

    def expect_served(self, replica, repo, tag, img, where=""):
        """Manifest by tag and by digest, and every blob, byte-identical on this replica."""
        who = f"{replica.replica_id} {repo}:{tag} {where} (seed {SEED})"
        r = replica.get(f"/v2/{repo}/manifests/{tag}", headers={"Accept": ACCEPT})
        self.assertEqual(r.status, 200, f"tag not served by {who}: {r}")
        self.assertEqual(r.header("Docker-Content-Digest"), img["digest"], f"tag digest on {who}")
        self.assertEqual(r.body, img["manifest"], f"manifest bytes by tag on {who}")
        r = replica.get(f"/v2/{repo}/manifests/{img['digest']}", headers={"Accept": ACCEPT})
        self.assertEqual(r.status, 200, f"manifest by digest not served by {who}: {r}")
        self.assertEqual(r.body, img["manifest"], f"manifest bytes by digest on {who}")
        for digest, data in img["blobs"].items():
            b = replica.get(f"/v2/{repo}/blobs/{digest}")
            self.assertEqual(b.status, 200, f"blob {digest} not served by {who}: {b}")
            self.assertEqual(bt.sha256_digest(b.body), digest, f"blob {digest} corrupt on {who}")
            self.assertEqual(b.body, data, f"blob {digest} bytes on {who}")
