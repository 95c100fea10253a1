#!/usr/bin/env python3
"""agent.preheat: when a tag under the configured globs moves, the node agent fetches the image
before any pod asks (docs/node-agent.md, "Preheat").

- A tag pushed before the agent started is history: not fetched.
- A tag pushed afterwards under the glob is fetched whole (berth_agent_preheated_images_total 1),
  without any pull: with the replica then stopped, it pulls from the node's cache, byte for byte.
- A tag outside the glob is not fetched, and neither is the history (both fail without the replica).
"""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402


def pull(agent, name, ref):
    r = agent.get(f"/v2/{name}/manifests/{ref}?ns=docker.io", headers={"Accept": bt.OCI_MANIFEST})
    if r.status != 200:
        return r.status
    doc = json.loads(r.body)
    for desc in [doc["config"], *doc["layers"]]:
        b = agent.get(f"/v2/{name}/blobs/{desc['digest']}?ns=docker.io")
        if b.status != 200:
            return b.status
        assert bt.sha256_digest(b.body) == desc["digest"]
    return 200


def preheated(agent):
    for line in agent.get("/metrics").body.decode().splitlines():
        if line.startswith("berth_agent_preheated_images_total "):
            return float(line.split()[-1])
    return None


class Preheat(unittest.TestCase):
    def test_moved_tags_are_fetched_before_any_pull(self):
        replica = bt.Berth()
        self.addCleanup(replica.cleanup)
        replica.start()
        replica.push_image("docker.io/team/app", "1", layer_sizes=(100_000,))
        agent = bt.Berth(config={"agent": {"replicas": [f"http://127.0.0.1:{replica.port}"], "authorize": "agent",
                                           "preheat": {"repositories": ["docker.io/team/**"], "interval_seconds": 1}}})
        self.addCleanup(agent.cleanup)
        agent.start()
        bt.poll(lambda: "following the replicas' event feed" in agent.stderr(), 20, 0.1, "the agent following the feed")
        self.assertEqual(preheated(agent), 0)

        replica.push_image("docker.io/other/tool", "1", layer_sizes=(50_000,))
        replica.push_image("docker.io/team/app", "2", layer_sizes=(120_000, 80_000))
        bt.poll(lambda: preheated(agent) == 1, 20, 0.1, "the moved tag preheated")

        replica.stop()
        self.assertEqual(pull(agent, "team/app", "2"), 200, "the preheated image is not whole on the node")
        self.assertNotEqual(pull(agent, "team/app", "1"), 200, "history was preheated")
        self.assertNotEqual(pull(agent, "other/tool", "1"), 200, "a tag outside the glob was preheated")
        self.assertEqual(preheated(agent), 1)


if __name__ == "__main__":
    unittest.main()
