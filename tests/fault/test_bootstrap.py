#!/usr/bin/env python3
"""Bootstrap and log-compaction fault tests: two real berth replicas (A serving, B receiving).

1. kill -9 of the receiving replica mid-bootstrap (tags moved, deleted and added on the other while
   it is down): on restart it resumes from the page it had saved (it does not start over), becomes
   ready only once done, and serves everything on its own;
2. kill -9 of the serving replica mid-bootstrap, with tags moved, deleted and added on it before the
   kill and after its restart: the receiver goes on (from a new moment of the peer's index), then
   follows the log from the first moment's head and converges;
3. a peer that was down while the other compacted its log past the peer's cursor (log_max_entries)
   re-bootstraps incrementally (pages it already holds are skipped), loses none of its tags and
   resurrects none of the deletes; the log stays bounded by the cap;
4. a log request for compacted entries answers 410 with the first sequence still kept;
5. while a replica bootstraps (frozen mid-way, past the retention window), the serving replica keeps
   its log from the head of the first moment that replica read, so it follows on without a 410.

A is filled with many small distinct manifests (one config and one layer shared by every repository)
pushed by tag over concurrent connections; BERTH_BOOTSTRAP_MANIFESTS sets how many (default 20000,
a bootstrap of about 40k records, a couple of seconds here). Synchronisation is by polling
(/_berth/v1/status, /readyz, /metrics, the logs) with deadlines, never by fixed sleeps. Every
process and temp dir is cleaned up, also on failure; a failing test (or BERTH_KEEP=1) prints the
replicas' logs and the seed (BERTH_BOOTSTRAP_SEED).
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

SEED = int(os.environ.get("BERTH_BOOTSTRAP_SEED", str(random.randrange(1 << 30))))
MANIFESTS = int(os.environ.get("BERTH_BOOTSTRAP_MANIFESTS", "20000"))
REPOS = 50
PUSH_THREADS = 8
PAGE = 1000  # records the receiver asks for per page of state (bootstrap.cpp)
CONVERGE = 60  # seconds a bootstrap or a catch-up may take
ACCEPT = ", ".join([bt.OCI_MANIFEST, "application/vnd.docker.distribution.manifest.v2+json"])
CONFIG = b'{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}'


class Store:
    """What the replicas must serve: {(repo, tag): manifest bytes}, plus what was deleted."""

    def __init__(self, layer, nonce):
        self.layer, self.nonce = layer, nonce
        self.tags = {}
        self.gone_tags = set()  # (repo, tag)
        self.gone_manifests = set()  # (repo, digest)
        self.touched = set()  # (repo, tag) written after the fill
        self.lock = threading.Lock()

    def manifest(self, label):
        """A small distinct manifest over the shared config and layer."""
        return json.dumps({
            "schemaVersion": 2, "mediaType": bt.OCI_MANIFEST,
            "config": {"mediaType": bt.OCI_CONFIG, "digest": bt.sha256_digest(CONFIG), "size": len(CONFIG)},
            "layers": [{"mediaType": bt.OCI_LAYER, "digest": bt.sha256_digest(self.layer),
                        "size": len(self.layer)}],
            "annotations": {"berth.test/n": label, "berth.test/run": self.nonce},
        }).encode()

    def repos(self):
        return sorted({repo for repo, _ in self.tags})

    def tags_of(self, repo):
        return sorted(tag for r, tag in self.tags if r == repo)


def fill(replica, store, prefix, repos, count, threads=PUSH_THREADS, tag_prefix="t"):
    """Push the shared blobs into each repository, then `count` manifests by tag over concurrent
    keep-alive connections (repository i % repos). Raises on any answer but 201."""
    names = [f"{prefix}/r{i}" for i in range(repos)]
    for repo in names:
        replica.push_blob(repo, CONFIG)
        replica.push_blob(repo, store.layer)
    errors = []

    def worker(k):
        conn = replica.conn()
        try:
            for i in range(k, count, threads):
                repo, tag = names[i % repos], f"{tag_prefix}{i}"
                body = store.manifest(f"{prefix}/{tag}")
                conn.request("PUT", f"/v2/{repo}/manifests/{tag}", body=body,
                              headers={"Content-Type": bt.OCI_MANIFEST})
                r = conn.getresponse()
                r.read()
                if r.status != 201:
                    errors.append(f"PUT {repo}:{tag}: {r.status}")
                    return
                with store.lock:
                    store.tags[(repo, tag)] = body
        except (OSError, http.client.HTTPException) as err:
            errors.append(repr(err))
        finally:
            conn.close()

    pool = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(300)
    if errors or any(t.is_alive() for t in pool):
        raise AssertionError(f"fill of {replica.replica_id} failed: {errors[:5]}")


def mutate(testcase, replica, store, rng, label, n, repos=None):
    """n tag moves, n tag deletes, n manifest deletes (by digest) and n new tags on one replica,
    recorded in the store. repos: where to pick (default: every repository)."""
    pick_from = repos or store.repos()

    def pick():
        repo = rng.choice(pick_from)
        tags = store.tags_of(repo)
        return repo, rng.choice(tags)

    for i in range(n):
        repo, tag = pick()  # a tag moves to another live manifest of its repository
        _, other = pick_in(store, rng, repo, exclude=tag)
        body = store.tags[(repo, other)]
        r = replica.put_manifest(repo, tag, body)
        testcase.assertEqual(r.status, 201, f"{label}: move {repo}:{tag}: {r}")
        store.tags[(repo, tag)] = body
        store.touched.add((repo, tag))

        repo, tag = pick()  # a tag is deleted (its manifest stays)
        r = replica.request("DELETE", f"/v2/{repo}/manifests/{tag}")
        testcase.assertEqual(r.status, 202, f"{label}: delete tag {repo}:{tag}: {r}")
        del store.tags[(repo, tag)]
        store.gone_tags.add((repo, tag))

        repo, tag = pick()  # a manifest is deleted, and with it every tag on it
        body = store.tags[(repo, tag)]
        digest = bt.sha256_digest(body)
        r = replica.request("DELETE", f"/v2/{repo}/manifests/{digest}")
        testcase.assertEqual(r.status, 202, f"{label}: delete manifest {repo}@{digest}: {r}")
        for key in [k for k, v in store.tags.items() if k[0] == repo and v == body]:
            del store.tags[key]
            store.gone_tags.add(key)
        store.gone_manifests.add((repo, digest))

        repo = rng.choice(pick_from)  # a new tag on a new manifest
        tag = f"{label}-new{i}"
        body = store.manifest(f"{repo}/{tag}")
        r = replica.put_manifest(repo, tag, body)
        testcase.assertEqual(r.status, 201, f"{label}: new {repo}:{tag}: {r}")
        store.tags[(repo, tag)] = body
        store.touched.add((repo, tag))


def pick_in(store, rng, repo, exclude):
    tags = [t for t in store.tags_of(repo) if t != exclude]
    return repo, rng.choice(tags)


def paged(replica, path, key):
    """Every item of a paginated listing (following Link headers)."""
    out = []
    while path:
        r = replica.get(path)
        if r.status != 200:
            raise AssertionError(f"GET {path} on {replica.replica_id}: {r}")
        out += r.json().get(key) or []
        link = r.header("Link")
        path = bt.location_path(link.split(";")[0].strip().strip("<>")) if link else None
    return out


def finished_lines(lines):
    return [line for line in lines if line.get("msg") == "bootstrap finished"]


def messages(lines):
    return [line.get("msg") for line in lines]


def read_log(path):
    with open(path, "rb") as f:
        return [json.loads(line) for line in f.read().decode("utf-8", "replace").splitlines() if line.strip()]


class BootstrapTestCase(unittest.TestCase):
    replication = {}

    def setUp(self):
        self.rng = random.Random(SEED ^ hash(self.id()) & 0xFFFFFFFF)
        self.cluster = bt.Cluster(2, write_quorum="local", replication=self.replication)
        self.addCleanup(self.cluster.cleanup)
        self.addCleanup(self.print_logs_on_failure)
        self.store = Store(self.rng.randbytes(512), f"{SEED}-{self.rng.getrandbits(32):x}")

    def print_logs_on_failure(self):
        result = getattr(getattr(self, "_outcome", None), "result", None)
        failed = result is not None and any(t is self for t, _ in result.failures + result.errors)
        if failed or os.environ.get("BERTH_KEEP"):
            out = [f"\n(BERTH_BOOTSTRAP_SEED={SEED})"]
            for r in self.cluster:
                for name in sorted(os.listdir(r.tmp)):
                    if name.startswith("stderr."):
                        with open(os.path.join(r.tmp, name), "rb") as f:
                            text = f.read().decode("utf-8", "replace")
                        out.append(f"--- {r.replica_id} {name}:\n{text[-4000:]}")
            print("\n".join(out), file=sys.stderr)

    # ---- helpers

    def peer_status(self, replica):
        """The one peer entry of a replica's status, or None while it does not answer."""
        try:
            peers = replica.status()["peers"]
        except (OSError, http.client.HTTPException, AssertionError, ValueError, KeyError, TypeError):
            return None
        return peers[0] if peers else None

    def wait_bootstrapping(self, replica, min_records, timeout=CONVERGE):
        """Poll until the replica's bootstrap has received at least min_records records (and is not
        done); returns that bootstrap status."""
        deadline = time.monotonic() + timeout
        while True:
            self.assertTrue(replica.alive(), f"{replica.replica_id} exited: {replica.stderr()[-2000:]}")
            p = self.peer_status(replica)
            if p is not None:
                bs = p.get("bootstrap")
                if bs and bs["records"] >= min_records:
                    return bs
                self.assertFalse(not bs and p["cursor"] > 0,
                                 f"{replica.replica_id} finished its bootstrap before it could be interrupted "
                                 f"(raise BERTH_BOOTSTRAP_MANIFESTS): {p}")
            if time.monotonic() > deadline:
                self.fail(f"{replica.replica_id} never reported {min_records} bootstrap records: {p}")
            time.sleep(0.01)

    def wait_readyz_after_bootstrap(self, replica):
        """Wait for /readyz 200; the log must say the bootstrap finished before the replica said ready."""
        replica.wait_readyz(CONVERGE)
        lines = replica.log_lines()
        self.assertTrue(finished_lines(lines),
                        f"{replica.replica_id} ready before its bootstrap finished: {messages(lines)}")
        return lines

    def expect_tag_lists(self, replica, where):
        """Catalog and every repository's tag list equal what the store says."""
        repos = paged(replica, "/v2/_catalog?n=1000", "repositories")
        self.assertEqual(sorted(repos), self.store.repos(), f"catalog of {replica.replica_id} {where}")
        for repo in self.store.repos():
            tags = paged(replica, f"/v2/{repo}/tags/list?n=1000", "tags")
            self.assertEqual(len(tags), len(set(tags)), f"{replica.replica_id} {repo}: duplicate tags")
            want = set(self.store.tags_of(repo))
            got = set(tags)
            self.assertEqual(got, want, f"tags of {repo} on {replica.replica_id} {where}: "
                             f"missing {sorted(want - got)[:10]}, extra {sorted(got - want)[:10]}")

    def expect_gone(self, replica, where):
        for repo, tag in sorted(self.store.gone_tags):
            if (repo, tag) in self.store.tags:
                continue
            r = replica.get(f"/v2/{repo}/manifests/{tag}", headers={"Accept": ACCEPT})
            self.assertEqual(r.status, 404, f"deleted tag {repo}:{tag} served by {replica.replica_id} {where}: {r}")
        for repo, digest in sorted(self.store.gone_manifests):
            r = replica.get(f"/v2/{repo}/manifests/{digest}", headers={"Accept": ACCEPT})
            self.assertEqual(r.status, 404,
                             f"deleted manifest {repo}@{digest} served by {replica.replica_id} {where}: {r}")

    def expect_manifests(self, replica, sample, where):
        """Every touched tag plus `sample` random others: byte-identical by tag and by digest; the
        shared blobs in every repository."""
        keys = sorted(self.store.tags)
        chosen = set(self.rng.sample(keys, min(sample, len(keys)))) | (self.store.touched & set(keys))
        for repo, tag in sorted(chosen):
            body = self.store.tags[(repo, tag)]
            who = f"{repo}:{tag} on {replica.replica_id} {where} (seed {SEED})"
            r = replica.get(f"/v2/{repo}/manifests/{tag}", headers={"Accept": ACCEPT})
            self.assertEqual(r.status, 200, f"{who}: {r}")
            self.assertEqual(r.header("Docker-Content-Digest"), bt.sha256_digest(body), who)
            self.assertEqual(r.body, body, f"manifest bytes of {who}")
            r = replica.head(f"/v2/{repo}/manifests/{bt.sha256_digest(body)}", headers={"Accept": ACCEPT})
            self.assertEqual(r.status, 200, f"by digest: {who}: {r}")
        for repo in self.store.repos():
            for data in (CONFIG, self.store.layer):
                r = replica.get(f"/v2/{repo}/blobs/{bt.sha256_digest(data)}")
                self.assertEqual(r.status, 200, f"blob in {repo} on {replica.replica_id} {where}: {r}")
                self.assertEqual(r.body, data)

    def records_of_fill(self, repos, manifests):
        """State records a fill makes: a link per blob and repository, a manifest and a tag each."""
        return 2 * repos + 2 * manifests


