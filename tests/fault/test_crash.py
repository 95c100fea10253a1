#!/usr/bin/env python3
"""Crash test: SIGKILL berth while concurrent clients push images, restart it on the same root,
and check that everything it acknowledged (201) survived intact and that the store is consistent.

Three kill cycles in one test; the acknowledgements accumulate, so each restart re-checks
everything acknowledged before any of the kills.
"""

import http.client
import json
import os
import random
import signal
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402

PUSHERS = 6
CYCLES = 3
SEED = int(os.environ.get("BERTH_CRASH_SEED", str(random.randrange(1 << 30))))


def blob_size(rng):
    """1 KiB .. 2 MiB, log-uniform: mostly small, some large."""
    return int(2 ** rng.uniform(10, 21))


class Ledger:
    """What berth acknowledged, shared by the pusher threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.blobs = {}  # (repo, digest) -> size
        self.manifests = {}  # (repo, digest) -> manifest bytes
        self.tags = {}  # (repo, tag) -> digest; each tag is pushed once, so it must still point there
        self.repos = set()
        self.errors = []  # unexpected responses while berth was up

    def count(self):
        with self.lock:
            return len(self.manifests)


class Pusher(threading.Thread):
    def __init__(self, berth, ledger, index, cycle, killing, rng):
        super().__init__(daemon=True)
        self.berth, self.ledger, self.index, self.cycle, self.killing, self.rng = (
            berth, ledger, index, cycle, killing, rng)
        self.repo = f"crash/pusher{index}"

    def run(self):
        n = 0
        while not self.killing.is_set():
            try:
                self.push_one(n)
            except (OSError, ConnectionError, AssertionError, http.client.HTTPException) as err:
                if not self.killing.is_set():
                    with self.ledger.lock:
                        self.ledger.errors.append(f"{self.repo}: {err!r}")
                return  # berth is gone (killed): stop
            n += 1

    def push_one(self, n):
        b, rng, ledger = self.berth, self.rng, self.ledger
        layers = [rng.randbytes(blob_size(rng)) for _ in range(rng.randint(1, 3))]
        config = json.dumps({"architecture": "amd64", "os": "linux", "pusher": self.index, "n": n,
                             "cycle": self.cycle, "nonce": rng.getrandbits(64),
                             "rootfs": {"type": "layers", "diff_ids": []}}).encode()
        for data in [config, *layers]:
            digest = self.push_blob(data)
            with ledger.lock:
                ledger.blobs[(self.repo, digest)] = len(data)
        manifest = json.dumps({
            "schemaVersion": 2, "mediaType": bt.OCI_MANIFEST,
            "config": {"mediaType": bt.OCI_CONFIG, "digest": bt.sha256_digest(config), "size": len(config)},
            "layers": [{"mediaType": bt.OCI_LAYER, "digest": bt.sha256_digest(x), "size": len(x)} for x in layers],
        }).encode()
        tag = f"c{self.cycle}-n{n}"
        r = b.put_manifest(self.repo, tag, manifest)
        if r.status != 201:
            raise AssertionError(f"PUT manifest {tag}: {r!r}")
        digest = r.header("Docker-Content-Digest")
        if digest != bt.sha256_digest(manifest):
            raise AssertionError(f"PUT manifest {tag}: Docker-Content-Digest {digest}")
        with ledger.lock:
            ledger.manifests[(self.repo, digest)] = manifest
            ledger.tags[(self.repo, tag)] = digest
            ledger.repos.add(self.repo)
        # A moving tag too: after the crash it must resolve to some complete manifest.
        r = b.put_manifest(self.repo, "latest", manifest)
        if r.status != 201:
            raise AssertionError(f"PUT manifest latest: {r!r}")

    def push_blob(self, data):
        b, rng = self.berth, self.rng
        digest = bt.sha256_digest(data)
        loc = b.upload_location(self.repo)
        if rng.random() < 0.5 or len(data) < 4096:  # monolithic
            r = b.request("PUT", bt.with_query(loc, digest=digest), body=data,
                          headers={"Content-Type": "application/octet-stream"})
        else:  # two chunks, then a PUT with no body
            cut = len(data) // 2
            r = b.request("PATCH", loc, body=data[:cut], headers={"Content-Range": f"0-{cut - 1}"})
            if r.status != 202:
                raise AssertionError(f"PATCH: {r!r}")
            r = b.request("PATCH", bt.location_path(r.header("Location")), body=data[cut:],
                          headers={"Content-Range": f"{cut}-{len(data) - 1}"})
            if r.status != 202:
                raise AssertionError(f"PATCH: {r!r}")
            r = b.request("PUT", bt.with_query(bt.location_path(r.header("Location")), digest=digest),
                          headers={"Content-Length": "0"})
        if r.status != 201:
            raise AssertionError(f"PUT blob {digest}: {r!r}")
        return digest


class CrashTest(unittest.TestCase):
    def setUp(self):
        self.b = bt.Berth()
        self.addCleanup(self.b.cleanup)

    def test_kill_during_pushes(self):
        rng = random.Random(SEED)
        b, ledger = self.b, Ledger()
        b.start()
        started = time.monotonic()
        for cycle in range(CYCLES):
            killing = threading.Event()
            threads = [Pusher(b, ledger, i, cycle, killing, random.Random(rng.getrandbits(64)))
                       for i in range(PUSHERS)]
            for t in threads:
                t.start()
            # Kill at a random moment once some new pushes are acknowledged.
            target = ledger.count() + rng.randint(5, 25)
            bt.poll(lambda: ledger.count() >= target or not b.alive(), 30, 0.01,
                    f"{target} acknowledged pushes (seed {SEED})")
            time.sleep(rng.uniform(0, 0.3))  # land the kill at an arbitrary point of some request
            killing.set()  # from here on, failed requests are expected
            b.proc.send_signal(signal.SIGKILL)
            b.wait(10)
            for t in threads:
                t.join(30)
                self.assertFalse(t.is_alive(), "a pusher thread hung")
            self.assertEqual(ledger.errors, [], f"pushes failed while berth was up (seed {SEED})")
            self.assertEqual(b.proc.returncode, -signal.SIGKILL, f"berth exited before the kill: {b.stderr()[-2000:]}")

            b.restart()
            self.verify(ledger, cycle)
            print(f"  kill {cycle + 1}: {len(ledger.manifests)} manifests, {len(ledger.blobs)} blobs acknowledged; "
                  f"{len(os.listdir(os.path.join(b.root, 'uploads')))} upload sessions left open "
                  f"(BERTH_CRASH_SEED={SEED})", file=sys.stderr)
        self.assertEqual(b.stop(), 0)
        self.assertLess(time.monotonic() - started, 90)

    def verify(self, ledger, cycle):
        b = self.b
        where = f"after kill {cycle + 1} (BERTH_CRASH_SEED={SEED})"
        # Every acknowledged blob is served byte-identical.
        for (repo, digest), size in sorted(ledger.blobs.items()):
            r = b.get(f"/v2/{repo}/blobs/{digest}")
            self.assertEqual(r.status, 200, f"acknowledged blob {repo}@{digest} lost {where}")
            self.assertEqual(len(r.body), size, f"blob {digest} size {where}")
            self.assertEqual(bt.sha256_digest(r.body), digest, f"blob {digest} corrupt {where}")
        # Every acknowledged manifest is served by digest, byte-identical; every acknowledged tag
        # still points at it.
        for (repo, digest), manifest in sorted(ledger.manifests.items()):
            r = b.get(f"/v2/{repo}/manifests/{digest}", headers={"Accept": bt.OCI_MANIFEST})
            self.assertEqual(r.status, 200, f"acknowledged manifest {repo}@{digest} lost {where}")
            self.assertEqual(r.body, manifest, f"manifest {digest} differs {where}")
        for (repo, tag), digest in sorted(ledger.tags.items()):
            r = b.get(f"/v2/{repo}/manifests/{tag}", headers={"Accept": bt.OCI_MANIFEST})
            self.assertEqual(r.status, 200, f"acknowledged tag {repo}:{tag} lost {where}")
            self.assertEqual(r.header("Docker-Content-Digest"), digest, f"tag {repo}:{tag} moved {where}")
            self.assertEqual(bt.sha256_digest(r.body), digest, f"tag {repo}:{tag} body {where}")
        # Every served manifest (every tag in every repository, including ones pushed but not
        # acknowledged before the kill) resolves, and every blob it references exists.
        r = b.get("/v2/_catalog?n=100000")
        self.assertEqual(r.status, 200)
        repos = set(r.json()["repositories"])
        self.assertTrue(ledger.repos <= repos, f"repositories missing from the catalog {where}")
        checked = 0
        for repo in sorted(repos):
            r = b.get(f"/v2/{repo}/tags/list?n=100000")
            self.assertEqual(r.status, 200, f"tags of {repo} {where}")
            for tag in r.json()["tags"] or []:
                r = b.get(f"/v2/{repo}/manifests/{tag}", headers={"Accept": bt.OCI_MANIFEST})
                self.assertEqual(r.status, 200, f"listed tag {repo}:{tag} does not resolve {where}")
                self.assertEqual(bt.sha256_digest(r.body), r.header("Docker-Content-Digest"),
                                 f"{repo}:{tag} body does not match its digest {where}")
                doc = json.loads(r.body)
                for desc in [doc["config"], *doc["layers"]]:
                    h = b.head(f"/v2/{repo}/blobs/{desc['digest']}")
                    self.assertEqual(h.status, 200, f"{repo}:{tag} references missing blob {desc['digest']} {where}")
                    self.assertEqual(h.header("Content-Length"), str(desc["size"]), f"{desc['digest']} {where}")
                    checked += 1
        self.assertGreater(checked, 0)
        # No stray or torn files in the blob store: each file is named by its content's hash.
        files = bt.blob_files(b.root)
        self.assertGreaterEqual(len(files), len({d for _, d in ledger.blobs}))
        for name, path in files.items():
            self.assertEqual(os.path.basename(os.path.dirname(path)), name[:2], f"{path} misplaced {where}")
            self.assertEqual(bt.file_sha256(path), name, f"{path} does not hold its hash {where}")
        for _, digest in ledger.blobs:
            self.assertIn(digest[7:], files, f"acknowledged blob {digest} has no file {where}")
        # Nothing but the blob tree under blobs/.
        for dirpath, dirs, names in os.walk(os.path.join(b.root, "blobs")):
            rel = os.path.relpath(dirpath, os.path.join(b.root, "blobs"))
            depth = 0 if rel == "." else rel.count(os.sep) + 1
            if depth < 2:
                self.assertEqual(names, [], f"stray files in blobs/{rel} {where}")
        self.assertTrue(b.alive())


if __name__ == "__main__":
    unittest.main(verbosity=2)
