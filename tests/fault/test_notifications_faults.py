#!/usr/bin/env python3
"""Events are never lost, under faults of the replicas and of the receiver.

Three replicas (write quorum) tell one receiver, a small HTTP server on loopback that records
every delivery, of pushes, tag moves and deletes sent to random replicas. Through the run:

- the replica delivering is killed with SIGKILL and later restarted;
- another replica is frozen with SIGSTOP and thawed;
- the receiver is down (its port closed), then answers 500, then hangs past the endpoint's
  timeout, then recovers.

At the end, polled until it holds or the deadline passes:
- every acknowledged change is in the receiver's record: each pushed manifest's "push", each tag
  set's "tag" (repository, tag and digest), each deleted manifest's "delete";
- duplicates share their id, and one id always names the same change;
- each repository's events, first delivery of each id, are in stamp ("sequence") order;
- no event names a manifest that no client tried to push.

A poller of the feed (GET /_berth/v1/events) follows its cursor through the same run, each page
from a random live replica: at the end it has seen every acknowledged change, each id once, and
each repository's events in stamp order.
"""

import http.server
import json
import os
import random
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
from berthcluster import Cluster  # noqa: E402

REPOS = ["team/api", "team/web"]
TAGS = ["stable", "v1", "v2"]


class Receiver:
    """Records every POST; its mode says how it answers: ok, error (500), hang (never answers
    within the endpoint's timeout). down() closes its port; up() opens the same port again."""

    def __init__(self):
        self.mode = "ok"
        self.record = []  # parsed CloudEvents, in arrival order
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.port = bt.free_port()
        self.server = None
        self.up()

    def up(self):
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                mode = receiver.mode
                if mode == "hang":
                    receiver.release.wait(5)
                    return
                if mode == "ok":
                    with receiver.lock:
                        receiver.record.append(json.loads(body))
                self.send_response(200 if mode == "ok" else 500)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def down(self):
        self.server.shutdown()
        self.server.server_close()

    def close(self):
        self.release.set()
        self.down()

    def events(self):
        with self.lock:
            return list(self.record)


def changes_of(events):
    """(action, repository, tag of a tag event or "", digest) of each event."""
    got = set()
    for e in events:
        d = e["data"]
        got.add((d["action"], d["repository"], d.get("tag", "") if d["action"] == "tag" else "", d.get("digest", "")))
    return got


class Poller:
    """Follows the feed's cursor, each page from a replica chosen by the test."""

    def __init__(self):
        self.cursor = ""
        self.events = []

    def read(self, replicas, rng, pages=50):
        for _ in range(pages):
            replica = rng.choice(replicas)
            try:
                r = replica.get("/_berth/v1/events?n=5" + (f"&after={self.cursor}" if self.cursor else ""),
                                timeout=5)
            except OSError:
                continue
            assert r.status == 200, r
            doc = r.json()
            self.events += doc["events"]
            self.cursor = doc["cursor"]
            if not doc["more"]:
                return


