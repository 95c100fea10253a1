#!/usr/bin/env python3
"""Notifications: berth tells HTTP(S) receivers (here tests/lib/fakehttp.py servers on loopback) of
what changed, from the change log, one POST per event (or per batch).

- CloudEvents: a push by tag, the tag moved to a second image, the first deleted by digest arrive as
  push, tag, push, tag, delete, with strictly increasing sequences (a push and its tag share the
  clock of their decision), unique 32-hex ids, the subject and data of each, the static and the
  file-read headers, and a Berth-Signature whose HMAC-SHA256 over "t.body" verifies with the secret.
- Distribution's envelope (format "distribution"): events[] with id, timestamp, action push/delete,
  target repository/digest/mediaType/size/length (tag on tag events), source.instanceID.
- Batched mode (max_batch 10): one push by tag is one POST of application/cloudevents-batch+json
  holding both of its events.
- Filters: repositories ["team/**"] and actions ["delete"] let through only the deletes in team/.
- A receiver that fails (500) hears of everything once it recovers, also across a kill -9 of berth
  while it fails; a re-sent event keeps its id; failed and retried are counted.
- Hostile receivers: a 302 is not followed (the Location's server hears nothing); a 200 with a 1 GiB
  body dripped out costs berth neither memory nor its health endpoint, and is not read to its end;
  one that never answers times out (timeout_seconds 1) and the event arrives once it answers; 429
  with Retry-After: 2 holds the next try back 2 s; 410 disables the endpoint (status and metric)
  until POST .../enable; an https receiver whose CA berth does not trust hears nothing, one with
  that CA in ca_file everything.
- Dead letters: with max_age_hours 0.001 an event a receiver keeps refusing is listed under
  /dead-letters (same id) and counted; later events are delivered, the dead one is not.
- Replay: POST .../replay?since=T re-delivers the changes since T with the same ids, not the older.
- Operators: with htpasswd auth only notifications.operators see the endpoints (403 DENIED for
  others); the replicas' progress route wants the peer secret (401).
- Bad endpoint configs stop the start with exit code 2, naming the key.

Every test has its own berth and receivers; waits are polls on what is awaited.
"""

import hashlib
import hmac
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
import fakehttp  # noqa: E402

CE = "application/cloudevents+json"
CE_BATCH = "application/cloudevents-batch+json"
DISTRIBUTION = "application/vnd.docker.distribution.events.v1+json"
NOTIFY = "/_berth/v1/notifications"
SECRET = "hook-secret-0123456789abcdef"
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
MIB = b"\0" * (1 << 20)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def events_of(body):
    """The CloudEvents of a request body: one object, or a batch's array."""
    doc = json.loads(body)
    return doc if isinstance(doc, list) else [doc]


class Receiver:
    """A fakehttp.FakeServer whose answer the test switches while berth delivers: `answer` is a
    status, or a function of the request giving (status, body, headers). Keeps (time, status, Seen)
    of every request it answered or is answering."""

    def __init__(self, test, answer=200, tls=None, name="receiver"):
        self.answer = answer
        self.lock = threading.Lock()
        self.log = []  # [time, status or None while answering, Seen]
        self.fake = fakehttp.FakeServer(self._answer, tls=tls, name=name)
        test.addCleanup(lambda: self.fake.errors and print(f"{name} answers raised: {self.fake.errors}",
                                                           file=sys.stderr))
        test.addCleanup(self.fake.close)

    def _answer(self, req):
        entry = [time.monotonic(), None, req]
        with self.lock:
            self.log.append(entry)
        answer = self.answer
        out = answer(req) if callable(answer) else (answer, b"", {})
        entry[1] = out[0]
        return out

    def url(self, path="/hook"):
        return self.fake.url + path

    def requests(self, status=None):
        """Seen of the requests answered so far (with `status`, or 2xx for "ok"), in arrival order."""
        with self.lock:
            log = list(self.log)
        if status == "ok":
            return [req for _, st, req in log if st is not None and 200 <= st < 300]
        return [req for _, st, req in log if status is None or st == status]

    def delivered(self):
        """CloudEvents of the requests answered 2xx, in arrival order."""
        return [e for req in self.requests("ok") for e in events_of(req.body)]

    def times(self):
        with self.lock:
            return [t for t, _, _ in self.log]


