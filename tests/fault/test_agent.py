#!/usr/bin/env python3
"""The node-local agent (berth with `agent` config) against real replicas:

1. three replicas serving TLS to each other and to the agent, whose client certificate they
   verify (tls.client_auth optional: a client without one, a probe say, still gets in); the
   agent lists all three: pulls through the agent (with ?ns= and by prefixed name) give the
   replicas' bytes; the replica the agent used is killed -9 and pulls of new and cached
   images through the agent go on, from the others;
2. mTLS: a replica serving TLS that requires client certificates; the agent with its client
   certificate pulls; an agent without one gets nothing (503, never the content); pushes to
   the agent are refused (405 UNSUPPORTED) and change nothing;
3. the LRU cache stays within cache.max_bytes.
"""

import http.client
import json
import os
import shutil
import ssl
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402


def pull(server, name, ref, ns=None):
    """Manifest and blobs, each with ?ns= when given; returns (status, digest, {digest: sha256 of bytes})."""
    query = f"?ns={ns}" if ns else ""
    r = server.get(f"/v2/{name}/manifests/{ref}{query}", headers={"Accept": bt.OCI_MANIFEST})
    if r.status != 200:
        return r.status, None, {}
    if ns:
        assert r.header("OCI-Namespace") == ns, r.header("OCI-Namespace")
    doc = json.loads(r.body)
    blobs = {}
    for desc in [doc["config"], *doc["layers"]]:
        b = server.get(f"/v2/{name}/blobs/{desc['digest']}{query}")
        blobs[desc["digest"]] = bt.sha256_digest(b.body) if b.status == 200 else b.status
    return 200, r.header("Docker-Content-Digest"), blobs


def expected(image):
    return {d: d for d in image["blobs"]}


def agent_for(urls, **extra):
    agent = {"replicas": urls}
    agent.update(extra.pop("agent", {}))
    return bt.Berth(config={"agent": agent, **extra})


def replica_cert(directory, ca, ca_key):
    """One certificate for every replica, good for serving and for presenting to peers."""
    key, csr, cert, ext = (os.path.join(directory, f"replica.{e}") for e in ("key", "csr", "crt", "ext"))
    bt.gen_ec_key(key)
    bt.openssl("req", "-new", "-key", key, "-subj", "/CN=replica", "-out", csr)
    with open(ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth,clientAuth\n"
                "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    bt.openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-days", "2", "-sha256",
               "-set_serial", "7", "-extfile", ext, "-out", cert)
    return cert, key


