#!/usr/bin/env python3
"""Blobs in an S3 bucket on a real Ceph (tests/lib/cephlab.py: mon, OSD and radosgw on loopback).

- A push lands as one object per blob under the prefix, nothing under the replica's blobs/; pulls
  and ranged reads come back byte for byte, from the bucket (no cache) and from the local cache.
- A blob larger than a part goes up as a multipart upload; the bucket holds no upload afterwards.
- A multipart upload left by a replica that died mid-push is aborted by the sweep, and counted.
- Two replicas on one bucket: a blob pushed through one is served by the other, which never
  copied it (replication carries the index; the bucket holds one object).
- radosgw frozen: /healthz and /readyz stay quick, cached blobs are still served; thawed, pushes
  go on.
- The conformance suite passes against one of three replicas sharing the bucket.
- Scrub: an object deleted or damaged behind berth's back is found and put back from a replica's
  cache, a peer's, or the upstream a mirrored repository follows; one nothing holds is reported
  lost.
- redirect: a client's GET of a blob the cache does not hold is sent to a presigned URL of its
  object, which serves it without credentials; HEAD, other repositories and cached blobs are
  answered by the replica.
- Backups list the bucket's objects beside the index, copy none, and say which linked blob the
  bucket lacks; restored into a new root started on the bucket, every image pulls.
- `berth migrate --to-s3` copies a files store into the bucket while it serves and takes pushes;
  restarted on the bucket, the replica copies what came since and sets its files aside; nothing
  is lost.
- GC runs every second on three replicas taking pushes of shared layers: everything acknowledged
  stays whole, and blobs nothing references go from the bucket once the grace has passed.
"""

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
import cephlab  # noqa: E402
import distribution as dist  # noqa: E402

SKIP = cephlab.skip_reason()
BUCKET = "berth-blobs"


def blob_files(root):
    found = []
    for dirpath, _, files in os.walk(os.path.join(root, "blobs")):
        found += [os.path.join(dirpath, f) for f in files]
    return found


