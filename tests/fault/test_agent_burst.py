#!/usr/bin/env python3
"""Node agents sharing a pull burst (agent.peers; docs/node-agent.md, "Bursts"), on a lab of
network namespaces with a rate limit on every host's link (tests/lib/burstlab.py): three
replicas serving TLS with a client CA, N nodes each with an agent on its loopback, every node's
runtime pulling at the same moment (tests/lib/pull_through.py inside the node's namespace,
verifying every blob's digest).

1. Sharing on (N=4, k=2): every pull gets the right bytes; the replicas send at most (k+1)
   times the image (the agents' berth_agent_blob_bytes_total{source="replicas"}, and the
   replica hosts' links as a check); agents got bytes from each other.
2. Sharing off ("peers": {"enabled": false}): the replicas send N times the image (so 1 can
   fail).
3. An agent that feeds another (a seed of the big layer, with a child) is killed (SIGKILL) once
   it has part of the layer: every other node's pull completes, right, within 60 s.
4. The same agent frozen (SIGSTOP) instead: the others complete within 60 s (a stalled parent
   costs 5 s and a retry).
5. A lying agent (tests/lib/lying_agent.py: a real agent certificate, announced to every
   replica, garbage of the right length for every blob) ranked as a real agent's parent for a
   layer (k=1, the image chosen by the ranking): that agent's pull is right, it counts
   reason="corrupt", and for a second image whose ranking makes the liar its parent again, the
   liar is not asked.
6. Tenants (replicas with htpasswd users and rules, agent.authorize "caller", k=1): alice's
   private image pulled through agent A; bob, through agent B whose parent for those blobs is
   A, names alice's blob under his own repository: never the bytes; under alice's: 401/403.
   alice through B then gets her image, from A. A client certificate of the same CA that is no
   agent's (no SAN DNS:berth-agent), and the replicas' own, read nothing from an agent's
   listener for fellow agents, and the replicas do not list them as agents.

Skipped where network namespaces cannot be made (netlab.skip_reason()). BERTH_KEEP=1 prints every
process's log; a failing test prints them too.
"""

import http.client
import json
import os
import ssl
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
import netlab  # noqa: E402
from burstlab import PEER_PORT, BurstLab, image_bytes, rank, sources  # noqa: E402

MIB = 1 << 20
REPO = "docker.io/team/app"
DEADLINE = 60  # seconds every surviving pull has after a fault


def corrupt_count(agent):
    return agent.metric('berth_agent_peer_failures_total{reason="corrupt"}')


def failures(agent):
    return {reason: agent.metric(f'berth_agent_peer_failures_total{{reason="{reason}"}}')
            for reason in ("unreachable", "refused", "corrupt")}


def summary(results):
    return {name: {k: r.get(k) for k in ("ok", "seconds", "bytes", "error")} for name, r in results.items()}


@unittest.skipIf(netlab.skip_reason(), f"needs network namespaces: {netlab.skip_reason()}")
class BurstCase(unittest.TestCase):
    def make_lab(self, start=True, **kw):
        lab = BurstLab(**kw)
        self.addCleanup(lab.close)
        self.addCleanup(self.print_logs, lab)
        return self.start_lab(lab) if start else lab

    def start_lab(self, lab):
        t0 = time.monotonic()
        lab.start()
        print(f"\n  lab up in {time.monotonic() - t0:.1f}s ({lab.n_agents} agents, k={lab.seeds}, "
              f"sharing {'on' if lab.sharing else 'off'})", file=sys.stderr)
        return lab

    def print_logs(self, lab):
        if bt.failed(self) or os.environ.get("BERTH_KEEP"):
            print(lab.dump_logs(), file=sys.stderr)
            for path in [os.path.join(lab.dir, f) for f in sorted(os.listdir(lab.dir)) if f.endswith((".log", ".stderr"))]:
                with open(path, errors="replace") as f:
                    print(f"--- {os.path.basename(path)}:\n{f.read()[-4000:]}", file=sys.stderr)

    def assert_pulled(self, results, image, names=None):
        size = image_bytes(image)
        for name, r in results.items():
            if names is not None and name not in names:
                continue
            self.assertTrue(r.get("ok"), f"{name}'s pull failed: {r.get('error')}; all: {summary(results)}")
            self.assertEqual(r["bytes"], size, f"{name} got {r['bytes']} bytes of {size}")
            self.assertEqual(r["manifest"], image["digest"], name)