def status(b, name="ci"):
    r = b.get(NOTIFY)
    assert r.status == 200, r
    return next(e for e in r.json()["endpoints"] if e["name"] == name)


def metric(b, name, endpoint="ci"):
    return b.metrics().get(f'berth_notify_{name}{{endpoint="{endpoint}"}}')


class NotifyTest(unittest.TestCase):
    def berth(self, endpoints, passwords=None, extra=None, **notifications):
        """A started berth with these endpoints (dicts, or functions of the Berth giving one; "name"
        defaults to ci) and the rest of the config in extra; its notification log lines are printed
        if the test fails."""
        def configure(b):
            eps = [{"name": "ci", **(e(b) if callable(e) else e)} for e in endpoints]
            return {**(extra or {}), "notifications": {**notifications, "endpoints": eps}}
        b = bt.serve(self.addCleanup, configure, passwords)
        self.addCleanup(lambda: bt.failed(self) and print(
            "\n".join(line for line in b.stderr().splitlines() if "notif" in line)[-4000:], file=sys.stderr))
        return b

    def wait_delivered(self, rx, n, timeout=10):
        return bt.poll(lambda: len(rx.delivered()) >= n and rx.delivered(), timeout, 0.05,
                       f"{n} events delivered (so far {[e['type'] for e in rx.delivered()]})")

    def assert_healthy_quickly(self, b):
        started = time.monotonic()
        r = b.get("/healthz", timeout=5)
        took = time.monotonic() - started
        self.assertEqual(r.status, 200, r)
        self.assertLess(took, 1.0, f"/healthz took {took:.2f}s")