class NotificationFaultsTest(unittest.TestCase):
    def setUp(self):
        self.rng = random.Random(int(os.environ.get("BERTH_SEED", "36")))
        self.receiver = Receiver()
        self.addCleanup(self.receiver.close)
        endpoint = {"name": "audit", "url": f"http://127.0.0.1:{self.receiver.port}/events",
                    "timeout_seconds": 1}
        self.cluster = Cluster(3, write_quorum="quorum", config={"notifications": {"endpoints": [endpoint]}})
        self.addCleanup(self.cluster.cleanup)
        self.cluster.start()
        self.expected = set()  # (action, repository, tag or "", digest)
        self.tried = set()     # every digest a client tried to push
        self.live = {repo: [] for repo in REPOS}  # digests pushed and not deleted
        self.poller = Poller()

    def alive(self):
        return [r for r in self.cluster if r.alive() and not r.frozen]

    def deliverer(self):
        for r in self.alive():
            state = r.get("/_berth/v1/notifications").json()["endpoints"][0]
            if state["delivering"]:
                return r
        return None

    def failures(self):
        return sum(r.get("/_berth/v1/notifications").json()["endpoints"][0]["failed"] for r in self.alive())

    def await_failures(self):
        """Until the replica delivering has failed to deliver once more than now."""
        before = self.failures()
        try:
            bt.poll(lambda: self.failures() > before, 30, 0.1, "a delivery failing")
        except AssertionError:
            for r in self.alive():
                print(r.replica_id, r.get("/_berth/v1/notifications").json(), r.status()["peers"], file=sys.stderr)
            raise

    def change(self, n):
        """n random changes through random live replicas; only acknowledged ones are expected. The
        poller reads the feed between them."""
        for i in range(n):
            if i % 3 == 0:
                self.poller.read(self.alive(), self.rng, pages=3)
            replica = self.rng.choice(self.alive())
            repo = self.rng.choice(REPOS)
            if self.live[repo] and self.rng.random() < 0.25:
                digest = self.live[repo].pop(self.rng.randrange(len(self.live[repo])))
                r = replica.request("DELETE", f"/v2/{repo}/manifests/{digest}")
                if r.status == 202:
                    self.expected.add(("delete", repo, "", digest))
                continue
            tag = self.rng.choice(TAGS)
            img = bt.make_image((256,), rng=self.rng)
            self.tried.add(img["digest"])
            try:
                for data in img["blobs"].values():
                    replica.push_blob(repo, data)
            except AssertionError:
                continue
            r = replica.put_manifest(repo, tag, img["manifest"])
            if r.status == 201:
                self.expected.add(("push", repo, "", img["digest"]))
                self.expected.add(("tag", repo, tag, img["digest"]))
                self.live[repo].append(img["digest"])

    def test_every_acknowledged_change_reaches_the_receiver_once_per_id_in_order(self):
        self.change(12)
        bt.poll(lambda: len(self.receiver.events()) > 0, 15, 0.1, "a first delivery")

        # The replica delivering dies; the others take over from what it told them.
        first = bt.poll(self.deliverer, 10, 0.1, "a replica delivering")
        first.kill()
        self.change(10)
        bt.poll(lambda: self.deliverer() not in (None, first), 15, 0.1, "another replica taking over")

        # The receiver is down, then failing, while a replica is frozen, then hangs: each phase
        # lasts until the replica delivering has met it.
        self.receiver.down()
        self.change(6)
        self.await_failures()
        frozen = self.rng.choice(self.alive())
        frozen.freeze()
        others = [r for r in self.alive() if r is not frozen]
        bt.poll(lambda: all(not p["reachable"] for r in others for p in r.status()["peers"]
                            if p["id"] == frozen.replica_id), 30, 0.1, "the frozen replica seen as unreachable")
        first.restart()
        self.receiver.up()
        self.receiver.mode = "error"
        self.change(6)
        self.await_failures()
        frozen.thaw()
        self.receiver.mode = "hang"
        self.change(6)
        self.await_failures()
        self.receiver.release.set()
        self.receiver.mode = "ok"
        self.change(6)
        self.cluster.wait_caught_up(60)

        def delivered():
            got = changes_of(self.receiver.events())
            return self.expected <= got
        try:
            bt.poll(delivered, 90, 0.2, "every acknowledged change at the receiver")
        except AssertionError:
            got = {(e["data"]["action"], e["data"]["repository"], e["data"].get("digest", ""))
                   for e in self.receiver.events()}
            missing = sorted(x for x in self.expected if (x[0], x[1], x[3]) not in got)
            print("missing:", missing[:10], file=sys.stderr)
            deleted = {x[3] for x in self.expected if x[0] == "delete"}
            for m in missing:
                heads = [r.head(f"/v2/{m[1]}/manifests/{m[3]}").status for r in self.alive()]
                log = []
                for r in self.alive():
                    entries = r.peer_request("GET", "log?after=0&limit=2000").json()["entries"]
                    log.append([e["event"] for e in entries if m[3] in e["event"]])
                print("DEBUG", m[3][:19], "deleted" if m[3] in deleted else "live", heads, log, file=sys.stderr)
            for r in self.alive():
                print(r.replica_id, r.get("/_berth/v1/notifications").json(), file=sys.stderr)
            print(self.cluster.dump_logs(), file=sys.stderr)
            raise

        def polled():
            self.poller.read(self.alive(), self.rng)
            got = changes_of(self.poller.events)
            return self.expected <= got
        try:
            bt.poll(polled, 60, 0.2, "every acknowledged change in the feed")
        except AssertionError:
            seen = changes_of(self.poller.events)
            print("missing from the feed:", sorted(self.expected - seen), file=sys.stderr)
            for e in self.receiver.events():
                d = e["data"]
                key = (d["action"], d["repository"], d.get("tag", "") if d["action"] == "tag" else "",
                       d.get("digest", ""))
                if key in self.expected - seen:
                    print("its event at the receiver:", e["id"], e["sequence"], file=sys.stderr)
            print("feed sequences:", [(e["sequence"], e["data"]["repository"]) for e in self.poller.events],
                  file=sys.stderr)
            raise
        ids = [e["id"] for e in self.poller.events]
        self.assertEqual(len(ids), len(set(ids)), "the feed gave an event twice")
        feed_order = {}
        for e in self.poller.events:
            feed_order.setdefault(e["data"]["repository"], []).append(e["sequence"])
        for repo, sequences in feed_order.items():
            self.assertEqual(sequences, sorted(sequences), f"{repo}'s events out of stamp order in the feed")

        events = self.receiver.events()
        by_id = {}
        for e in events:
            change = (e["type"], e["data"]["repository"], e["data"].get("tag"), e["data"].get("digest"),
                      e["sequence"])
            self.assertEqual(by_id.setdefault(e["id"], change), change, f"id {e['id']} names two changes")
            digest = e["data"].get("digest")
            if e["type"] == "io.berth.push":
                self.assertIn(digest, self.tried, "an event names a manifest nobody pushed")
        first_seen, order = set(), {}
        for e in events:
            if e["id"] in first_seen:
                continue
            first_seen.add(e["id"])
            order.setdefault(e["data"]["repository"], []).append(e["sequence"])
        for repo, sequences in order.items():
            self.assertEqual(sequences, sorted(sequences), f"{repo}'s events out of stamp order")
        duplicates = len(events) - len(first_seen)
        print(f"changes acknowledged: {len(self.expected)}, deliveries: {len(events)}, "
              f"duplicates (same id): {duplicates}", file=sys.stderr)

    def test_a_replica_that_has_not_read_its_peers_logs_gives_no_change_they_pushed_it(self):
        """A replica restarted where it cannot read its peers' logs (its peer list names closed
        ports), though they reach it and push it their new changes: the changes made while it was
        down are not here, the one pushed to it is. Its feed gives nothing while it has not heard
        its peers (a peer that stops answering holds events back for 30 s), so a poller that reads
        it, then another replica, misses none of them."""
        a, b, c = self.cluster
        c.kill()
        missed = [b.push_image("team/api", tag) for tag in TAGS]
        c.peers_override = [f"127.0.0.1:{bt.free_port()}", f"127.0.0.1:{bt.free_port()}"]
        c.restart()
        restarted = time.monotonic()
        last = bt.make_image((256,), rng=self.rng)
        for data in last["blobs"].values():  # where it cannot fetch them from the pusher
            c.push_blob("team/web", data)
            b.push_blob("team/web", data)
        self.assertEqual(b.put_manifest("team/web", "v1", last["manifest"]).status, 201)
        bt.poll(lambda: c.head(f"/v2/team/web/manifests/{last['digest']}").status == 200, 15, 0.05,
                "the manifest pushed to the restarted replica")
        self.assertEqual(c.head(f"/v2/team/api/manifests/{missed[0]['digest']}").status, 404)

        # Reads of its feed until well past the settle time of the pushed change (250 ms), and
        # within the 30 s its unanswering peers hold events back.
        poller = Poller()
        read_until = min(time.monotonic() + 2, restarted + 25)
        self.assertGreater(read_until - time.monotonic(), 1, "this machine took over 24 s to push one image")
        bt.poll(lambda: poller.read([c], self.rng) or time.monotonic() > read_until, 10, 0.1,
                "two seconds of reading the restarted replica's feed")
        given = changes_of(poller.events)
        self.assertFalse(any(x[3] == last["digest"] for x in given),
                         "a replica that has not read its peers' logs gave a change pushed to it")

        want = {("push", "team/api", "", img["digest"]) for img in missed} | {("push", "team/web", "", last["digest"])}
        bt.poll(lambda: poller.read([a], self.rng) or want <= changes_of(poller.events), 15, 0.1,
                "the poller reading another replica")


if __name__ == "__main__":
    unittest.main()
