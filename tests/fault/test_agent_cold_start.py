#!/usr/bin/env python3
"""A cold cluster start needs nothing from berth to start berth (docs/node-agent.md, "Cold start").

The node is a network namespace (tests/lib/netlab.py) whose /etc/hosts names the replica
`replicas.test`; the agent runs in it (agent.authorize "caller", the default) with
agent.keep_images naming docker.io/library/pause:3.9 and a cache smaller than what it is made to
pull.

1. Before any pull, the agent fetches the kept image whole (berth_agent_kept_images{state="whole"}
   1) and remembers the replica's address (replica-addresses.json).
2. Pulls of other images fill the cache to three times cache.max_bytes, which is less than the
   kept image and one other: the least recently used blobs go, the kept image's never.
3. The drill: agent and replica stopped, `replicas.test` removed from the node's hosts file, the
   agent started again with no replica and no name for it:
   - the kept image pulls at once, anonymously, from the node's cache (no replica to ask);
   - another cached image is refused (503) rather than served without the replicas' word;
   - a server that answers at the replica's address, even 503, is no outage: the kept image is
     then refused too (only no connection at all lets anyone read it);
   - the replica comes back (its name still unknown on the node): the agent reaches it by the
     remembered address and serves the cached image (berth_agent_remembered_replicas_total > 0).
"""

import http.client
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
import netlab  # noqa: E402

AGENT_PORT = 5050


class Refuser:
    """An HTTP server on the replica's port (every address) answering 503 to everything."""

    def __init__(self, port):
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(503)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_HEAD = do_GET

            def log_message(self, *args):
                pass
        self.server = http.server.ThreadingHTTPServer(("0.0.0.0", port), Handler)

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def get(address, path, timeout=10):
    conn = http.client.HTTPConnection(address, AGENT_PORT, timeout=timeout)
    try:
        conn.request("GET", path, headers={"Accept": bt.OCI_MANIFEST})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def pull(address, name, ref, ns="docker.io"):
    """Manifest and blobs through the agent, each verified; returns the manifest's status."""
    status, body = get(address, f"/v2/{name}/manifests/{ref}?ns={ns}")
    if status != 200:
        return status
    doc = json.loads(body)
    for desc in [doc["config"], *doc["layers"]]:
        status, data = get(address, f"/v2/{name}/blobs/{desc['digest']}?ns={ns}")
        if status != 200:
            return status
        assert bt.sha256_digest(data) == desc["digest"], f"wrong bytes for {desc['digest']}"
    return 200


def metric(address, line_start):
    status, body = get(address, "/metrics")
    for line in body.decode().splitlines():
        if line.startswith(line_start + " "):
            return float(line.split()[-1])
    return None


class ColdStart(unittest.TestCase):
    def setUp(self):
        reason = netlab.skip_reason()
        if reason:
            self.skipTest(reason)
        self.lab = netlab.Lab("cold")
        self.addCleanup(self.lab.close)
        self.node = self.lab.host("node")
        self.replica = bt.Berth()
        self.replica.listen_host = "0.0.0.0"
        self.addCleanup(self.replica.cleanup)
        self.replica.start()
        self.dir = tempfile.mkdtemp(prefix="berth-cold-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.agent = None
        self.addCleanup(self.stop_agent)

    def start_agent(self):
        config = {"listen": f"{self.node.address}:{AGENT_PORT}", "root": os.path.join(self.dir, "root"),
                  "agent": {"replicas": [f"http://replicas.test:{self.replica.port}"],
                            "keep_images": ["docker.io/library/pause:3.9"], "keep_interval_seconds": 1},
                  "cache": {"max_bytes": 300_000}}
        path = os.path.join(self.dir, "agent.json")
        with open(path, "w") as f:
            json.dump(config, f)
        self.log_path = os.path.join(self.dir, "agent.log")
        with open(self.log_path, "ab") as log:
            self.agent = self.node.popen([bt.BIN, "serve", "--config", path], stdout=log, stderr=log)
        bt.poll(lambda: self._answers(), 20, 0.05, "the agent answering")

    def _answers(self):
        if self.agent.poll() is not None:
            raise AssertionError(f"the agent exited: {self.agent_log()[-2000:]}")
        try:
            return get(self.node.address, "/v2/", timeout=2)[0] in (200, 401, 503)
        except OSError:
            return False

    def agent_log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop_agent(self):
        if self.agent and self.agent.poll() is None:
            self.agent.send_signal(signal.SIGTERM)
            try:
                self.agent.wait(15)
            except subprocess.TimeoutExpired:
                self.agent.kill()
                self.agent.wait(5)
        self.agent = None

    def test_drill(self):
        r, node = self.replica, self.node
        r.push_image("docker.io/library/pause", "3.9", layer_sizes=(200_000,))
        r.push_image("docker.io/library/app", "1", layer_sizes=(200_000,))
        fillers = [r.push_image(f"docker.io/library/filler{i}", "1", layer_sizes=(250_000,)) for i in range(3)]
        node.set_hosts({"replicas.test": self.lab.address})
        self.start_agent()

        # 1. The kept image, fetched with no pull asking; the replica's address remembered.
        bt.poll(lambda: metric(node.address, 'berth_agent_kept_images{state="whole"}') == 1, 20, 0.1,
                "the kept image whole in the node's cache")
        with open(os.path.join(self.dir, "root", "replica-addresses.json")) as f:
            book = json.load(f)
        self.assertEqual(book, {f"http://replicas.test:{r.port}": [f"{self.lab.address}:{r.port}"]})

        # 2. Other pulls fill the cache past its bound: LRU goes, the kept image stays.
        self.assertEqual(pull(node.address, "library/app", "1"), 200)
        for filler in fillers:
            self.assertEqual(pull(node.address, f"library/{filler['repo'].split('/')[-1]}", "1"), 200)
        bt.poll(lambda: "cache trimmed" in self.agent_log(), 30, 0.2, "the cache trimmed")

        # 3. The drill: everything stopped, the replicas' name gone from the node.
        self.stop_agent()
        r.stop()
        node.set_hosts({})
        self.assertNotEqual(node.run(["getent", "hosts", "replicas.test"]).returncode, 0)
        self.start_agent()
        started = time.monotonic()
        self.assertEqual(pull(node.address, "library/pause", "3.9"), 200)
        self.assertLess(time.monotonic() - started, 3, "the kept image took too long without replicas")
        self.assertEqual(pull(node.address, "library/app", "1"), 503,
                         "a cached image served with no replica to say who may read it")

        # A replica that answers, even with no decision (503 here; a caller could provoke a 431 or a
        # 429), is no outage: the kept image is no longer anyone's.
        with Refuser(r.port):
            bt.poll(lambda: pull(node.address, "library/pause", "3.9") == 503, 20, 0.2,
                    "the kept image refused while a replica answers without a decision")

        r._spawn()  # the same port: what the node remembered
        r.wait_ready()
        bt.poll(lambda: pull(node.address, "library/app", "1") == 200, 30, 0.2,
                "the cached image served once the replica is back at its remembered address")
        self.assertGreater(metric(node.address, "berth_agent_remembered_replicas_total") or 0, 0)


if __name__ == "__main__":
    unittest.main()
