#!/usr/bin/env python3
"""The pollers' feed (GET /_berth/v1/events) and rebuild alerts, against one real berth.

- Feed: pushes, tag moves and a delete read back a page at a time (n=3) following the cursor in
  `Link`: every event once, in sequence order, with the same ids an endpoint receives; `more` is
  false at the end; a repository glob narrows it; a cursor that is not one is 400.
- Rights: with htpasswd auth, alice's feed holds alice/** only; anonymous callers get 401; each
  event names its principal (root, who pushed) to operators (root), not to alice.
- Behind: with a 1 s log retention, a cursor taken before changes the log has since dropped is
  410 with the oldest cursor, from which the feed goes on.
- Rebuild: base/os:1 under a base_images policy moves from one image to another; the `rebuild`
  event (to an endpoint asking only for rebuild, and in the feed with the same id) names every
  image built on the old version (tagged ones with their tags, an untagged one by digest), and
  none built on the new one, even where the new one begins with the old one's layers. 130 images
  built on it come as two events, page 0 and the last page 1. An endpoint scoped to some
  repositories lists only their images; a Distribution-format endpoint gets no rebuild unless it
  asks for it.
- Pulls: with pull_interval_seconds 1, an endpoint asking for `pull` hears 40 GETs of app/x (by
  tag and digest) and 1 of app/y counted per repository and digest (HEADs are not pulls), while
  another pull endpoint hangs: the 40 pulls take well under its timeout; other endpoints hear of no
  pulls.
- Pulls only count where they were served to someone who may pull, for an endpoint that hears of
  them: an out-of-scope repository, a 401, two 404s and a HEAD are no pulls. A receiver refusing
  pull counts (400) while asking changes to wait (503, Retry-After 30): the counts are dropped
  and counted (status `pull_counts.dropped`), not dead-lettered, and the changes are not tried
  again early.
- A glob that costs much over many long names (700 names of 226 characters, 256 characters and
  16 stars) ends a page with `more` at the request's glob budget instead of computing on; the
  cursor reaches the end.
- Hardening: feed cursors are sealed (a changed one is 400) and survive a restart; a glob of 16
  stars answers at once, one of 17 is 400; who pushed is shown to operators only.
"""

import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
from test_notifications import Receiver  # noqa: E402

EVENTS = "/_berth/v1/events"


def read_feed(b, after="", n=3, repository=None, headers=None, pages=200):
    """Every event the feed gives from `after` until `more` is false: (events, last cursor)."""
    events, cursor = [], after
    for _ in range(pages):
        path = f"{EVENTS}?n={n}" + (f"&after={cursor}" if cursor else "") + \
            (f"&repository={repository}" if repository else "")
        r = b.get(path, headers=headers or {})
        assert r.status == 200, r
        doc = r.json()
        assert len(doc["events"]) <= n + 2, doc  # a stamp's events are never split
        link = r.header("Link")
        assert link and f"after={doc['cursor']}" in link and 'rel="next"' in link, link
        events += doc["events"]
        cursor = doc["cursor"]
        if not doc["more"]:
            return events, cursor
    raise AssertionError("the feed never ended")


def actions(events):
    return [(e["data"]["action"], e["data"]["repository"], e["data"].get("tag"), e["data"].get("digest"))
            for e in events]