# --------------------------------------------------------------------------- 1


class ReceiverKilledTest(BootstrapTestCase):
    def test_kill9_receiver_mid_bootstrap_resumes(self):
        c = self.cluster
        a, b = c[0], c[1]
        c.assign_ports()
        a.start()
        fill(a, self.store, "fill", REPOS, MANIFESTS)
        total = self.records_of_fill(REPOS, MANIFESTS)
        head = a.status()["log_head"]

        b.spawn()
        progress = self.wait_bootstrapping(b, 3 * PAGE)
        b.kill()  # SIGKILL
        first_run = read_log(b.stderr_path)
        self.assertIn("bootstrapping from peer", messages(first_run))
        self.assertFalse(finished_lines(first_run), "the bootstrap finished before the kill")
        # Changes while B is down, some in ranges it had copied: the log from its first moment's head has them.
        mutate(self, a, self.store, self.rng, "while-down", 5)
        total += 2 * 5  # the new tags and their manifests: records of A's next moment

        b.restart()
        lines = self.wait_readyz_after_bootstrap(b)
        self.assertIn("resuming bootstrap from peer", messages(lines),
                      f"B did not resume its bootstrap after kill -9: {messages(lines)}")
        self.assertNotIn("bootstrapping from peer", messages(lines), "B started its bootstrap over")
        done = finished_lines(lines)
        self.assertEqual(len(done), 1, done)
        done = done[0]
        # Progress is saved after every page: at most the page being applied at the kill is read again.
        self.assertLessEqual(done["records"], total - progress["records"] + PAGE,
                             f"resumed bootstrap read {done['records']} of {total} records, though "
                             f"{progress['records']} were read before the kill")
        self.assertGreater(done["records"], 0)
        self.assertEqual(done["cursor"], head, "the log is followed from the head of the first moment")
        print(f"\n  killed at {progress}, resumed run read {done['records']} of {total} records", file=sys.stderr)
        p = self.peer_status(b)
        self.assertTrue(p["caught_up"], p)
        self.assertNotIn("bootstrap", p)

        c.wait_caught_up(CONVERGE)
        self.expect_tag_lists(a, "(the serving replica)")
        self.expect_tag_lists(b, "after a resumed bootstrap")
        self.expect_gone(b, "after a resumed bootstrap")
        a.stop()  # B on its own: nothing it serves below comes from read-through
        self.expect_tag_lists(b, "after a resumed bootstrap, A stopped")
        self.expect_manifests(b, 300, "after a resumed bootstrap, A stopped")
        self.expect_gone(b, "after a resumed bootstrap, A stopped")