class Sharing(BurstCase):
    def test_burst_shares_between_agents(self):
        lab = self.make_lab(agents=4, seeds=2, rate_mbit=40)
        k, n = lab.seeds, len(lab.agents)
        image = lab.push_image(REPO, "v1", (3 * MIB, 3 * MIB))
        size = image_bytes(image)
        tx = lab.replica_tx()
        results = lab.burst(lab.agents, REPO, "v1")
        self.assert_pulled(results, image)
        from_replicas, from_agents = lab.replica_blob_bytes(), lab.agent_blob_bytes()
        sent = lab.replica_tx() - tx
        times = sorted(r["seconds"] for r in results.values())
        print(f"  sharing on, N={n}: replicas sent {from_replicas / size:.2f}x the image by the agents' "
              f"count, {sent / size:.2f}x by the links; from agents {from_agents / MIB:.1f} MiB; "
              f"pulls {times} s", file=sys.stderr)
        self.assertGreater(from_replicas, 0)
        self.assertLessEqual(from_replicas, (k + 1) * size, f"replicas sent {from_replicas} bytes for N={n}, k={k}")
        self.assertGreater(from_agents, 0, "no agent got bytes from another")
        # The links carry TLS and TCP/IP headers (~5%), manifests and announcements besides.
        self.assertLess(sent, (k + 1) * size * 1.15 + 2 * MIB, f"replica links sent {sent} bytes")
        # A runtime gets a blob only once the agent holds all of it, verified: its response head
        # comes at the end (the layers take over half a second on the links; loopback is quick).
        for name, r in results.items():
            for digest, blob in r["blobs"].items():
                if blob["bytes"] >= MIB:
                    self.assertLess(blob["seconds"] - blob["head"], 0.35,
                                    f"{name}: {digest} streamed to the runtime before it was whole: {blob}")

        # Every replica lists every agent, to agents only.
        want = sorted((a.address, a.name) for a in lab.agents)
        for replica in lab.cluster:
            status, doc = lab.roster(replica)
            self.assertEqual(status, 200, doc)
            self.assertEqual(sorted((x["address"], x["node"]) for x in doc["agents"]), want)
            self.assertEqual(replica.metrics().get("berth_agents_registered"), n)
            for method, body in (("GET", None), ("POST", json.dumps({"port": 5051, "node": "stranger"}))):
                r = replica.request(method, "/_berth/v1/agents", body=body, headers={"Content-Type": "application/json"})
                self.assertEqual(r.status, 403, f"{method} /_berth/v1/agents without a client certificate: {r}")

    def test_burst_without_sharing_costs_n_images(self):
        lab = self.make_lab(agents=4, seeds=2, rate_mbit=40, sharing=False)
        n = len(lab.agents)
        image = lab.push_image(REPO, "v1", (3 * MIB, 3 * MIB))
        size = image_bytes(image)
        tx = lab.replica_tx()
        results = lab.burst(lab.agents, REPO, "v1")
        self.assert_pulled(results, image)
        from_replicas, sent = lab.replica_blob_bytes(), lab.replica_tx() - tx
        print(f"  sharing off, N={n}: replicas sent {from_replicas / size:.2f}x the image by the agents' count, "
              f"{sent / size:.2f}x by the links; pulls {sorted(r['seconds'] for r in results.values())} s",
              file=sys.stderr)
        # The agents count the manifests they fetch from the replicas too.
        self.assertEqual(from_replicas, n * (size + len(image["manifest"])))
        self.assertEqual(lab.agent_blob_bytes(), 0)
        self.assertGreaterEqual(sent, n * size)
        for agent in lab.agents:
            self.assertIsNone(agent.metrics().get("berth_agent_peers"), "sharing off, yet the agent counts peers")