class FeedTest(unittest.TestCase):
    def test_pages_in_order_with_the_endpoints_ids(self):
        rx = Receiver(self)
        b = bt.serve(self.addCleanup, lambda b: {"notifications": {"endpoints": [{"name": "ci", "url": rx.url()}]}})
        images = [b.push_image("app/one", "v1"), b.push_image("app/two", "v1"), b.push_image("app/one", "v1"),
                  b.push_image("lib/x", "latest")]
        r = b.request("DELETE", f"/v2/app/one/manifests/{images[0]['digest']}")
        self.assertEqual(r.status, 202, r)
        expected = []
        for img in images:
            expected += [("push", img["repo"], None, img["digest"]), ("tag", img["repo"], img["tag"], img["digest"])]
        expected.append(("delete", "app/one", None, images[0]["digest"]))

        events = bt.poll(lambda: (lambda got: len(got) >= len(expected) and got)(read_feed(b)[0]), 15, 0.1,
                         "every change in the feed")
        self.assertEqual(actions(events), expected)
        sequences = [e["sequence"] for e in events]
        self.assertEqual(sequences, sorted(sequences))
        self.assertEqual(len({e["id"] for e in events}), len(events))
        # The endpoint hears of the same changes under the same ids.
        bt.poll(lambda: len(rx.delivered()) >= len(expected), 15, 0.1, "the endpoint's deliveries")
        self.assertEqual([e["id"] for e in rx.delivered()], [e["id"] for e in events])

        # From the end, nothing more until something changes; then only that.
        _, cursor = read_feed(b)
        self.assertEqual(read_feed(b, cursor)[0], [])
        late = b.push_image("app/two", "v2")
        got = bt.poll(lambda: read_feed(b, cursor)[0], 15, 0.1, "the new push")
        self.assertEqual(actions(got), [("push", "app/two", None, late["digest"]),
                                        ("tag", "app/two", "v2", late["digest"])])

        # A glob narrows it.
        self.assertEqual({e["data"]["repository"] for e in read_feed(b, repository="app/**")[0]},
                         {"app/one", "app/two"})
        self.assertEqual({e["data"]["repository"] for e in read_feed(b, repository="lib/*")[0]}, {"lib/x"})
        # Cursors are sealed: they say nothing readable, a changed one is refused, and one survives
        # a restart (a lone replica keeps its sealing key in its index).
        self.assertTrue(cursor.startswith("~"), cursor)
        tampered = cursor[:-4] + ("AAAA" if not cursor.endswith("AAAA") else "BBBB")
        self.assertEqual(b.get(f"{EVENTS}?after={tampered}").status, 400)
        b.stop()
        b.restart()
        self.assertEqual(read_feed(b, cursor)[0][-2:], got)
        # A caller's glob costs the product of the lengths, has at most 16 stars, and one with
        # other characters is refused.
        r = b.get(f"{EVENTS}?repository={'*' * 16}q", timeout=5)
        self.assertEqual((r.status, r.json()["events"]), (200, []))
        self.assertEqual(b.get(f"{EVENTS}?repository={'*' * 17}").status, 400)
        self.assertEqual(b.get(f"{EVENTS}?repository=a%0Ab").status, 400)
        for bad in ("not-a-cursor", "eyJ4IjoxfQ", "~" + "A" * 5000):
            with self.subTest(cursor=bad[:20]):
                r = b.get(f"{EVENTS}?after={bad}")
                self.assertEqual(r.status, 400, r)
                self.assertIn("cursor", r.json()["errors"][0]["message"])

    def test_a_costly_glob_pages_instead_of_stalling(self):
        """700 repositories of 226-character names, then one the 256-character glob of 16 stars
        matches: a request spends at most its glob budget (about 570 such names) and ends its page
        with `more` and no event, its cursor moved on; following it gives the matching one's events
        once."""
        b = bt.serve(self.addCleanup, {})
        first = "a" * 220 + "/r0000"
        img = bt.make_image((64,))
        for digest, data in img["blobs"].items():
            self.assertEqual(b.request("POST", f"/v2/{first}/blobs/uploads/?digest={digest}", body=data).status, 201)
        matching = "a" * 239 + "z"  # the glob below matches it, and only it
        for i in range(701):  # the same image in each, its blobs mounted from the first
            name = "a" * 220 + f"/r{i:04d}" if i < 700 else matching
            for digest in img["blobs"] if i else ():
                m = b.request("POST", f"/v2/{name}/blobs/uploads/?mount={digest}&from={first}")
                self.assertEqual(m.status, 201, m)
            r = b.request("PUT", f"/v2/{name}/manifests/v1", body=img["manifest"],
                          headers={"Content-Type": bt.OCI_MANIFEST})
            self.assertEqual(r.status, 201, r)
        img_digest = r.header("Docker-Content-Digest")
        glob = ("a" * 15 + "*") * 15 + "a" * 15 + "z"  # 16 stars, 256 characters
        self.assertEqual((len(glob), glob.count("*")), (256, 15))
        glob = "*" + glob[1:]
        bt.poll(lambda: b.metrics().get("berth_changelog_entries", 0) >= 1402, 10, 0.1, "every change logged")
        r = b.get(f"{EVENTS}?n=1000&repository={glob}")
        self.assertEqual(r.status, 200, r)
        doc = r.json()
        self.assertEqual(doc["events"], [])
        self.assertTrue(doc["more"], "the glob budget did not end the page")
        events, _ = read_feed(b, doc["cursor"], n=1000, repository=glob, pages=10)
        self.assertEqual(sorted(actions(events)), sorted([("push", matching, None, img_digest),
                                                          ("tag", matching, "v1", img_digest)]))

    def test_filtered_by_pull_rights(self):
        passwords = {"root": "root-pw", "alice": "alice-pw"}
        b = bt.serve(self.addCleanup, {"auth": {"htpasswd": "htpasswd", "rules": [
            {"repository": "**", "principals": ["user:root"], "actions": ["pull", "push", "delete"]},
            {"repository": "${user}/**", "principals": ["authenticated"], "actions": ["pull", "push"]}]},
            "notifications": {"operators": ["user:root"]}}, passwords)
        root, alice = bt.basic_auth("root", "root-pw"), bt.basic_auth("alice", "alice-pw")
        for repo in ("alice/app", "bob/app", "alice/lib"):
            push_as(self, b, repo, "v1", root)
        everything = bt.poll(lambda: (lambda e: len(e) >= 6 and e)(read_feed(b, headers=root)[0]), 15, 0.1,
                             "root's feed")
        self.assertEqual({e["data"]["repository"] for e in everything}, {"alice/app", "bob/app", "alice/lib"})
        self.assertEqual({e["data"].get("principal") for e in everything}, {"root"})
        mine = read_feed(b, headers=alice, n=1)[0]
        self.assertEqual({e["data"]["repository"] for e in mine}, {"alice/app", "alice/lib"})
        self.assertEqual(len(mine), 4)
        self.assertFalse([e for e in mine if "principal" in e["data"]], "who pushed is for operators")
        self.assertEqual(b.get(EVENTS).status, 401)

    def test_a_poller_behind_the_log_is_told_where_to_start(self):
        b = bt.serve(self.addCleanup, {"replication": {"log_retention_seconds": 1}})
        start = read_feed(b)[1]
        pushed = [b.push_image("app/old", "v1") for _ in range(2)]
        # The log drops what is older than a second; until then the feed still has it all.
        bt.poll(lambda: b.get(f"{EVENTS}?after={start}").status == 410, 30, 0.2, "the log compacted")
        r = b.get(f"{EVENTS}?after={start}")
        doc = r.json()
        self.assertEqual(doc["errors"][0]["code"], "CURSOR_EXPIRED")
        oldest = doc["oldest"]
        self.assertEqual(doc["errors"][0]["detail"]["oldest"], oldest)
        self.assertIn("rel=\"first\"", r.header("Link"))
        # From the oldest cursor: what the log still holds, and what comes next.
        newer = b.push_image("app/new", "v1")
        events = bt.poll(lambda: (lambda e: e and e)(read_feed(b, oldest)[0]), 15, 0.1, "events after the oldest")
        digests = {e["data"]["digest"] for e in events}
        self.assertIn(newer["digest"], digests)
        self.assertFalse(digests & {p["digest"] for p in pushed}, "compacted events came back")