# --------------------------------------------------------------------------- 2


class ServerKilledTest(BootstrapTestCase):
    def test_kill9_server_mid_bootstrap(self):
        c = self.cluster
        a, b = c[0], c[1]
        c.assign_ports()
        a.start()
        fill(a, self.store, "fill", REPOS, MANIFESTS)

        b.spawn()
        self.wait_bootstrapping(b, 3 * PAGE)
        # B is held still while A changes, and A while B is looked at: B can take in at most the
        # page already on its way, so its bootstrap is unfinished when A dies (not a race).
        b.freeze()
        # Changes after the first moment B read: they reach B through the log from that moment's head.
        mutate(self, a, self.store, self.rng, "before-kill", 5)
        a.freeze()
        b.thaw()
        p = bt.poll(lambda: self.peer_status(b), 20, what="B's status after it was thawed")
        self.assertIn("bootstrap", p, f"B finished its bootstrap before A was killed: {p}")
        a.proc.send_signal(signal.SIGKILL)  # while frozen: not one more page goes out
        a.kill()
        self.assertTrue(b.alive())
        self.assertEqual(b.readyz(), 503, "B ready with its bootstrap unfinished and its peer gone")
        # B may be applying a page for longer than A stays down (seconds under ASan): had A come
        # back first, B's next page would have come from it with no error in between, and so no
        # "resuming" (the sanitizer run's failure). So A comes back only once B found it gone.
        def found_gone():
            now = self.peer_status(b)
            return now is not None and now["errors"] > p["errors"]
        bt.poll(found_gone, CONVERGE, what="B to find A gone")

        a.restart()
        mutate(self, a, self.store, self.rng, "after-restart", 5)
        lines = self.wait_readyz_after_bootstrap(b)
        c.wait_caught_up(CONVERGE)
        msgs = messages(lines)
        self.assertIn("bootstrapping from peer", msgs)
        self.assertIn("resuming bootstrap from peer", msgs,
                      f"B did not go on with its bootstrap after A came back: {msgs}")
        self.assertEqual(len(finished_lines(lines)), 1, finished_lines(lines))
        p = self.peer_status(b)
        self.assertTrue(p["caught_up"], p)
        self.assertEqual(p["cursor"], a.status()["log_head"], p)

        self.expect_tag_lists(a, "(the serving replica)")
        self.expect_tag_lists(b, "after its peer was killed mid-bootstrap")
        self.expect_gone(b, "after its peer was killed mid-bootstrap")
        a.stop()
        self.expect_tag_lists(b, "A stopped")
        self.expect_manifests(b, 300, "A stopped")
        self.expect_gone(b, "A stopped")