class CloudEventsTest(NotifyTest):
    def test_order_signature_headers_and_fields(self):
        rx = Receiver(self)
        b = self.berth([lambda b: {
            "url": rx.url(), "headers": {"X-Api": "v"},
            "header_files": {"Authorization": write(os.path.join(b.tmp, "auth"), "Bearer t0ken\n")},
            "secret_file": write(os.path.join(b.tmp, "secret"), SECRET + "\n")}])
        repo = "app/one"
        one = b.push_image(repo, "v1")
        self.wait_delivered(rx, 2)  # the manifest is still there when its push is told
        two = b.push_image(repo, "v1")
        self.wait_delivered(rx, 4)
        r = b.request("DELETE", f"/v2/{repo}/manifests/{one['digest']}")
        self.assertEqual(r.status, 202, r)
        events = self.wait_delivered(rx, 5)
        self.assertEqual(len(events), 5, [e["type"] for e in events])

        expected = [("push", f"{repo}@{one['digest']}", one), ("tag", f"{repo}:v1", one),
                    ("push", f"{repo}@{two['digest']}", two), ("tag", f"{repo}:v1", two),
                    ("delete", f"{repo}@{one['digest']}", one)]
        now = time.time()
        for e, (action, subject, img) in zip(events, expected):
            with self.subTest(action=action, subject=subject):
                self.assertEqual(e["specversion"], "1.0")
                self.assertEqual(e["type"], f"io.berth.{action}")
                self.assertEqual(e["source"], "/berth")
                self.assertEqual(e["subject"], subject)
                self.assertRegex(e["id"], r"^[0-9a-f]{32}$")
                self.assertRegex(e["time"], RFC3339)
                self.assertIsInstance(e["sequence"], str)
                self.assertEqual(e["datacontenttype"], "application/json")
                data = e["data"]
                self.assertEqual(data["action"], action)
                self.assertEqual(data["repository"], repo)
                self.assertEqual(data["digest"], img["digest"])
                self.assertTrue(data["replica"])
                if action == "tag":
                    self.assertEqual(data["tag"], "v1")
                else:
                    self.assertNotIn("tag", data)
                if action == "push":
                    self.assertEqual(data["mediaType"], bt.OCI_MANIFEST)
                    self.assertEqual(data["size"], len(img["manifest"]))
        sequences = [e["sequence"] for e in events]
        self.assertEqual(sequences, sorted(sequences), "sequences out of delivery order")
        self.assertEqual(len(set(sequences)), 5, sequences)
        clock = [s.split("-", 1)[0] for s in sequences]
        self.assertEqual(clock[0], clock[1], "a push and its tag are one decision")
        self.assertEqual(clock[2], clock[3], "a push and its tag are one decision")
        self.assertEqual(len({clock[0], clock[2], clock[4]}), 3, sequences)
        self.assertEqual(len({e["id"] for e in events}), 5, "ids are not unique")

        for req in rx.requests():
            with self.subTest(request=req):
                self.assertEqual((req.method, req.path), ("POST", "/hook"))
                self.assertEqual(req.header("Content-Type"), CE)
                self.assertEqual(req.header("X-Api"), "v")
                self.assertEqual(req.header("Authorization"), "Bearer t0ken")
                m = re.fullmatch(r"t=(\d+),sha256=([0-9a-f]{64})", req.header("Berth-Signature") or "")
                self.assertTrue(m, req.header("Berth-Signature"))
                self.assertLess(abs(int(m.group(1)) - now), 60)
                mac = hmac.new(SECRET.encode(), m.group(1).encode() + b"." + req.body, hashlib.sha256).hexdigest()
                self.assertEqual(m.group(2), mac, "Berth-Signature does not verify")
        bt.poll(lambda: status(b)["lag"]["events"] == 0, 5, 0.05, "no lag")
        st = status(b)
        self.assertEqual((st["delivered"], st["failed"], st["disabled"], st["delivering"]), (5, 0, False, True), st)
        self.assertEqual(metric(b, "delivered_total"), 5)
        self.assertEqual(metric(b, "delivering"), 1)
        r = b.get(f"{NOTIFY}/nope/dead-letters")
        self.assertEqual(r.status, 404, r)
        self.assertEqual(r.error_codes(), ["NAME_UNKNOWN"])

    def test_distribution_envelope(self):
        rx = Receiver(self)
        b = self.berth([{"url": rx.url("/events"), "format": "distribution"}])
        img = b.push_image("lib/app", "v2")
        bt.poll(lambda: len(rx.requests("ok")) >= 2, 10, 0.05, "the push's events")
        r = b.request("DELETE", f"/v2/lib/app/manifests/{img['digest']}")
        self.assertEqual(r.status, 202, r)
        bt.poll(lambda: len(rx.requests("ok")) >= 4, 10, 0.05, "the delete's events")
        events = []
        for req in rx.requests("ok"):
            self.assertEqual(req.header("Content-Type"), DISTRIBUTION)
            self.assertEqual(req.path, "/events")
            doc = json.loads(req.body)
            self.assertEqual(list(doc), ["events"])
            events += doc["events"]
        self.assertEqual([(e["action"], e["target"].get("tag")) for e in events],
                         [("push", None), ("push", "v2"), ("delete", "v2"), ("delete", None)])
        self.assertEqual(len({e["id"] for e in events}), 4)
        for i, e in enumerate(events):
            with self.subTest(event=i):
                self.assertIsInstance(e["id"], str)
                self.assertTrue(e["id"])
                self.assertRegex(e["timestamp"], RFC3339)
                self.assertIsInstance(e["source"]["instanceID"], str)
                target = e["target"]
                self.assertEqual(target["repository"], "lib/app")
                # A tag's delete names the tag alone, as Distribution's own does.
                self.assertEqual(target.get("digest", img["digest"]), img["digest"])
                if "tag" not in target or e["action"] == "push":
                    self.assertEqual(target["digest"], img["digest"])
                if e["action"] == "push":
                    self.assertEqual(target["mediaType"], bt.OCI_MANIFEST)
                    self.assertEqual(target["size"], len(img["manifest"]))
                    self.assertEqual(target["length"], target["size"])

    def test_batched_mode(self):
        rx = Receiver(self)
        b = self.berth([{"url": rx.url(), "max_batch": 10}])
        img = b.push_image("app/batch", "v1")
        bt.poll(lambda: metric(b, "delivered_total") == 2, 10, 0.05, "both events delivered")
        reqs = rx.requests()
        self.assertEqual(len(reqs), 1, reqs)
        self.assertEqual(reqs[0].header("Content-Type"), CE_BATCH)
        batch = json.loads(reqs[0].body)
        self.assertIsInstance(batch, list)
        self.assertEqual([(e["type"], e["subject"]) for e in batch],
                         [("io.berth.push", f"app/batch@{img['digest']}"), ("io.berth.tag", "app/batch:v1")])

    def test_repository_and_action_filters(self):
        rx = Receiver(self)
        b = self.berth([{"url": rx.url(), "repositories": ["team/**"], "actions": ["delete"]}])
        images = {repo: b.push_image(repo, "v1") for repo in ("other/x", "team/y", "team/deep/z")}
        for repo, img in images.items():
            r = b.request("DELETE", f"/v2/{repo}/manifests/{img['digest']}")
            self.assertEqual(r.status, 202, r)
        last = f"team/deep/z@{images['team/deep/z']['digest']}"
        bt.poll(lambda: any(e["subject"] == last for e in rx.delivered()), 10, 0.05, "the last delete")
        # Deliveries go in order: all that precedes the last delete has been told, or never will be.
        self.assertEqual([(e["type"], e["subject"]) for e in rx.delivered()],
                         [("io.berth.delete", "team/y:v1"), ("io.berth.delete", f"team/y@{images['team/y']['digest']}"),
                          ("io.berth.delete", "team/deep/z:v1"), ("io.berth.delete", last)])
        self.assertEqual(len(rx.requests()), 4)