class RebuildTest(unittest.TestCase):
    def push_on(self, b, repo, ref, layers):
        img = bt.image_of(layers)
        for data in img["blobs"].values():
            b.push_blob(repo, data)
        r = b.put_manifest(repo, ref or img["digest"], img["manifest"])
        self.assertEqual(r.status, 201, r)
        return img["digest"]

    def test_rebuild_lists_what_was_built_on_the_old_base(self):
        rx, scoped, legacy = Receiver(self), Receiver(self), Receiver(self)
        b = bt.serve(self.addCleanup, lambda b: {
            "policies": [{"repositories": ["apps/**"], "base_images": ["base/os:1*"]}],
            "notifications": {"endpoints": [
                {"name": "sec", "url": rx.url(), "actions": ["rebuild"]},
                {"name": "team-a", "url": scoped.url(), "repositories": ["base/**", "apps/a"], "actions": ["rebuild"]},
                {"name": "legacy", "url": legacy.url(), "format": "distribution"}]}})
        base_layer = os.urandom(300)
        old = self.push_on(b, "base/os", "1", [base_layer])
        a = self.push_on(b, "apps/a", "v1", [base_layer, os.urandom(100)])
        self.assertEqual(b.put_manifest("apps/a", "stable", b.get("/v2/apps/a/manifests/v1").body).status, 201)
        c = self.push_on(b, "apps/c", None, [base_layer, os.urandom(100)])
        # The new base adds a layer to the old one: what is built on it begins with the old layers too.
        patch = os.urandom(200)
        new = self.push_on(b, "base/os", "1", [base_layer, patch])
        on_new = self.push_on(b, "apps/e", "v1", [base_layer, patch, os.urandom(100)])
        self.assertNotEqual(old, new)

        got = bt.poll(lambda: rx.delivered(), 15, 0.1, "a rebuild event")
        self.assertEqual(len(got), 1, got)
        event = got[0]
        self.assertEqual(event["type"], "io.berth.rebuild")
        data = event["data"]
        self.assertEqual((data["repository"], data["tag"], data["digest"], data["previous"]),
                         ("base/os", "1", new, old))
        images = {(i["repository"], i.get("tag"), i["digest"]) for i in data["images"]}
        self.assertEqual(images, {("apps/a", "v1", a), ("apps/a", "stable", a), ("apps/c", None, c)})
        self.assertNotIn(on_new, {i["digest"] for i in data["images"]})
        self.assertEqual((data["page"], data["lastPage"]), (0, True))
        # An endpoint hears only of images in the repositories it is told of.
        scoped_got = bt.poll(lambda: scoped.delivered(), 15, 0.1, "team-a's rebuild event")
        self.assertEqual(scoped_got[0]["id"], event["id"])
        self.assertEqual({i["repository"] for i in scoped_got[0]["data"]["images"]}, {"apps/a"})
        # Distribution's envelope has no rebuild action: such endpoints hear of one only when they ask.
        bt.poll(lambda: len(legacy.requests("ok")) >= 9, 15, 0.1, "the legacy endpoint's pushes")
        legacy_actions = {e["action"] for req in legacy.requests("ok") for e in json.loads(req.body)["events"]}
        self.assertEqual(legacy_actions, {"push"})
        # The feed tells it with the same id, right after the tag's move.
        feed = bt.poll(lambda: [e for e in read_feed(b, n=50)[0] if e["type"] == "io.berth.rebuild"], 15, 0.1,
                       "the rebuild in the feed")
        self.assertEqual([e["id"] for e in feed], [event["id"]])

    def test_many_images_come_in_pages(self):
        rx = Receiver(self)
        b = bt.serve(self.addCleanup, lambda b: {
            "policies": [{"repositories": ["apps/**"], "base_images": ["base/os:*"]}],
            "notifications": {"endpoints": [{"name": "sec", "url": rx.url(), "actions": ["rebuild"]}]}})
        base_layer = os.urandom(300)
        self.push_on(b, "base/os", "2", [base_layer])
        built = {self.push_on(b, f"apps/n{i % 7}", f"t{i}", [base_layer, os.urandom(50)]) for i in range(130)}
        self.push_on(b, "base/os", "2", [os.urandom(300)])
        got = bt.poll(lambda: (lambda d: len(d) >= 2 and d)(rx.delivered()), 30, 0.1, "two rebuild events")
        self.assertEqual([(e["data"]["page"], e["data"]["lastPage"]) for e in got], [(0, False), (1, True)])
        self.assertEqual([len(e["data"]["images"]) for e in got], [100, 30])
        self.assertEqual({i["digest"] for e in got for i in e["data"]["images"]}, built)
        self.assertEqual(len({e["id"] for e in got}), 2)
        self.assertLess(got[0]["sequence"], got[1]["sequence"])