# --------------------------------------------------------------------------- 5


class CompactionDuringBootstrapTest(BootstrapTestCase):
    """The log a bootstrapping replica will follow from (the head of the first moment it read) is
    kept while it reads pages, even past the retention window."""
    replication = {"log_retention_seconds": 2}

    def test_log_kept_from_first_moment_while_bootstrapping(self):
        c = self.cluster
        a, b = c[0], c[1]
        c.assign_ports()
        a.start()
        fill(a, self.store, "fill", REPOS, MANIFESTS // 2)
        since = a.status()["log_head"]

        b.spawn()
        self.wait_bootstrapping(b, 2 * PAGE)
        b.freeze()
        mutate(self, a, self.store, self.rng, "while-frozen", 5)
        head = a.status()["log_head"]
        self.assertGreater(head, since)

        def compacted():
            m = a.metrics()
            return (m["berth_changelog_oldest_entry_age_seconds"] > 3
                    and m["berth_changelog_entries"] <= head - since) and m
        m = bt.poll(compacted, 20, 0.1, "A's log compacted down to what B still needs, past the window")
        self.assertEqual(m["berth_changelog_entries"], head - since,
                         f"A compacted entries after {since}, the head B's bootstrap started from")
        b.thaw()
        lines = self.wait_readyz_after_bootstrap(b)
        c.wait_caught_up(CONVERGE)
        msgs = messages(lines)
        self.assertEqual(msgs.count("bootstrapping from peer"), 1, msgs)
        done = finished_lines(lines)
        self.assertEqual(len(done), 1, msgs)
        self.assertEqual(done[0]["cursor"], since, done)
        after = msgs[msgs.index("bootstrap finished"):]
        self.assertNotIn("peer compacted its log past this replica's cursor; re-bootstrapping", after,
                         "B had to bootstrap again: A compacted the log it was to follow")

        self.expect_tag_lists(b, "after a bootstrap that outlasted the retention window")
        self.expect_gone(b, "after a bootstrap that outlasted the retention window")
        a.stop()
        self.expect_manifests(b, 200, "A stopped")


# --------------------------------------------------------------------------- 3 and 4


CAP = 1000


class CompactionTest(BootstrapTestCase):
    replication = {"log_retention_seconds": 2, "log_max_entries": CAP}

    def entries(self, replica):
        return replica.metrics().get("berth_changelog_entries")

    def log(self, replica, after):
        r = replica.peer_request("GET", f"log?after={after}&limit=10")
        self.assertIn(r.status, (200, 410), r)
        return r.status, r.json()

    def test_compacted_past_cursor_reboots_incrementally(self):
        c = self.cluster.start()
        a, b = c[0], c[1]
        old_repos, old_count = 5, 2500
        fill(a, self.store, "old", old_repos, old_count)
        c.wait_caught_up(CONVERGE)
        # Read by every peer and older than the window: compacted away.
        bt.poll(lambda: self.entries(a) == 0, 15, 0.1, "A's change log compacted once B had read it")
        cursor = self.peer_status(b)["cursor"]
        self.assertEqual(cursor, a.status()["log_head"])
        self.assertEqual(b.stop(), 0)

        # While B is down: more than the cap of new entries (in repositories that sort after the old
        # ones, so the old pages stay alike), and moves and deletes in the last old repository.
        samples = []
        pushed = []  # (time, entries written so far)
        written = 0

        def sample():
            got = self.entries(a)
            now = time.monotonic()
            recent = written - next((n for t, n in pushed if t >= now - 3.0), written)
            samples.append((got, recent))

        new_store_count = 800
        names = [f"zz/r{i}" for i in range(2)]
        for repo in names:
            a.push_blob(repo, CONFIG)
            a.push_blob(repo, self.store.layer)
        conn = a.conn()
        try:
            for i in range(new_store_count):
                repo, tag = names[i % 2], f"n{i}"
                body = self.store.manifest(f"{repo}/{tag}")
                conn.request("PUT", f"/v2/{repo}/manifests/{tag}", body=body,
                             headers={"Content-Type": bt.OCI_MANIFEST})
                r = conn.getresponse()
                r.read()
                self.assertEqual(r.status, 201, f"PUT {repo}:{tag}")
                self.store.tags[(repo, tag)] = body
                written += 2  # a manifest and a tag entry
                pushed.append((time.monotonic(), written))
                if i % 100 == 99:
                    sample()
        finally:
            conn.close()
        mutate(self, a, self.store, self.rng, "while-down", 3, repos=["old/r4"])

        # The cap wins over B's cursor: A keeps its last CAP entries.
        bt.poll(lambda: self.entries(a) <= CAP, 15, 0.1, f"A's change log back under {CAP} entries")
        for got, recent in samples:
            self.assertLessEqual(got, CAP + recent + 10, f"log entries while pushing: {samples}")
        status, doc = self.log(a, cursor)
        self.assertEqual(status, 410, f"log after B's cursor {cursor}: {doc}")
        self.assertEqual(doc["entries"], [])
        first, head = doc["first"], doc["head"]
        self.assertGreater(first, cursor + 1)
        self.assertEqual(head, a.status()["log_head"])
        self.assertEqual(head - first + 1, self.entries(a))
        self.assertLessEqual(head - first + 1, CAP)
        # The edges of what is kept.
        status, doc = self.log(a, first - 1)
        self.assertEqual(status, 200, doc)
        self.assertEqual(doc["entries"][0]["seq"], first, doc)
        status, doc = self.log(a, first - 2)
        self.assertEqual(status, 410, doc)
        self.assertEqual(self.log(a, head), (200, {"replica": "berth-0", "epoch": doc["epoch"], "head": head,
                                                   "first": first, "filling": False, "entries": []}))

        total_records = (2 * (old_repos + len(names)) + len(set(self.store.tags.values()))
                         + len(self.store.gone_manifests) + len(self.store.tags) + len(self.store.gone_tags))
        b.restart()
        lines = self.wait_readyz_after_bootstrap(b)
        msgs = messages(lines)
        self.assertIn("peer compacted its log past this replica's cursor; re-bootstrapping", msgs)
        starts = [line for line in lines if line.get("msg") == "bootstrapping from peer"]
        self.assertEqual(len(starts), 1, msgs)
        self.assertTrue(starts[0].get("incremental"), starts[0])
        done = finished_lines(lines)
        self.assertEqual(len(done), 1, msgs)
        done = done[0]
        # Pages B holds alike are skipped (an empty part's page counts as skipped too, so the records
        # tell): the old repositories' first pages of images and of tags are at least two full pages.
        self.assertGreater(done["pages_skipped"], 2, f"too few pages skipped in an incremental re-bootstrap: {done}")
        self.assertLessEqual(done["records"], total_records - 2 * PAGE,
                             f"the re-bootstrap transferred (nearly) everything: {done}")
        c.wait_caught_up(CONVERGE)
        print(f"\n  re-bootstrap: {done}, log kept {first}..{head}, records ~{total_records}", file=sys.stderr)

        self.expect_tag_lists(a, "(the serving replica)")
        self.expect_tag_lists(b, "after an incremental re-bootstrap")
        self.expect_gone(b, "after an incremental re-bootstrap")
        a.stop()
        self.expect_tag_lists(b, "after an incremental re-bootstrap, A stopped")
        self.expect_manifests(b, 300, "after an incremental re-bootstrap, A stopped")
        self.expect_gone(b, "after an incremental re-bootstrap, A stopped")

    def test_log_request_for_compacted_entries_is_410(self):
        c = self.cluster
        a = c[0]
        c.assign_ports()
        a.start()  # B never runs: no peer has read anything, so the window alone decides
        fill(a, self.store, "gone", 2, 200, threads=2)
        bt.poll(lambda: self.entries(a) == 0, 15, 0.1, "A's change log compacted after the window")
        head = a.status()["log_head"]
        self.assertGreater(head, 400)
        status, doc = self.log(a, 1)
        self.assertEqual(status, 410, doc)
        self.assertGreater(doc["first"], 2, doc)
        self.assertEqual(doc["first"], head + 1, doc)
        self.assertEqual(doc["head"], head, doc)
        self.assertEqual(doc["entries"], [], doc)
        status, doc = self.log(a, head)  # nothing after the head: not an error
        self.assertEqual(status, 200, doc)
        self.assertEqual(doc["entries"], [], doc)
        r = a.peer_request("GET", "log?after=1", secret="wrong")  # and the answer is for peers only
        self.assertIn(r.status, (401, 403), r)


if __name__ == "__main__":
    unittest.main(verbosity=2)