@unittest.skipIf(SKIP, SKIP)
class S3StoreTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cephlab.lab_for_class(cls, BUCKET)

    def store(self, b, prefix, **store):
        """storage.blobs for berth b on the bucket under prefix, its keys written in b.tmp."""
        for name, value in (("access", self.lab.access_key), ("secret", self.lab.secret_key)):
            with open(os.path.join(b.tmp, name), "w") as f:
                f.write(value + "\n")
        return {"type": "s3", "endpoint": self.lab.endpoint, "bucket": BUCKET, "prefix": prefix,
                "region": "us-east-1", "access_key_file": os.path.join(b.tmp, "access"),
                "secret_key_file": os.path.join(b.tmp, "secret"), "path_style": True, **store}

    def serve(self, prefix, more=None, **store):
        return bt.serve(self.addCleanup, lambda b: {"storage": {"blobs": self.store(b, prefix, **store)}, **(more or {})})

    def keys(self, prefix):
        return self.lab.keys(BUCKET, prefix)

    def cluster(self, prefix, config=None, n=3, **more_store):
        store = {"type": "s3", "endpoint": self.lab.endpoint, "bucket": BUCKET, "prefix": prefix,
                 "access_key_file": "access", "secret_key_file": "secret", **more_store}
        cluster = bt.Cluster(n=n, config={"storage": {"blobs": store}, **(config or {})})
        self.addCleanup(cluster.cleanup)
        for replica in cluster.replicas:
            for name, value in (("access", self.lab.access_key), ("secret", self.lab.secret_key)):
                with open(os.path.join(replica.tmp, name), "w") as f:
                    f.write(value + "\n")
        cluster.start()
        return cluster

    def test_push_and_pull_through_the_bucket(self):
        for cache_bytes in (0, 64 << 20):
            with self.subTest(cache_bytes=cache_bytes):
                prefix = f"push{cache_bytes}/"
                b = self.serve(prefix, cache_bytes=cache_bytes)
                img = b.push_image(f"app{cache_bytes}", "v1", layer_sizes=(300_000, 20_000))
                for digest, data in img["blobs"].items():
                    self.assertIn(f"{prefix}blobs/sha256/{digest.split(':')[1]}", self.keys(prefix))
                    r = b.get(f"/v2/app{cache_bytes}/blobs/{digest}")
                    self.assertEqual((r.status, r.body), (200, data))
                    r = b.get(f"/v2/app{cache_bytes}/blobs/{digest}", headers={"Range": "bytes=100-4195"})
                    self.assertEqual((r.status, r.body), (206, data[100:4196]))
                self.assertEqual(blob_files(b.root), [], "the replica's disk holds no blob")
                r = b.get(f"/v2/app{cache_bytes}/manifests/v1")
                self.assertEqual(r.status, 200)
                metrics = b.metrics()
                self.assertEqual(metrics["berth_s3_objects_uploaded_total"], len(img["blobs"]))
                self.assertEqual(metrics['berth_s3_cache_bytes{kind="capacity"}'], cache_bytes)

    def test_a_large_blob_goes_up_in_parts(self):
        prefix = "parts/"
        b = self.serve(prefix, part_size_mib=5, parallel_parts=2, cache_bytes=0)
        data = os.urandom(11 << 20)
        digest = b.push_blob("big", data)
        self.assertEqual(self.s3.head_object(Bucket=BUCKET, Key=f"{prefix}blobs/sha256/{digest[7:]}")["ContentLength"],
                         len(data))
        r = b.get(f"/v2/big/blobs/{digest}")
        self.assertEqual(hashlib.sha256(r.body).hexdigest(), digest[7:])
        r = b.get(f"/v2/big/blobs/{digest}", headers={"Range": f"bytes={(5 << 20) - 10}-{(5 << 20) + 9}"})
        self.assertEqual((r.status, r.body), (206, data[(5 << 20) - 10:(5 << 20) + 10]))
        self.assertEqual(self.lab.list_multipart_uploads(BUCKET, prefix), [])
        self.assertEqual(b.metrics()["berth_s3_multipart_uploads_total"], 1)
        # A reader slower than the bucket: the socket takes less than a piece at a time, and the
        # rest follows.
        with socket.create_connection(("127.0.0.1", b.port), timeout=30) as s:
            s.sendall(f"GET /v2/big/blobs/{digest} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            received = b""
            while chunk := s.recv(16384):
                received += chunk
                time.sleep(0.0005)
        body = received.split(b"\r\n\r\n", 1)[1]
        self.assertEqual(hashlib.sha256(body).hexdigest(), digest[7:])
        # Replaced behind berth's back (same size): a whole read is cut short, never complete
        # with the wrong bytes.
        wrong = bytearray(data)
        wrong[-1] ^= 1
        self.s3.put_object(Bucket=BUCKET, Key=f"{prefix}blobs/sha256/{digest[7:]}", Body=bytes(wrong))
        with socket.create_connection(("127.0.0.1", b.port), timeout=30) as s:
            s.sendall(f"GET /v2/big/blobs/{digest} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            received = b""
            while chunk := s.recv(1 << 20):
                received += chunk
        head, body = received.split(b"\r\n\r\n", 1)
        self.assertIn(b" 200 ", head.split(b"\r\n")[0])
        self.assertLess(len(body), len(data), "the last piece is held back")
        self.assertEqual(body, data[:len(body)])

    def test_an_abandoned_multipart_upload_is_aborted(self):
        prefix = "abandoned/"
        # What a replica killed mid-push leaves: an upload begun, a part in, never completed.
        key = f"{prefix}blobs/sha256/{'ab' * 32}"
        upload = self.s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
        self.s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=1, Body=b"x" * (5 << 20))
        other = self.s3.create_multipart_upload(Bucket=BUCKET, Key="elsewhere/x")["UploadId"]
        self.addCleanup(self.s3.abort_multipart_upload, Bucket=BUCKET, Key="elsewhere/x", UploadId=other)
        b = self.serve(prefix, abandoned_upload_seconds=10, abandoned_sweep_seconds=1)
        bt.poll(lambda: not self.lab.list_multipart_uploads(BUCKET, prefix), 40, what="the upload aborted")
        self.assertEqual(b.metrics()["berth_s3_abandoned_uploads_aborted_total"], 1)
        # Outside the prefix: not berth's to abort.
        self.assertEqual([u["UploadId"] for u in self.lab.list_multipart_uploads(BUCKET, "elsewhere/")], [other])

    def test_two_replicas_share_the_bucket(self):
        prefix = "shared/"
        a, b = self.cluster(prefix, n=2).replicas
        img = a.push_image("shared/app", "v1", layer_sizes=(200_000,))
        bt.poll(lambda: b.get("/v2/shared/app/manifests/v1").status == 200, 30, what="the tag replicated")
        for digest, data in img["blobs"].items():
            self.assertEqual(b.get(f"/v2/shared/app/blobs/{digest}").body, data)
        self.assertEqual(len(self.keys(prefix)), len(img["blobs"]), "one object per blob, whoever pushed it")
        for replica in (a, b):
            self.assertEqual(blob_files(replica.root), [])
        self.assertEqual(b.metrics()["berth_s3_objects_uploaded_total"], 0, "b uploaded nothing")

    def test_conformance_on_three_replicas(self):
        suite = os.path.join(os.path.dirname(bt.BIN), "conformance", "berth-conformance.pyz")
        cluster = self.cluster("conformance/")
        r = subprocess.run([sys.executable, suite, f"http://127.0.0.1:{cluster.replicas[0].port}"],
                           capture_output=True, text=True, timeout=240)
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-2000:])

    def test_scrub_repairs_the_bucket_from_a_cache_or_a_peer(self):
        prefix = "scrub/"
        replicas = self.cluster(prefix, {"scrub": {"interval_seconds": 1}}, n=2, cache_bytes=16 << 20).replicas
        # One replica scrubs the bucket: the damaged blob is in its own cache, the lost one only in
        # the other's, which it must ask.
        # Until the replicas know each other ready (statuses are asked every 2 s, scrubs run every
        # second), each may lead: the leader is the one that goes on scrubbing once they do.
        runs = lambda r: r.metrics().get("berth_scrub_runs_total", 0)  # noqa: E731
        start = [runs(r) for r in replicas]
        leader = bt.poll(lambda: [r for r, n in zip(replicas, start) if runs(r) >= n + 3], 30, what="a leader")
        a, b = leader[0], next(r for r in replicas if r is not leader[0])
        since, led = runs(b), runs(a)
        bt.poll(lambda: runs(a) >= led + 3, 30, what="the leader scrubbing on")
        # A run b began before it heard a was ready may still end in that window, never more.
        self.assertLessEqual(runs(b), since + 1, "one replica scrubs the bucket")
        damaged = a.push_image("scrub/app", "v2", layer_sizes=(150_000,))
        lost = b.push_image("scrub/app", "v1", layer_sizes=(150_000,))
        # Damaged the same way a bit flip would: same size, other bytes.
        layer = bt.sha256_digest(damaged["layers"][0])
        data = damaged["blobs"][layer]
        self.s3.put_object(Bucket=BUCKET, Key=f"{prefix}blobs/sha256/{layer[7:]}", Body=data[:-1] + bytes([data[-1] ^ 1]))
        gone = bt.sha256_digest(lost["layers"][0])
        self.s3.delete_object(Bucket=BUCKET, Key=f"{prefix}blobs/sha256/{gone[7:]}")

        def whole(digest, expected):
            try:
                body = self.s3.get_object(Bucket=BUCKET, Key=f"{prefix}blobs/sha256/{digest[7:]}")["Body"].read()
            except self.s3.exceptions.NoSuchKey:
                return False
            return body == expected
        bt.poll(lambda: whole(gone, lost["blobs"][gone]) and whole(layer, data), 60, what="both objects repaired")
        self.assertIn(f"{prefix}quarantine/sha256-{layer[7:]}", self.keys(prefix), "the damaged bytes kept aside")
        metrics = a.metrics()
        self.assertGreaterEqual(metrics["berth_scrub_repaired_total"], 2)
        self.assertGreaterEqual(metrics["berth_scrub_missing_total"], 1)
        self.assertEqual(metrics["berth_scrub_unrepaired_blobs"], 0)
        for replica in (a, b):
            self.assertEqual(replica.get(f"/v2/scrub/app/blobs/{gone}").body, lost["blobs"][gone])

    def test_scrub_repairs_a_mirrored_blob_from_its_upstream(self):
        prefix = "scrub-upstream/"
        upstream = dist.Distribution()
        self.addCleanup(upstream.cleanup)
        upstream.start()
        mirrored = upstream.push_image("library/base", "1", layer_sizes=(40_000,))
        b = self.serve(prefix, {"scrub": {"interval_seconds": 1},
                                "proxy": {"upstreams": [{"host": "docker.io", "url": upstream.url}]}}, cache_bytes=0)
        layer = bt.sha256_digest(mirrored["layers"][0])
        r = b.get(f"/v2/docker.io/library/base/blobs/{layer}")
        self.assertEqual((r.status, r.body), (200, mirrored["blobs"][layer]))
        own = b.push_image("private", "v1", layer_sizes=(30_000,))
        own_layer = bt.sha256_digest(own["layers"][0])
        for digest in (layer, own_layer):
            self.s3.delete_object(Bucket=BUCKET, Key=f"{prefix}blobs/sha256/{digest[7:]}")
        bt.poll(lambda: f"{prefix}blobs/sha256/{layer[7:]}" in self.keys(prefix), 60,
                what="the mirrored blob fetched again")
        # Pushed here, cached nowhere, no peer: nothing can give it back, and that is said.
        bt.poll(lambda: b.metrics().get("berth_scrub_unrepaired_blobs") == 1, 30, what="the lost blob reported")
        self.assertNotIn(f"{prefix}blobs/sha256/{own_layer[7:]}", self.keys(prefix))
        self.assertGreaterEqual(b.metrics()["berth_scrub_repaired_total"], 1)
        self.assertTrue(any(x.get("msg", "").startswith("scrub could not repair") and x.get("digest") == own_layer
                            for x in b.log_lines()))
        r = b.get(f"/v2/docker.io/library/base/blobs/{layer}")
        self.assertEqual((r.status, r.body), (200, mirrored["blobs"][layer]))

    def test_migrate_to_s3_while_serving(self):
        prefix = "migrate/"
        b = bt.serve(self.addCleanup, {})  # the files store
        images = [b.push_image("migrate/app", f"v{i}", layer_sizes=(60_000 + i, 7_000_000 if i == 0 else 500))
                  for i in range(3)]
        config = os.path.join(b.tmp, "s3.json")
        with open(config, "w") as f:
            json.dump({"storage": {"blobs": self.store(b, prefix, part_size_mib=5)}}, f)
        done, errors = threading.Event(), []

        def pusher():  # pushes go on while the blobs are copied
            try:
                while not done.is_set():
                    images.append(b.push_image("migrate/app", f"v{len(images)}", layer_sizes=(3000,)))
            except Exception as error:  # noqa: BLE001 (reported below)
                errors.append(error)
        thread = threading.Thread(target=pusher)
        thread.start()
        try:
            r = bt.run_cli("migrate", "--to-s3", "--config", config, "--root", b.root, timeout=120)
        finally:
            done.set()
            thread.join()
        self.assertEqual(errors, [])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"\d+ blobs copied")
        copied = set(self.keys(prefix))
        for digest in images[0]["blobs"]:
            self.assertIn(f"{prefix}blobs/sha256/{digest[7:]}", copied)
        self.assertTrue(blob_files(b.root), "migrate leaves the files to the serving replica")
        images.append(b.push_image("migrate/app", "late", layer_sizes=(4000,)))  # after the copy
        b.stop()
        b.config = {"storage": {"blobs": self.store(b, prefix, part_size_mib=5)}}
        b.restart()
        self.assertEqual(blob_files(b.root), [], "the files set aside once the bucket held them")
        moved = [x for x in b.log_lines() if x.get("msg") == "moved the files store's blobs into the bucket"]
        self.assertEqual(len(moved), 1)
        aside = moved[0]["set_aside"]
        self.assertTrue(os.path.basename(aside).startswith("blobs.moved-"), aside)
        kept = sum(len(files) for _, _, files in os.walk(aside))
        self.assertEqual(kept, moved[0]["blobs"], "never removed: renamed back, they are the files store")
        self.assertGreaterEqual(moved[0]["copied"], 1, "what was pushed after the copy went up at the start")
        keys = set(self.keys(prefix))
        for img in images:
            self.assertEqual(b.get(f"/v2/migrate/app/manifests/{img['tag']}").status, 200)
            for digest, data in img["blobs"].items():
                self.assertIn(f"{prefix}blobs/sha256/{digest[7:]}", keys)
                self.assertEqual(b.get(f"/v2/migrate/app/blobs/{digest}").body, data)
        r = bt.run_cli("migrate", "--to-s3", "--config", config, "--root", b.root)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, f"no blob files under {b.root}: nothing to copy"))

    def test_backups_list_the_bucket_and_restore_onto_it(self):
        prefix = "backup/"
        secret = "backup-secret-0123456789"

        def config(b):
            with open(os.path.join(b.tmp, "backup-secret"), "w") as f:
                f.write(secret + "\n")
            return {"storage": {"blobs": self.store(b, prefix)},
                    "backup": {"target": "target", "secret_file": "backup-secret"}}
        b = bt.serve(self.addCleanup, config)
        img = b.push_image("backup/app", "v1", layer_sizes=(80_000,))
        auth = {"Authorization": "Bearer " + secret}

        def backup():
            self.assertEqual(b.request("POST", "/_berth/v1/backup", headers=auth).status, 202)
            return bt.poll(lambda: (lambda s: s if s["state"] in ("succeeded", "failed") else None)(
                b.request("GET", "/_berth/v1/backup", headers=auth).json()), 60, what="backup finished")
        status = backup()
        self.assertEqual((status["state"], status["blobs"], status["damaged"]), ("succeeded", len(img["blobs"]), 0))
        target = os.path.join(b.tmp, "target")
        [backup_id] = os.listdir(os.path.join(target, "backups"))
        with open(os.path.join(target, "backups", backup_id, "backup.json")) as f:
            self.assertEqual(json.load(f)["blobs"]["in"], "bucket")
        self.assertFalse(os.path.exists(os.path.join(target, "blobs")), "listed, not copied")
        self.assertEqual(bt.run_cli("backup", "verify", target).returncode, 0)
        r = bt.run_cli("backup", "--root", b.root, "--to", os.path.join(b.tmp, "cli-target"))
        self.assertEqual(r.returncode, 2, "the command line cannot see the bucket")
        self.assertIn("keeps its blobs in a bucket", r.stderr)

        # Pushed after the backup: in the bucket, linked by no index the restore brings back.
        later = b.push_image("backup/app", "v2", layer_sizes=(20_000,))
        restored = bt.Berth(root=os.path.join(b.tmp, "restored"))
        self.addCleanup(restored.cleanup)
        r = bt.run_cli("restore", "--from", target, "--root", restored.root)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("are in the bucket it was taken on", r.stdout)
        restored.config = {"storage": {"blobs": self.store(restored, prefix)},
                           "gc": {"interval_seconds": 1, "grace_seconds": 1}}
        restored.start()
        for digest, data in img["blobs"].items():
            self.assertEqual(restored.get(f"/v2/backup/app/blobs/{digest}").body, data)
        self.assertEqual(restored.get("/v2/backup/app/manifests/v1").body, img["manifest"])
        # Its garbage collection leaves what is newer than the backup: another index links it.
        bt.poll(lambda: restored.metrics().get("berth_gc_runs_total", 0) >= 3, 30, what="three collections")
        keys = set(self.keys(prefix))
        for digest in later["blobs"]:
            self.assertIn(f"{prefix}blobs/sha256/{digest[7:]}", keys)
        restored.stop()

        # A linked blob gone from the bucket: the next backup says so.
        layer = bt.sha256_digest(img["layers"][0])
        self.s3.delete_object(Bucket=BUCKET, Key=f"{prefix}blobs/sha256/{layer[7:]}")
        status = backup()
        self.assertEqual((status["state"], status["damaged"]), ("succeeded", 1))
        self.assertTrue(any(x.get("msg") == "backup: a blob the index links is not in the bucket" and
                            x.get("digest") == layer for x in b.log_lines()))

    def test_redirect_sends_clients_to_the_bucket(self):
        prefix = "redirect/"
        b = self.serve(prefix, redirect=True, redirect_seconds=60, cache_bytes=8 << 20)
        img = b.push_image("redirect/app", "v1", layer_sizes=(2 << 20, 50_000))
        big, small = (bt.sha256_digest(layer) for layer in img["layers"])
        b.stop()  # the cache starts empty: nothing is held closer than the bucket
        b.restart()
        r = b.get(f"/v2/redirect/app/blobs/{big}")
        self.assertEqual(r.status, 307, r)
        self.assertEqual(r.header("Cache-Control"), "no-store", "the URL expires: no cache may keep it")
        location = r.header("Location")
        self.assertIn("X-Amz-Signature=", location)
        with urllib.request.urlopen(location, timeout=30) as answer:  # no credentials: the URL is the grant
            self.assertEqual(answer.read(), img["blobs"][big])
        self.assertEqual(b.head(f"/v2/redirect/app/blobs/{big}").status, 200, "HEAD is answered here")
        # Only a repository that holds the blob gets a URL for it.
        self.assertEqual(b.get(f"/v2/redirect/other/blobs/{big}").status, 404)
        self.assertEqual(b.get(f"/v2/redirect/app/blobs/{small}").status, 307)
        # A real client follows the redirects, and its copy checks every digest.
        out = tempfile.mkdtemp(prefix="berth-redirect-")
        self.addCleanup(shutil.rmtree, out, True)
        r = subprocess.run(["skopeo", "copy", "--preserve-digests", "--src-tls-verify=false",
                            f"docker://127.0.0.1:{b.port}/redirect/app:v1",
                            f"oci:{out}/layout:v1"], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        for digest in (big, small):
            with open(os.path.join(out, "layout", "blobs", "sha256", digest[7:]), "rb") as f:
                self.assertEqual(f.read(), img["blobs"][digest])
        # A blob in this replica's cache (pushed through it) is served from there.
        data = os.urandom(30_000)
        digest = b.push_blob("redirect/app", data)
        r = b.get(f"/v2/redirect/app/blobs/{digest}")
        self.assertEqual((r.status, r.body), (200, data))

    def test_gc_deletes_only_what_nothing_references(self):
        prefix = "gc/"
        cluster = self.cluster(prefix, {"gc": {"interval_seconds": 1, "grace_seconds": 3}})
        base = os.urandom(100_000)
        pushed, errors = [], []

        def pusher(replica, n):
            try:
                for i in range(n):
                    img = bt.image_of([base, os.urandom(2000 + i)])
                    for data in img["blobs"].values():
                        replica.push_blob(f"gc/app{replica.index}", data)
                    r = replica.put_manifest(f"gc/app{replica.index}", f"v{i}", img["manifest"])
                    if r.status != 201:
                        raise AssertionError(r)
                    pushed.append((f"gc/app{replica.index}", f"v{i}", img))
            except Exception as error:  # noqa: BLE001 (reported below)
                errors.append(error)

        threads = [threading.Thread(target=pusher, args=(replica, 12)) for replica in cluster.replicas]
        for thread in threads:
            thread.start()
        orphan = os.urandom(3000)
        orphan_digest = cluster.replicas[2].push_blob("gc/orphans", orphan)
        # Unlinked from its one repository, the blob is referenced nowhere. Unlinked at once: a link no
        # manifest uses is itself collected past the grace, which a slow machine's pushes can outlast.
        r = cluster.replicas[2].request("DELETE", f"/v2/gc/orphans/blobs/{orphan_digest}")
        self.assertEqual(r.status, 202, r)
        for thread in threads:
            thread.join()
        self.assertEqual(errors, [])
        orphan_key = f"{prefix}blobs/sha256/{orphan_digest[7:]}"
        bt.poll(lambda: orphan_key not in self.keys(prefix), 60, what="the orphan collected from the bucket")
        keys = set(self.keys(prefix))
        self.assertEqual(len(pushed), 36)
        for repo, tag, img in pushed:
            for digest in img["blobs"]:
                self.assertIn(f"{prefix}blobs/sha256/{digest[7:]}", keys, f"{repo}:{tag} lost {digest}")
        for replica in cluster.replicas:
            for repo, tag, img in pushed[::5]:
                bt.poll(lambda: replica.get(f"/v2/{repo}/manifests/{tag}").status == 200, 30,
                        what=f"{repo}:{tag} on {replica.replica_id}")
                for digest, data in img["blobs"].items():
                    self.assertEqual(replica.get(f"/v2/{repo}/blobs/{digest}").body, data)

    def test_a_frozen_gateway_stalls_no_probe(self):
        prefix = "frozen/"
        b = self.serve(prefix, cache_bytes=64 << 20)
        img = b.push_image("cold", "v1", layer_sizes=(50_000,))
        layer = bt.sha256_digest(img["layers"][0])
        self.lab.freeze("radosgw")
        try:
            for path in ("/healthz", "/readyz"):
                t0 = time.monotonic()
                r = b.get(path, timeout=5)
                self.assertLess(time.monotonic() - t0, 1.0, path)
                self.assertEqual(r.status, 200, path)
            # Pushed through this replica: in its cache, served without the bucket.
            r = b.get(f"/v2/cold/blobs/{layer}", timeout=5)
            self.assertEqual((r.status, r.body), (200, img["blobs"][layer]))
        finally:
            self.lab.thaw("radosgw")
        b.push_image("cold", "v2", layer_sizes=(1000,))


if __name__ == "__main__":
    unittest.main()