class PullEventsTest(unittest.TestCase):
    def test_pulls_counted_per_repository_and_digest(self):
        counts = Receiver(self)
        slow = Receiver(self, answer=lambda req: time.sleep(2) or (200, b"", {}))
        b = bt.serve(self.addCleanup, {"notifications": {"pull_interval_seconds": 1, "endpoints": [
            {"name": "counts", "url": counts.url(), "actions": ["pull"]},
            {"name": "slow", "url": slow.url(), "actions": ["pull"], "timeout_seconds": 1},
            {"name": "changes", "url": counts.url("/changes")}]}})
        x, y = b.push_image("app/x", "v1"), b.push_image("app/y", "v1")
        started = time.monotonic()
        for ref in ["v1"] * 25 + [x["digest"]] * 15:
            self.assertEqual(b.get(f"/v2/app/x/manifests/{ref}", headers={"Accept": bt.OCI_MANIFEST}).status, 200)
        took = time.monotonic() - started
        self.assertEqual(b.get("/v2/app/y/manifests/v1", headers={"Accept": bt.OCI_MANIFEST}).status, 200)
        for _ in range(3):  # a HEAD is no pull
            self.assertEqual(b.head("/v2/app/x/manifests/v1").status, 200)
        # A receiver that hangs slows no pull: 40 of them took well under its one hang.
        self.assertLess(took, 2.0, f"40 pulls took {took:.2f}s")

        def pulls():
            got = {}
            for req in counts.requests("ok"):
                if req.path != "/hook":
                    continue
                for e in json.loads(req.body) if req.body.startswith(b"[") else [json.loads(req.body)]:
                    self.assertEqual(e["type"], "io.berth.pull")
                    key = (e["data"]["repository"], e["data"]["digest"])
                    got[key] = got.get(key, 0) + e["data"]["count"]
            return got
        want = {("app/x", x["digest"]): 40, ("app/y", y["digest"]): 1}
        bt.poll(lambda: pulls() == want, 15, 0.1, f"pull counts {want}")
        events = [json.loads(req.body) for req in counts.requests("ok") if req.path == "/hook"]
        self.assertEqual(len({e["id"] for e in events}), len(events))
        for e in events:
            self.assertTrue(e["data"]["replica"])
            self.assertLessEqual(e["data"]["firstPull"], e["time"])
        # Endpoints that do not ask for pulls hear of none.
        changes = [json.loads(req.body)["type"] for req in counts.requests("ok") if req.path == "/changes"]
        self.assertNotIn("io.berth.pull", changes)
        self.assertIn("io.berth.push", changes)

    def test_only_served_pulls_an_endpoint_hears_of_are_counted(self):
        counts = Receiver(self)
        passwords = {"root": "root-pw"}
        b = bt.serve(self.addCleanup, {
            "auth": {"htpasswd": "htpasswd", "rules": [
                {"repository": "**", "principals": ["user:root"], "actions": ["pull", "push"]}]},
            "notifications": {"pull_interval_seconds": 1, "endpoints": [
                {"name": "prod", "url": counts.url(), "actions": ["pull"], "repositories": ["prod/**"]}]}}, passwords)
        root = bt.basic_auth("root", "root-pw")
        accept = {"Accept": bt.OCI_MANIFEST}
        app = push_as(self, b, "prod/app", "v1", root)
        pub = push_as(self, b, "pub/x", "v1", root)
        self.assertEqual(b.get("/v2/pub/x/manifests/v1", headers={**root, **accept}).status, 200)  # out of scope
        self.assertEqual(b.get("/v2/prod/app/manifests/v1", headers=accept).status, 401)  # not served
        self.assertEqual(b.get("/v2/prod/app/manifests/v2", headers={**root, **accept}).status, 404)
        self.assertEqual(b.get(f"/v2/prod/app/manifests/{pub}", headers={**root, **accept}).status, 404)
        self.assertEqual(b.head("/v2/prod/app/manifests/v1", headers=root).status, 200)
        for ref in ("v1", app):
            self.assertEqual(b.get(f"/v2/prod/app/manifests/{ref}", headers={**root, **accept}).status, 200)

        def counted():  # two GETs may fall in two intervals: summed
            got = {}
            for e in counts.delivered():
                key = (e["data"]["repository"], e["data"]["digest"])
                got[key] = got.get(key, 0) + e["data"]["count"]
            return got
        bt.poll(lambda: sum(counted().values()) >= 2, 15, 0.1, "two pulls counted")
        self.assertEqual(counted(), {("prod/app", app): 2})
        metrics = b.metrics()
        self.assertEqual(metrics.get("berth_notify_pulls_uncounted_total"), 0)
        self.assertEqual(metrics.get('berth_notify_pulls_dropped_total{endpoint="prod"}'), 0)

    def test_pull_counts_keep_off_the_changes_backoff(self):
        """A receiver that refuses pull counts (400) and asks changes to wait (503, Retry-After 30):
        the refused counts are dropped and counted, not dead-lettered, and do not hurry the changes'
        next try."""
        def answer(req):
            kinds = {e["type"] for e in json.loads(req.body)} if req.body.startswith(b"[") else \
                {json.loads(req.body)["type"]}
            return (400, b"", {}) if kinds == {"io.berth.pull"} else (503, b"", {"Retry-After": "30"})
        rx = Receiver(self, answer=answer)
        b = bt.serve(self.addCleanup, {"notifications": {"pull_interval_seconds": 1, "endpoints": [
            {"name": "ci", "url": rx.url(), "actions": ["push", "tag", "pull"]}]}})
        for i in range(20):
            b.push_image(f"app/x{i}", "v1")
        for i in range(20):
            self.assertEqual(b.get(f"/v2/app/x{i}/manifests/v1", headers={"Accept": bt.OCI_MANIFEST}).status, 200)

        def status():
            return b.get("/_berth/v1/notifications").json()["endpoints"][0]
        bt.poll(lambda: status()["pull_counts"]["dropped"] == 20, 15, 0.1, "20 refused pull counts dropped")
        changes = [req for req in rx.requests() if b"io.berth.pull" not in req.body]
        self.assertEqual(len(changes), 1, "the changes were tried again before their Retry-After")
        self.assertEqual(status()["dead_lettered"], 0)
        dead = b.get("/_berth/v1/notifications/ci/dead-letters").json()
        self.assertFalse([e for e in dead.get("events", []) if e["type"] == "io.berth.pull"], dead)


def push_as(test, b, repo, tag, headers):
    """Pushes a one-layer image with `headers` (credentials); returns its manifest's digest."""
    img = bt.make_image((64,))
    for data in img["blobs"].values():
        r = b.request("POST", f"/v2/{repo}/blobs/uploads/?digest={bt.sha256_digest(data)}", body=data,
                      headers={**headers, "Content-Type": "application/octet-stream"})
        test.assertEqual(r.status, 201, r)
    r = b.request("PUT", f"/v2/{repo}/manifests/{tag}", body=img["manifest"],
                  headers={**headers, "Content-Type": bt.OCI_MANIFEST})
    test.assertEqual(r.status, 201, r)
    return r.header("Docker-Content-Digest")


if __name__ == "__main__":
    unittest.main(verbosity=2)