class FailingReceiverTest(NotifyTest):
    def test_nothing_lost_while_failing_and_across_kill(self):
        rx = Receiver(self)
        b = self.berth([{"url": rx.url()}])
        first = b.push_image("app/down", "v0")
        self.wait_delivered(rx, 2)
        rx.answer = 500
        pushed = [first] + [b.push_image("app/down", f"v{i}") for i in (1, 2)]
        bt.poll(lambda: metric(b, "failed_total") >= 2 and metric(b, "retried_total") >= 1, 10, 0.05,
                "failures and retries counted")
        self.assertEqual(status(b)["delivered"], 2)
        self.assertTrue(status(b)["last_error"], status(b))
        self.assertGreaterEqual(status(b)["lag"]["events"], 1)
        b.kill()  # SIGKILL, mid-retry
        before = len(rx.requests())
        b.restart()
        bt.poll(lambda: len(rx.requests()) > before, 10, 0.05, "berth to try again after its restart")
        rx.answer = 200
        bt.poll(lambda: {e["data"]["digest"] for e in rx.delivered() if e["type"] == "io.berth.push"}
                >= {img["digest"] for img in pushed}, 15, 0.05, "every pushed digest delivered")
        bt.poll(lambda: status(b)["lag"]["events"] == 0, 10, 0.05, "no lag")
        self.assertGreaterEqual(metric(b, "failed_total"), 1)
        self.assertGreaterEqual(metric(b, "retried_total"), 1)
        tags = [e["subject"] for e in rx.delivered() if e["type"] == "io.berth.tag"]
        self.assertEqual(sorted(set(tags)), ["app/down:v0", "app/down:v1", "app/down:v2"])
        # Every attempt at one change, refused or taken, before or after the kill, has one id.
        ids = {}
        for req in rx.requests():
            for e in events_of(req.body):
                ids.setdefault(e["sequence"], set()).add(e["id"])
        self.assertEqual(len(ids), 6, sorted(ids))
        self.assertTrue(all(len(v) == 1 for v in ids.values()), ids)

    def test_dead_letters(self):
        rx = Receiver(self, answer=500)
        b = self.berth([{"url": rx.url(), "max_age_hours": 0.001}])
        dead = b.push_image("app/dead")  # by digest: one push event
        bt.poll(lambda: rx.requests(), 5, 0.05, "the first attempt")
        dead_id = events_of(rx.requests()[0].body)[0]["id"]

        def listed():
            r = b.get(f"{NOTIFY}/ci/dead-letters")
            return r.status == 200 and r.json()["events"]
        letters = bt.poll(listed, 15, 0.1, "the event dead-lettered")
        self.assertEqual([e["id"] for e in letters], [dead_id])
        self.assertEqual(letters[0]["subject"], f"app/dead@{dead['digest']}")
        self.assertGreaterEqual(metric(b, "dead_lettered_total"), 1)
        self.assertGreaterEqual(status(b)["dead_lettered"], 1)
        self.assertEqual(b.get(f"{NOTIFY}/ci/dead-letters?n=1&skip=1").json(), {"endpoint": "ci", "events": []})
        rx.answer = 200
        later = b.push_image("app/dead")
        bt.poll(lambda: rx.delivered(), 10, 0.05, "the later event delivered")
        self.assertEqual([e["subject"] for e in rx.delivered()], [f"app/dead@{later['digest']}"])
        self.assertNotIn(dead_id, [e["id"] for e in rx.delivered()])

    def test_replay_resends_with_the_same_ids(self):
        rx = Receiver(self)
        b = self.berth([{"url": rx.url()}])
        b.push_image("app/replay", "old")
        self.wait_delivered(rx, 2)
        since = int(time.time()) + 1
        bt.poll(lambda: time.time() >= since, 2, 0.02, "the next second")
        b.push_image("app/replay", "new")
        first = self.wait_delivered(rx, 4)[2:]
        r = b.request("POST", f"{NOTIFY}/ci/replay?since={since}")
        self.assertEqual(r.status, 202, r)
        again = self.wait_delivered(rx, 6)[4:]
        self.assertEqual([(e["id"], e["sequence"]) for e in again], [(e["id"], e["sequence"]) for e in first])
        bt.poll(lambda: status(b)["lag"]["events"] == 0, 5, 0.05, "replay done")
        self.assertEqual(len(rx.delivered()), 6, "the change before `since` came again")
        r = b.request("POST", f"{NOTIFY}/nope/replay?since={since}")
        self.assertEqual(r.status, 404, r)
        self.assertEqual(r.error_codes(), ["NAME_UNKNOWN"])
        # A time ahead (milliseconds for seconds) would mark everything sent: refused, nothing changed.
        r = b.request("POST", f"{NOTIFY}/ci/replay?since={int(time.time() * 1000)}")
        self.assertEqual(r.status, 400, r)
        self.assertEqual(r.error_codes(), ["UNSUPPORTED"])
        b.push_image("app/replay", "after")
        self.wait_delivered(rx, 8)