class Faults(BurstCase):
    def feeding_agent(self, lab, image):
        """(layer digest, agent) where the agent is the layer's first seed and has a child."""
        addresses = lab.addresses()
        layer = max((d for d in image["blobs"]), key=lambda d: len(image["blobs"][d]))
        ranked = rank(layer, addresses)
        parent = ranked[0]
        children = [a for a in addresses if sources(layer, addresses, lab.seeds, a)[:1] == [parent]]
        self.assertTrue(children, f"no child of {parent} for {layer}: {ranked}")
        victim = next(a for a in lab.agents if a.address == parent)
        return layer, victim, [a for a in lab.agents if a.address in children]

    def burst_with_fault(self, fault):
        lab = self.make_lab(agents=4, seeds=2, rate_mbit=20)
        image = lab.push_image(REPO, "v1", (4 * MIB, 4 * MIB))
        layer, victim, children = self.feeding_agent(lab, image)
        pulls = lab.pulls(lab.agents, REPO, "v1", timeout=DEADLINE + 30)
        rx = victim.node.counters().rx_bytes
        pulls.go()
        bt.poll(lambda: victim.node.counters().rx_bytes - rx > MIB, 30, 0.02, f"{victim.name} to receive 1 MiB")
        got = victim.node.counters().rx_bytes - rx
        fault(victim)
        faulted = time.monotonic() - pulls.released
        self.addCleanup(victim.thaw)
        others = [a.name for a in lab.agents if a is not victim]
        results = pulls.results(DEADLINE + faulted, names=others)
        pulls.abandon(victim.name)
        self.assert_pulled(results, image)
        slowest = max(r["wall"] for r in results.values())
        self.assertLess(slowest - faulted, DEADLINE, f"the slowest survivor took {slowest - faulted:.1f}s after the fault")
        child_failures = {c.name: failures(c) for c in children}
        print(f"  {victim.name} (first seed of the {len(image['blobs'][layer]) >> 20} MiB layer, "
              f"parent of {[c.name for c in children]}) faulted {faulted:.1f}s in, having received "
              f"{got / MIB:.1f} MiB; survivors took {sorted(round(r['wall'], 1) for r in results.values())} s; "
              f"children's failures {child_failures}", file=sys.stderr)
        self.assertTrue(any(sum(f.values()) >= 1 for f in child_failures.values()),
                        f"no child of {victim.name} saw it fail: {child_failures}")
        return lab

    def test_killed_agent(self):
        self.burst_with_fault(lambda victim: victim.kill())

    def test_frozen_agent(self):
        self.burst_with_fault(lambda victim: victim.freeze())


class Liar(BurstCase):
    def test_lying_agent_is_caught_and_not_asked_again(self):
        lab = self.make_lab(agents=2, seeds=1, rate_mbit=40)
        host = lab.add_host("liar")
        liar, log = lab.start_liar(host)
        lab.wait_peers(count=3)
        addresses = lab.addresses([liar])

        def choose(victim=None, tries=200):
            """An image with a layer whose ranking makes the liar a real agent's parent."""
            for _ in range(tries):
                image = bt.make_image((2 * MIB, 2 * MIB))
                layers = [d for d in image["blobs"] if len(image["blobs"][d]) == 2 * MIB]
                for d in layers:
                    for agent in lab.agents:
                        if (victim is None or agent is victim) and sources(d, addresses, 1, agent.address)[:1] == [liar]:
                            return image, d, agent
            self.fail("no image makes the liar a parent")

        image, layer, victim = choose()
        lab.push_image(REPO, "v1", image=image)
        results = lab.burst(lab.agents, REPO, "v1")
        self.assert_pulled(results, image)
        asked = self.liar_requests(log, victim)
        self.assertIn(layer, [e["path"].rsplit("/", 1)[-1] for e in asked],
                      f"{victim.name} never asked the liar for {layer}: {asked}")
        counts = {a.name: failures(a) for a in lab.agents}
        print(f"  the liar {liar} ranked parent of {victim.name} for {layer[:19]}; {victim.name} asked it "
              f"{len(asked)} time(s); failures {counts}", file=sys.stderr)
        self.assertGreaterEqual(corrupt_count(victim), 1, counts)
        before = corrupt_count(victim)

        # Distrusted: a second image with the liar as the victim's parent again does not go to it.
        second, layer2, _ = choose(victim)
        lab.push_image(REPO, "v2", image=second)
        result = lab.pull(victim, REPO, "v2")
        self.assert_pulled({victim.name: result}, second)
        again = [e for e in self.liar_requests(log, victim) if e["path"].rsplit("/", 1)[-1] in second["blobs"]]
        self.assertEqual(again, [], f"{victim.name} asked the distrusted liar again")
        self.assertEqual(corrupt_count(victim), before)

    def liar_requests(self, log, agent):
        out = []
        with open(log) as f:
            for line in f:
                entry = json.loads(line)
                if entry.get("client") == agent.node.address and "/blobs/" in entry.get("path", ""):
                    out.append(entry)
        return out