class AgentFailover(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="berth-agent-ha-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.ca, ca_key = bt.make_ca(self.dir)
        cert, key = replica_cert(self.dir, self.ca, ca_key)
        self.agent_cert, self.agent_key = bt.make_cert(self.dir, "agent", self.ca, ca_key, client=True)
        # Access logs on: the test reads which replica served the agent.
        tls = {"cert": cert, "key": key, "client_ca": self.ca, "client_auth": "optional"}
        self.cluster = bt.Cluster(n=3, config={"log": {"access": True}, "tls": tls})
        self.addCleanup(self.cluster.cleanup)
        # The test itself is a client without a certificate.
        context = ssl.create_default_context(cafile=self.ca)
        for replica in self.cluster:
            replica.conn = (lambda r: lambda timeout=bt.REQUEST_TIMEOUT: http.client.HTTPSConnection(
                "127.0.0.1", r.port, timeout=timeout, context=context))(replica)
        self.cluster.start()

    def test_pulls_go_on_when_the_replica_in_use_dies(self):
        c = self.cluster
        first = c[0].push_image("docker.io/library/app", "v1", layer_sizes=(300_000,))
        c.wait_caught_up()
        agent = agent_for([f"https://127.0.0.1:{r.port}" for r in c],
                          agent={"ca_file": self.ca, "cert_file": self.agent_cert, "key_file": self.agent_key})
        self.addCleanup(agent.cleanup)
        agent.start()

        self.assertEqual(pull(agent, "library/app", "v1", "docker.io"), (200, first["digest"], expected(first)))
        self.assertEqual(pull(agent, "docker.io/library/app", first["digest"]), (200, first["digest"], expected(first)))

        # The agent tries the replicas in the order listed: the first one served it.
        served = [r for r in c if any(line.get("target", "").startswith("/v2/docker.io/library/app")
                                      for line in self._logged(r))]
        self.assertEqual([r.replica_id for r in served], ["berth-0"], "the agent used the first replica")

        second = c[1].push_image("docker.io/library/app", "v2", layer_sizes=(200_000,))
        c.wait_caught_up()
        c[0].kill()
        started = time.monotonic()
        self.assertEqual(pull(agent, "library/app", "v2", "docker.io"), (200, second["digest"], expected(second)))
        self.assertLess(time.monotonic() - started, 5, "failover took too long")
        # Re-validated with a survivor, blobs from the agent's cache.
        self.assertEqual(pull(agent, "library/app", "v1", "docker.io"), (200, first["digest"], expected(first)))

    def _logged(self, replica):
        out = []
        for line in replica.stderr().splitlines():
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if doc.get("msg") == "request":
                out.append(doc)
        return out


class AgentTls(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="berth-agent-tls-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.ca, self.ca_key = bt.make_ca(self.dir)
        server_cert, server_key = bt.make_cert(self.dir, "replica", self.ca, self.ca_key)
        self.client_cert, self.client_key = bt.make_cert(self.dir, "agent", self.ca, self.ca_key, client=True)
        self.replica = bt.Berth(config={"tls": {"cert": server_cert, "key": server_key, "client_ca": self.ca}})
        ctx = ssl.create_default_context(cafile=self.ca)
        ctx.load_cert_chain(self.client_cert, self.client_key)
        self.replica.ssl_context = ctx
        self.addCleanup(self.replica.cleanup)
        self.replica.start()
        self.image = self.replica.push_image("quay.io/team/tool", "1.0", layer_sizes=(100_000,))

    def test_mtls_pull_and_refusals(self):
        url = f"https://127.0.0.1:{self.replica.port}"
        agent = agent_for([url], agent={"ca_file": self.ca, "cert_file": self.client_cert,
                                        "key_file": self.client_key},
                          cache={"max_bytes": 150_000})
        self.addCleanup(agent.cleanup)
        agent.start()
        image = self.image
        self.assertEqual(pull(agent, "team/tool", "1.0", "quay.io"), (200, image["digest"], expected(image)))

        r = agent.request("POST", "/v2/quay.io/team/tool/blobs/uploads/")
        self.assertEqual(r.status, 405)
        self.assertEqual(r.error_codes(), ["UNSUPPORTED"])
        r = agent.put_manifest("quay.io/team/tool", "evil", self.image["manifest"])
        self.assertEqual(r.status, 405)
        self.assertEqual(self.replica.get("/v2/quay.io/team/tool/manifests/evil").status, 404)

        # Without a client certificate the replica refuses the handshake: the agent cannot even ask
        # who may read, and serves nothing (503, also for GET /v2/).
        bare = agent_for([url], agent={"ca_file": self.ca})
        self.addCleanup(bare.cleanup)
        bare.ready_statuses = (503,)
        bare.start()
        started = time.monotonic()
        r = bare.get("/v2/team/tool/manifests/1.0?ns=quay.io")
        self.assertEqual(r.status, 503)
        self.assertLess(time.monotonic() - started, 3)

        # A second image pushes the first out of the 150 kB cache (checked every 10 s).
        other = self.replica.push_image("quay.io/team/other", "1.0", layer_sizes=(100_000,))
        self.assertEqual(pull(agent, "team/other", "1.0", "quay.io"), (200, other["digest"], expected(other)))

        def cache_bytes():
            total = 0
            for dirpath, _, files in os.walk(os.path.join(agent.root, "blobs")):
                total += sum(os.path.getsize(os.path.join(dirpath, f)) for f in files)
            return total
        bt.poll(lambda: cache_bytes() <= 150_000, 30, 0.2, "the agent's cache trimmed to cache.max_bytes")
        # Evicted content is fetched again on demand.
        self.assertEqual(pull(agent, "team/tool", "1.0", "quay.io"), (200, image["digest"], expected(image)))


if __name__ == "__main__":
    unittest.main(verbosity=2)