class HostileReceiverTest(NotifyTest):
    def test_redirect_is_not_followed(self):
        target = Receiver(self, name="target")
        rx = Receiver(self, answer=lambda req: (302, b"", {"Location": target.url()}))
        b = self.berth([{"url": rx.url()}])
        b.push_image("app/redir")
        bt.poll(lambda: metric(b, "failed_total") >= 2, 10, 0.05, "failed attempts counted")
        self.assertGreaterEqual(len(rx.requests()), 2)
        self.assertEqual(target.requests(), [])
        st = status(b)
        self.assertEqual(st["delivered"], 0, st)
        self.assertIn("302", st["last_error"])

    def test_huge_answer_body_is_not_read(self):
        stream = {"sent": 0, "ended": None}
        total = 1 << 30

        def answer(req):
            def pieces():
                try:
                    for _ in range(total // len(MIB)):
                        if rx.fake.stopping.wait(0.01):
                            return
                        stream["sent"] += len(MIB)
                        yield MIB
                finally:
                    stream["ended"] = time.monotonic()
            return 200, pieces(), {"Content-Length": str(total), "Content-Type": "application/octet-stream"}
        rx = Receiver(self, answer=answer)
        b = self.berth([{"url": rx.url()}])
        baseline = rss_kib(b.proc.pid)
        b.push_image("app/huge")
        bt.poll(lambda: stream["sent"], 10, 0.01, "the body to start")
        samples = []

        def sample():  # during the stream and a second on: berth's memory and its health endpoint
            started = time.monotonic()
            r = b.get("/healthz", timeout=5)
            samples.append((rss_kib(b.proc.pid), time.monotonic() - started, r.status))
            return len(samples) >= 10
        bt.poll(sample, 10, 0.1, "samples")
        self.assertEqual(metric(b, "delivered_total"), 1)
        self.assertEqual(metric(b, "failed_total"), 0)
        for rss, took, code in samples:
            self.assertEqual(code, 200)
            self.assertLess(took, 1.0, f"/healthz took {took:.2f}s")
            self.assertLess(rss - baseline, 100 * 1024, f"RSS grew from {baseline} to {rss} KiB")
        bt.poll(lambda: stream["ended"], 15, 0.05, "the body's stream to end")
        self.assertLess(stream["sent"], total, "berth read the whole answer body")
        self.assertEqual(len(rx.requests()), 1)

    def test_hanging_receiver_times_out(self):
        release = threading.Event()

        def hang(req):
            release.wait(30)
            return 200, b"", {}
        rx = Receiver(self, answer=hang)
        self.addCleanup(release.set)
        rx.fake.server.handle_error = lambda *args: None  # released answers meet closed connections
        b = self.berth([{"url": rx.url(), "timeout_seconds": 1}])
        img = b.push_image("app/hang")
        bt.poll(lambda: rx.requests(), 5, 0.05, "the first attempt")
        for _ in range(3):
            self.assert_healthy_quickly(b)
        bt.poll(lambda: metric(b, "failed_total") >= 1, 5, 0.05, "the attempt timed out")
        self.assertEqual(metric(b, "delivered_total"), 0)
        self.assert_healthy_quickly(b)
        rx.answer = 200
        release.set()
        events = self.wait_delivered(rx, 1)
        self.assertEqual(events[0]["subject"], f"app/hang@{img['digest']}")
        bt.poll(lambda: metric(b, "delivered_total") == 1, 5, 0.05, "delivered counted")

    def test_retry_after_is_honoured(self):
        def answer(req):  # the first try is told to come back in 2 s
            return (429, b"", {"Retry-After": "2"}) if len(rx.times()) == 1 else (200, b"", {})
        rx = Receiver(self, answer=answer)
        b = self.berth([{"url": rx.url()}])
        b.push_image("app/slow")
        self.wait_delivered(rx, 1)
        times = rx.times()
        self.assertEqual(len(times), 2)
        self.assertGreaterEqual(times[1] - times[0], 1.5, "retried before Retry-After")
        self.assertEqual(metric(b, "failed_total"), 1)
        self.assertEqual(metric(b, "retried_total"), 1)

    def test_retry_after_zero_is_no_reason_to_spin(self):
        def answer(req):
            return (503, b"", {"Retry-After": "0"}) if len(rx.times()) <= 2 else (200, b"", {})
        rx = Receiver(self, answer=answer)
        b = self.berth([{"url": rx.url()}])
        b.push_image("app/spin")
        self.wait_delivered(rx, 1)
        times = rx.times()
        self.assertEqual(len(times), 3, "one try per Retry-After: 0, not a loop")
        self.assertGreaterEqual(times[1] - times[0], 0.9)

    def test_an_event_the_receiver_refuses_is_dead_lettered_at_once(self):
        # A 413 says this event will never be taken: it must not hold up the ones after it.
        def answer(req):
            return (413, b"", {}) if "refused" in req.body.decode() else (200, b"", {})
        rx = Receiver(self, answer=answer)
        b = self.berth([{"url": rx.url()}])
        refused = b.push_image("app/refused")
        later = b.push_image("app/later")
        bt.poll(lambda: [e["subject"] for e in rx.delivered()] == [f"app/later@{later['digest']}"], 10, 0.05,
                "the later event past the refused one")
        letters = b.get(f"{NOTIFY}/ci/dead-letters").json()["events"]
        self.assertEqual([e["subject"] for e in letters], [f"app/refused@{refused['digest']}"])

    def test_pusher_chosen_fields_are_bounded(self):
        # An artifactType of 64 KiB in a manifest is not copied into every event about it.
        rx = Receiver(self)
        b = self.berth([{"url": rx.url()}])
        img = bt.make_image((512,))
        for data in img["blobs"].values():
            b.push_blob("app/big", data)
        manifest = json.loads(img["manifest"])
        manifest["artifactType"] = "application/x." + "a" * 65536
        body = json.dumps(manifest).encode()
        self.assertEqual(b.put_manifest("app/big", "v1", body).status, 201)
        events = self.wait_delivered(rx, 2)
        self.assertTrue(all("artifactType" not in e["data"] for e in events), events[0]["data"].keys())
        self.assertTrue(all(len(json.dumps(e)) < 4096 for e in events))

    def test_gone_disables_until_enabled(self):
        rx = Receiver(self, answer=410)
        b = self.berth([{"url": rx.url()}])
        b.push_image("app/gone")
        bt.poll(lambda: status(b)["disabled"], 10, 0.05, "the endpoint disabled")
        st = status(b)
        self.assertTrue(st["disabled_reason"], st)
        self.assertEqual(metric(b, "disabled"), 1)
        b.push_image("app/gone")
        count = len(rx.requests())
        self.assertEqual(count, 1)
        held = time.monotonic() + 1.0

        def still_quiet():  # fails at once on a request; true once a second has passed without
            self.assertEqual(len(rx.requests()), count, "a disabled endpoint was sent to")
            return time.monotonic() > held
        bt.poll(still_quiet, 3, 0.05, "a second without requests")
        rx.answer = 200
        self.assertEqual(b.request("POST", f"{NOTIFY}/nope/enable").status, 404)
        r = b.request("POST", f"{NOTIFY}/ci/enable")
        self.assertEqual(r.status, 202, r)
        events = self.wait_delivered(rx, 2)
        self.assertEqual([e["type"] for e in events], ["io.berth.push", "io.berth.push"])
        self.assertFalse(status(b)["disabled"])
        self.assertEqual(metric(b, "disabled"), 0)

    def test_tls_trust(self):
        def endpoints(b):
            ca, ca_key = bt.make_ca(b.tmp, "hook-ca")
            cert = bt.make_cert(b.tmp, "hook", ca, ca_key)
            rx.append(Receiver(self, tls=cert))
            return {"notifications": {"endpoints": [
                {"name": "plain", "url": rx[0].url("/untrusted")},
                {"name": "pinned", "url": rx[0].url("/trusted"), "ca_file": ca}]}}
        rx = []
        b = bt.serve(self.addCleanup, endpoints)
        img = b.push_image("app/tls")
        bt.poll(lambda: metric(b, "delivered_total", "pinned") == 1, 10, 0.05, "delivery with ca_file")
        bt.poll(lambda: metric(b, "failed_total", "plain") >= 2, 10, 0.05, "untrusted deliveries failed")
        self.assertEqual(rx[0].fake.seen("/untrusted"), [])
        self.assertEqual(metric(b, "delivered_total", "plain"), 0)
        self.assertTrue(status(b, "plain")["last_error"])
        self.assertEqual([e["subject"] for e in rx[0].delivered()], [f"app/tls@{img['digest']}"])


class OperatorsTest(NotifyTest):
    def test_only_operators(self):
        rx = Receiver(self)
        b = self.berth([{"url": rx.url()}], passwords={"alice": "alice-pw", "bob": "bob-pw"},
                       operators=["user:alice"], extra={"auth": {"htpasswd": "htpasswd"}})
        alice, bob = bt.basic_auth("alice", "alice-pw"), bt.basic_auth("bob", "bob-pw")
        r = b.get(NOTIFY, headers=alice)
        self.assertEqual(r.status, 200, r)
        self.assertEqual([e["name"] for e in r.json()["endpoints"]], ["ci"])
        self.assertEqual(b.get(f"{NOTIFY}/ci/dead-letters", headers=alice).status, 200)
        for method, path in [("GET", NOTIFY), ("GET", f"{NOTIFY}/ci/dead-letters"),
                             ("POST", f"{NOTIFY}/ci/replay?since=0"), ("POST", f"{NOTIFY}/ci/enable")]:
            with self.subTest(method=method, path=path):
                r = b.request(method, path, headers=bob)
                self.assertEqual(r.status, 403, r)
                self.assertEqual(r.error_codes(), ["DENIED"])
                self.assertNotEqual(b.request(method, path).status, 200)
        for headers in ({}, alice):
            r = b.get(f"{NOTIFY}/progress", headers=headers)
            self.assertEqual(r.status, 401, r)


    def test_a_token_with_an_access_list_is_no_operator(self):
        # alice is an operator when she signs in; a token she was given for one repository may do
        # what it lists, and it lists no notifications.
        key = os.path.join(tempfile.mkdtemp(prefix="berth-notify-key-"), "token.key")
        bt.gen_ec_key(key)
        rx = Receiver(self)
        b = self.berth([{"url": rx.url()}], passwords={"alice": "alice-pw"}, operators=["user:alice"],
                       extra={"auth": {"htpasswd": "htpasswd", "token": {
                           "signing_key": key, "issuer": "berth", "service": "berth"}}})
        alice = bt.basic_auth("alice", "alice-pw")
        self.assertEqual(b.get(NOTIFY, headers=alice).status, 200)
        r = b.get("/auth/token?service=berth&scope=repository:x/y:pull", headers=alice)
        self.assertEqual(r.status, 200, r)
        token = r.json()["token"]
        for method, path in [("GET", NOTIFY), ("POST", f"{NOTIFY}/ci/replay?since=0")]:
            with self.subTest(method=method, path=path):
                r = b.request(method, path, headers={"Authorization": f"Bearer {token}"})
                self.assertEqual(r.status, 403, r)
                self.assertEqual(r.error_codes(), ["DENIED"])


class BadConfigTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="berth-notify-config-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", self.tmp]))

    def assert_refused(self, endpoints, key):
        path = write(os.path.join(self.tmp, "config.json"), json.dumps({"notifications": {"endpoints": endpoints}}))
        root = os.path.join(self.tmp, "root")
        try:
            r = bt.run_cli("serve", "--config", path, "--root", root, "--listen", f"127.0.0.1:{bt.free_port()}",
                           timeout=10)
        except subprocess.TimeoutExpired:
            self.fail(f"berth started with {endpoints}")
        self.assertEqual(r.returncode, 2, f"{endpoints}: rc {r.returncode}, stderr {r.stderr!r}")
        self.assertIn(key, r.stderr, f"{endpoints}: does not name {key!r}")
        self.assertFalse(os.path.exists(os.path.join(root, "meta")), endpoints)

    def test_bad_endpoints(self):
        good = {"name": "ci", "url": "http://127.0.0.1:9/hook"}
        short = write(os.path.join(self.tmp, "short"), "too-short\n")
        e0 = "notifications.endpoints[0]"
        for endpoints, key in [
            ([{**good, "url": "ftp://x"}], f"{e0}.url"),
            ([{**good, "url": "nats://127.0.0.1:4222", "max_batch": 5}], e0),
            ([{**good, "url": "nats://127.0.0.1:4222", "subject": "berth.>"}], f"{e0}.subject"),
            ([{**good, "format": "distribution", "max_batch": 5}], f"{e0}.max_batch"),
            ([{**good, "format": "distribution", "actions": ["push", "pull"]}], f"{e0}.actions"),
            ([{**good, "name": "Bad Name"}], f"{e0}.name"),
            ([{**good, "bogus": 1}], f"{e0}.bogus"),
            ([good, dict(good)], "notifications.endpoints[1].name"),
            ([{**good, "secret_file": short}], f"{e0}.secret_file"),
        ]:
            with self.subTest(endpoints=endpoints):
                self.assert_refused(endpoints, key)


if __name__ == "__main__":
    unittest.main(verbosity=2)
