#!/usr/bin/env python3
"""Notifications into a real broker: Debian's nats-server with JetStream (tests/lib/natsclient.py).

- Each change is one message on the endpoint's subject ({action} and {repository} filled in:
  berth.tag.team.app; '.' and '_' in a name escaped so no two repositories share a subject), a
  structured CloudEvent, with Nats-Msg-Id set to the event's id.
- berth is killed with SIGKILL while it publishes and started again: it publishes again what it
  had not recorded as sent, and the stream's duplicate window keeps one copy, so the stream holds
  every acknowledged change exactly once.
- The broker stopped for a while (berth's publishes fail and are retried with backoff) loses
  nothing once it is back.
"""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
import natsclient  # noqa: E402

STREAM = "BERTH"


class NatsTest(unittest.TestCase):
    def setUp(self):
        self.nats = natsclient.NatsServer()
        self.addCleanup(self.nats.close)
        natsclient.create_stream(self.nats.port, STREAM, ["berth.>"])
        self.b = bt.Berth(config={"notifications": {"endpoints": [
            {"name": "bus", "url": self.nats.url, "subject": "berth.{action}.{repository}", "timeout_seconds": 2}]}})
        self.addCleanup(self.b.cleanup)
        self.b.start()
        self.expected = set()  # (type, subject, digest)

    def push(self, n, start):
        for i in range(start, start + n):
            img = self.b.push_image("team/app", f"v{i}")
            self.expected.add(("io.berth.push", "berth.push.team.app", img["digest"]))
            self.expected.add(("io.berth.tag", "berth.tag.team.app", img["digest"]))

    def messages(self):
        return natsclient.stream_messages(self.nats.port, STREAM)

    def got(self):
        out = set()
        for subject, _, data in self.messages():
            event = json.loads(data)
            out.add((event["type"], subject, event["data"]["digest"]))
        return out

    def assert_exactly_once(self):
        bt.poll(lambda: self.expected <= self.got(), 30, 0.2, "every change in the stream")
        messages = self.messages()
        ids = []
        for subject, headers, data in messages:
            event = json.loads(data)
            self.assertIn(f"Nats-Msg-Id: {event['id']}", headers, headers)
            self.assertEqual(event["specversion"], "1.0")
            ids.append(event["id"])
        self.assertEqual(len(ids), len(set(ids)), "an event twice in the stream")
        self.assertEqual(len(messages), len(self.expected), "the stream holds what was pushed, once each")

    def test_a_kill_mid_publish_leaves_every_event_in_the_stream_once(self):
        self.push(10, 0)
        bt.poll(lambda: len(self.messages()) >= 4, 15, 0.05, "publishing under way")
        self.b.kill()
        self.b.start()
        self.push(5, 10)
        self.assert_exactly_once()

    def test_subjects_keep_repositories_apart(self):
        # '.' and '_' in names are escaped ("_d", "__"): team/a.b and team/a_db never share a subject.
        dotted = self.b.push_image("team/a.b", "v1")
        underscored = self.b.push_image("team/a_db", "v1")
        self.expected |= {("io.berth.push", "berth.push.team.a_db", dotted["digest"]),
                          ("io.berth.tag", "berth.tag.team.a_db", dotted["digest"]),
                          ("io.berth.push", "berth.push.team.a__db", underscored["digest"]),
                          ("io.berth.tag", "berth.tag.team.a__db", underscored["digest"])}
        self.assert_exactly_once()

    def test_a_broker_that_was_down_gets_everything_once_back(self):
        self.push(2, 0)
        bt.poll(lambda: len(self.messages()) == 4, 15, 0.05, "the first changes published")
        self.nats.stop()
        self.push(3, 2)

        def failing():
            state = self.b.get("/_berth/v1/notifications").json()["endpoints"][0]
            return state["failed"] > 0 and state["lag"]["events"] > 0
        bt.poll(failing, 15, 0.1, "publishes failing while the broker is down")
        self.nats.start()
        self.assert_exactly_once()


if __name__ == "__main__":
    unittest.main(verbosity=2)