RULES = [
    {"repository": "${user}/**", "principals": ["authenticated"], "actions": ["pull", "push"]},
    {"repository": "**", "principals": ["user:node-agent"], "actions": ["pull"]},
]
ALICE = bt.basic_auth("alice", "alice-pw")
BOB = bt.basic_auth("bob", "bob-pw")


class Tenants(BurstCase):
    """One lab for the class: replicas with users and rules, agents A and B (authorize "caller",
    k=1), alice's private image chosen so that A ranks first for every blob (B's parent), in
    A's cache after alice's pull through A."""

    @classmethod
    def setUpClass(cls):
        def replica_config(lab):
            htpasswd = bt.write_htpasswd(os.path.join(lab.dir, "htpasswd"),
                                         {"alice": "alice-pw", "bob": "bob-pw", "node-agent": "agent-pw"})
            return {"auth": {"htpasswd": htpasswd, "rules": RULES}}
        cls.lab = lab = BurstLab(agents=2, seeds=1, rate_mbit=40, authorize="caller", replica_config=replica_config)
        cls.addClassCleanup(lab.close)
        password = os.path.join(lab.dir, "agent-password")
        with open(password, "w") as f:
            f.write("agent-pw\n")
        lab.agent_extra = {"username": "node-agent", "password_file": password}
        try:
            lab.start()
            addresses = lab.addresses()
            for _ in range(200):  # one agent ranks first for every blob: A, whose child B is
                image = bt.make_image((MIB, MIB))
                tops = {rank(d, addresses)[0] for d in image["blobs"]}
                if len(tops) == 1:
                    break
            cls.a = a = next(x for x in lab.agents if x.address in tops)
            cls.b = b = next(x for x in lab.agents if x is not a)
            assert all(sources(d, addresses, 1, b.address) == [a.address] for d in image["blobs"])
            cls.image = lab.push_image("alice/private", "1", image=image, headers=ALICE)
            lab.push_image("bob/app", "1", (10_000,), headers=BOB)
            cls.alice_through_a = lab.pull(a, "alice/private", "1", authorization=ALICE["Authorization"])
        except BaseException:
            print(lab.dump_logs(), file=sys.stderr)
            raise

    def setUp(self):
        self.addCleanup(self.print_logs, self.lab)

    def test_a_shared_blobs_cross_no_tenant(self):
        lab, a, b, image = self.lab, self.a, self.b, self.image
        self.assert_pulled({a.name: self.alice_through_a}, image)
        self.assertEqual(lab.pull(b, "alice/private", "1", authorization=BOB["Authorization"])["ok"], False)

        for digest in image["blobs"]:
            r = b.get(f"/v2/bob/app/blobs/{digest}", headers=BOB, timeout=60)
            print(f"  bob asks agent B for alice's {digest[:19]} under bob/app: {r.status}", file=sys.stderr)
            self.assertNotEqual(r.status, 200, f"bob got alice's blob {digest} under his own repository")
            self.assertNotEqual(bt.sha256_digest(r.body), digest)
            r = b.get(f"/v2/alice/private/blobs/{digest}", headers=BOB, timeout=60)
            self.assertIn(r.status, (401, 403), f"bob under alice's repository: {r}")
            self.assertNotEqual(bt.sha256_digest(r.body), digest)
            r = b.get(f"/v2/alice/private/blobs/{digest}", timeout=60)
            self.assertIn(r.status, (401, 403), f"anonymous under alice's repository: {r}")
        r = b.get("/v2/alice/private/manifests/1", headers={**BOB, "Accept": bt.OCI_MANIFEST})
        self.assertIn(r.status, (401, 403), r)

        # A's listener for fellow agents: nothing without a client certificate.
        layer = max(image["blobs"], key=lambda d: len(image["blobs"][d]))
        context = ssl.create_default_context(cafile=lab.ca)
        context.check_hostname = False
        status, body = self.peer_get(a, f"/v2/alice/private/blobs/{layer}", context)
        self.assertNotEqual(status, 200, "A's peer listener served a client without a certificate")

        # alice through B: her image, from A (B's parent).
        before = b.agent_bytes()
        result = lab.pull(b, "alice/private", "1", authorization=ALICE["Authorization"])
        self.assert_pulled({b.name: result}, image)
        self.assertGreater(b.agent_bytes(), before, "B fetched alice's blobs without asking A")

    def test_b_peer_listener_serves_agents_only(self):
        """An agent's listener for fellow agents (0.0.0.0:5051, reachable from the node's network)
        and the replicas' POST /_berth/v1/agents take only agents' certificates (SAN DNS:berth-agent),
        not any other the CA signed: a user's client certificate (CN=alice-laptop, clientAuth, no
        SAN, as `skopeo --dest-cert-dir` uses against replicas with tls.client_auth "require") and
        the replicas' own certificate read nothing of alice's from a node that pulled it, and are
        not listed as agents. (This test found the bug: both used to be taken.)"""
        lab, a, image = self.lab, self.a, self.image
        cert, key = bt.make_cert(lab.dir, "user", lab.ca, lab.ca_key, cn="alice-laptop", client=True)
        layer = max(image["blobs"], key=lambda d: len(image["blobs"][d]))
        leaks = []
        for who, (c, k) in (("a user's client certificate", (cert, key)),
                            ("the replicas' certificate", (lab.replica_cert, lab.replica_key))):
            context = ssl.create_default_context(cafile=lab.ca)
            context.check_hostname = False
            context.load_cert_chain(c, k)
            for path, digest in (("/v2/alice/private/manifests/1", image["digest"]),
                                 (f"/v2/alice/private/blobs/{layer}", layer)):
                status, body = self.peer_get(a, path, context)
                if status == 200 and bt.sha256_digest(body) == digest:
                    leaks.append(f"{who}: GET {path} -> 200, alice's bytes")
        # Nor does a replica take such a certificate for an agent's (it would be ranked, and asked).
        context = ssl.create_default_context(cafile=lab.ca)
        context.load_cert_chain(cert, key)
        r0 = lab.cluster[0]
        conn = http.client.HTTPSConnection(r0.host, r0.port, timeout=20, context=context)
        try:
            conn.request("POST", "/_berth/v1/agents", body=json.dumps({"port": PEER_PORT, "node": "laptop"}))
            r = conn.getresponse()
            if r.status == 200:
                leaks.append(f"a user's client certificate: POST /_berth/v1/agents -> 200 {r.read()[:200]!r}")
        finally:
            conn.close()
        print(f"  non-agent certificates: {leaks or 'nothing'}", file=sys.stderr)
        self.assertEqual(leaks, [], "a client certificate that is not an agent's read alice's image from an agent")

    @staticmethod
    def peer_get(agent, path, context):
        """GET on an agent's listener for fellow agents, from the root namespace: (status, body), or
        (None, error text) when TLS or the connection refuses."""
        conn = http.client.HTTPSConnection(agent.node.address, PEER_PORT, timeout=20, context=context)
        try:
            conn.request("GET", path, headers={"Accept": bt.OCI_MANIFEST})
            r = conn.getresponse()
            return r.status, r.read()
        except (OSError, ssl.SSLError, http.client.HTTPException) as e:
            return None, str(e).encode()
        finally:
            conn.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
