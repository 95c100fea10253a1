"""A pull burst on a cluster of nodes, for tests/fault/test_agent_burst.py and bench/agent-burst:
inside a netlab.Lab, three replica hosts (a bt.Cluster serving TLS with a client CA, each replica
in its host's namespace) and N node hosts, each running a berth node agent (agent config, mTLS to
the replicas, the listener for fellow agents on 0.0.0.0:5051 when sharing is on) that listens on
the node's own loopback, 127.0.0.1:5050, for the node's runtime. Every host's link has its own tc
rate limit (netlab: both directions).

    lab = BurstLab(agents=4, rate_mbit=40, seeds=2, sharing=True)   # nothing started yet
    test.addCleanup(lab.close)
    lab.start()                      # CA and certificates, replicas, agents; every agent knows all
    image = lab.push_image("docker.io/team/app", "v1", (3 << 20, 3 << 20))
    results = lab.burst(lab.agents, "docker.io/team/app", "v1")     # {agent name: pull result}
    lab.replica_blob_bytes()         # what the agents say they fetched from the replicas
    lab.replica_tx()                 # bytes the replica hosts' links sent (netlab counters)

Pulls run inside the node's namespace (tests/lib/pull_through.py, started with `ip netns exec`):
the runtime reaches its agent over the node's loopback, never over the node's limited link. The
test process talks to an agent the same way: agent.get() opens its socket inside the agent's
namespace (setns on the calling thread for the socket's creation only), so an agent's metrics
cost no process and no bytes on its link. The test reaches the replicas at their hosts' addresses
from the root namespace (lab.address), through their links.

Ranking (as the agents rank a blob's agents, docs/node-agent.md, "Bursts"): rank(digest,
addresses) and sources(digest, addresses, k, me) say, for a digest, which agents fetch from the
replicas and whom each other one fetches from; tests choose images so a given agent is another's
parent.

Root and iproute2 are needed (netlab.skip_reason()); standard library only (plus openssl).
"""

import ctypes
import hashlib
import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

import berthtest as bt
import netlab

__all__ = ["BurstLab", "Agent", "BurstReplica", "rank", "sources", "netns_socket", "PULL_SCRIPT", "LIAR_SCRIPT",
           "percentile", "image_bytes"]

HERE = os.path.dirname(os.path.abspath(__file__))
PULL_SCRIPT = os.path.join(HERE, "pull_through.py")
LIAR_SCRIPT = os.path.join(HERE, "lying_agent.py")
RUNTIME_PORT = 5050  # the agent on the node's loopback, for the runtime
PEER_PORT = 5051  # the agent's listener for fellow agents
MAX_CHAIN = 16  # fanout 1 while (count - k) <= k * MAX_CHAIN

# --------------------------------------------------------------------------- ranking


def score(digest, address):
    return int(hashlib.sha256((digest + "\0" + address).encode()).hexdigest()[:16], 16)


def rank(digest, addresses):
    """The agents (IP:PORT) of a blob, best first: the first k fetch it from the replicas."""
    return sorted(addresses, key=lambda a: score(digest, a), reverse=True)


def sources(digest, addresses, k, me, distrusted=()):
    """The fellow agents `me` fetches the blob from, nearest first (parent, its parent, up to 3);
    [] when it is one of the blob's k seeds."""
    ranked = rank(digest, addresses)
    count = len(ranked)
    fanout = 2 if count - min(count, k) > k * MAX_CHAIN else 1
    position = ranked.index(me)
    out = []
    while position >= k and len(out) < 3:
        position = (position - k) // fanout
        if ranked[position] not in distrusted:
            out.append(ranked[position])
    return out


def percentile(values, p):
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def image_bytes(image):
    """What a pull of the image fetches as blobs: its config and layers."""
    return sum(len(b) for b in image["blobs"].values())


# --------------------------------------------------------------------------- sockets in a namespace

_CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd):
    if _libc.setns(fd, _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def netns_socket(netns, family=socket.AF_INET, kind=socket.SOCK_STREAM):
    """A socket created inside network namespace netns (/run/netns/NAME): the calling thread
    enters it for the socket() call only (a socket stays in the namespace it was made in)."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(os.path.join(netlab.NETNS_DIR, netns), os.O_RDONLY)
        try:
            _setns(target)
            try:
                return socket.socket(family, kind)
            finally:
                _setns(own)
        finally:
            os.close(target)
    finally:
        os.close(own)


class NetnsConnection(http.client.HTTPConnection):
    """http.client to a host:port as seen from inside a network namespace."""

    def __init__(self, netns, host, port, timeout):
        super().__init__(host, port, timeout=timeout)
        self.netns = netns

    def connect(self):
        sock = netns_socket(self.netns)
        try:
            sock.settimeout(self.timeout)
            sock.connect((self.host, self.port))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


# --------------------------------------------------------------------------- certificates


def leaf(directory, name, ca, ca_key, san):
    """A certificate for serving and for presenting as a client (both extended key usages)."""
    key, csr, cert, ext = (os.path.join(directory, f"{name}.{e}") for e in ("key", "csr", "crt", "ext"))
    bt.gen_ec_key(key)
    bt.openssl("req", "-new", "-key", key, "-subj", f"/CN={name}", "-out", csr)
    with open(ext, "w") as f:
        f.write(f"basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName={san}\n")
    bt.openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-days", "2", "-sha256",
               "-set_serial", str(int.from_bytes(os.urandom(7), "big")), "-extfile", ext, "-out", cert)
    return cert, key


# --------------------------------------------------------------------------- processes


class BurstReplica(bt.Replica):
    """A replica of the lab: HTTPS (the lab's CA), reached at its host's address; GET /v2/
    answering 200 or 401 (auth on) counts as up."""

    def conn(self, timeout=bt.REQUEST_TIMEOUT):
        return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self.lab.client_context)

    def wait_ready(self, timeout=bt.READY_TIMEOUT):
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.replica_id} exited with {self.proc.returncode}: {self.stderr()[-2000:]}")
            try:
                if self.request("GET", "/v2/", timeout=2).status in (200, 401):
                    return
            except (OSError, http.client.HTTPException):
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.replica_id} not answering after {timeout}s: {self.stderr()[-2000:]}")
            time.sleep(0.05)

    @property
    def url(self):
        return f"https://{self.peer_host}:{self.port}"


class Agent(bt.Berth):
    """A node agent in its node's namespace (self.node, a netlab Host), listening on the node's
    127.0.0.1:5050; requests (get, metrics...) are made from inside that namespace."""

    def __init__(self, lab, node, name, config):
        super().__init__(config=config)
        self.lab, self.node, self.name = lab, node, name
        self.port = RUNTIME_PORT
        self.ready_statuses = (200, 401)
        self.frozen = False

    @property
    def address(self):
        """IP:PORT of its listener for fellow agents, as the replicas list it."""
        return f"{self.node.address}:{PEER_PORT}"

    @property
    def url(self):
        return f"http://127.0.0.1:{RUNTIME_PORT}"

    def start(self, timeout=bt.READY_TIMEOUT):
        bt.wait_for_binary()
        self._spawn()
        try:
            self.wait_ready(timeout)
        except AssertionError:
            self.kill()
            raise
        return self

    def _spawn(self):
        self._starts += 1
        cfg = dict(self.config)
        cfg["listen"], cfg["root"] = f"127.0.0.1:{RUNTIME_PORT}", self.root
        path = os.path.join(self.tmp, "config.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        self.stderr_path = os.path.join(self.tmp, f"stderr.{self._starts}.log")
        self._stderr = open(self.stderr_path, "wb")
        self.frozen = False
        self.proc = self.node.popen([bt.BIN, "serve", "--config", path], stdout=subprocess.DEVNULL,
                                    stderr=self._stderr)

    def conn(self, timeout=bt.REQUEST_TIMEOUT):
        return NetnsConnection(self.node.netns, "127.0.0.1", RUNTIME_PORT, timeout)

    def metric(self, key, default=0.0):
        return self.metrics().get(key, default)

    def replica_bytes(self):
        return self.metric('berth_agent_blob_bytes_total{source="replicas"}')

    def agent_bytes(self):
        return self.metric('berth_agent_blob_bytes_total{source="agents"}')


class Pulls:
    """Pull processes (pull_through.py --wait) inside agents' namespaces, loaded and waiting:
    go() releases them all at once, results() collects {agent name: result dict}."""

    def __init__(self, lab, agents, repo, ref, authorization=None, ns=None, timeout=120, parallel=3):
        self.lab, self.agents = lab, list(agents)
        self.procs = {}
        self.released = None
        for agent in self.agents:
            argv = [sys.executable, PULL_SCRIPT, agent.url, repo, ref, "--wait", "--timeout", str(timeout),
                    "--parallel", str(parallel)]
            if authorization:
                argv += ["--authorization", authorization]
            if ns:
                argv += ["--ns", ns]
            self.procs[agent.name] = agent.node.popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                      stderr=subprocess.PIPE, text=True)
        for name, proc in self.procs.items():
            line = proc.stdout.readline()
            if line.strip() != "ready":
                raise AssertionError(f"pull client in {name} did not start: {line!r} {proc.stderr.read()[-2000:]}")

    def go(self):
        self.released = time.monotonic()
        for proc in self.procs.values():
            proc.stdin.write("go\n")
            proc.stdin.flush()
        return self

    def results(self, timeout=120, names=None):
        """{name: result}: pull_through.py's JSON, plus "wall" (seconds from go() to exit) and
        "rc"; a client still running at the deadline is killed and reported {"ok": False,
        "error": "timeout"}."""
        deadline = self.released + timeout
        out = {}
        waiters = []
        for name, proc in self.procs.items():
            if names is not None and name not in names:
                continue

            def wait(name=name, proc=proc):
                try:
                    stdout, stderr = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.communicate()
                    out[name] = {"ok": False, "error": f"timeout: still pulling {timeout}s after the release",
                                 "wall": None, "rc": None}
                    return
                wall = time.monotonic() - self.released
                doc = None
                for line in reversed(stdout.splitlines()):
                    if line.startswith("{"):
                        doc = json.loads(line)
                        break
                if doc is None:
                    doc = {"ok": False, "error": f"no result; stderr: {stderr[-1500:]}"}
                doc["wall"], doc["rc"] = wall, proc.returncode
                out[name] = doc
            t = threading.Thread(target=wait, daemon=True)
            t.start()
            waiters.append(t)
        for t in waiters:
            t.join()
        return out

    def abandon(self, name):
        proc = self.procs.pop(name)
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


# --------------------------------------------------------------------------- the lab


class BurstLab:
    """Replica hosts r0..r2 and node hosts n0..n{agents-1} on one netlab.Lab (see the module's
    docstring). Parameters:

    agents          nodes, each with an agent
    rate_mbit       every node's link limit (both directions); None: unlimited
    replica_rate_mbit  the replicas' links (default: rate_mbit)
    seeds           agent.peers.seeds (k)
    sharing         agent.peers on; False: "peers": {"enabled": false}
    authorize       agent.authorize ("agent": single tenant, no credentials needed)
    replica_config  added to every replica's config (e.g. an auth section); a function
                    replica_config(lab) is called once the lab's directory exists
    agent_extra     added to every agent's "agent" section (e.g. username, password_file)
    spread          agent i lists the replicas starting at r(i mod 3), as a Service's
                    addresses come in different orders on different nodes; False: all r0 first
    """

    def __init__(self, agents=4, rate_mbit=40, replica_rate_mbit=None, seeds=2, sharing=True, authorize="agent",
                 replica_config=None, agent_extra=None, spread=True, announce_seconds=1, prefix="burst",
                 cache_max_bytes=1_000_000_000, access_log=True):
        self.n_agents, self.rate_mbit, self.seeds, self.sharing = agents, rate_mbit, seeds, sharing
        self.replica_rate_mbit = rate_mbit if replica_rate_mbit is None else replica_rate_mbit
        self.authorize, self.replica_config, self.agent_extra = authorize, replica_config, dict(agent_extra or {})
        self.spread, self.announce_seconds, self.prefix = spread, announce_seconds, prefix
        self.cache_max_bytes, self.access_log = cache_max_bytes, access_log
        self.dir = tempfile.mkdtemp(prefix="berth-burst-")
        self.net = None
        self.cluster = None
        self.agents = []
        self.extra = []  # other processes (fake agents): Popen
        self._pulls = []

    # ---- lifecycle

    def start(self):
        self.net = netlab.Lab(self.prefix)
        self.replica_hosts = [self.net.host(f"r{i}", rate_mbit=self.replica_rate_mbit) for i in range(3)]
        self.node_hosts = [self.net.host(f"n{i}", rate_mbit=self.rate_mbit) for i in range(self.n_agents)]
        self.make_certificates()
        self.start_replicas()
        for i, host in enumerate(self.node_hosts):
            self.agents.append(self.make_agent(host, f"agent-{i}", i))
        for agent in self.agents:
            agent.start()
        if self.sharing:
            self.wait_peers()
        return self

    def close(self):
        for pulls in self._pulls:
            for proc in pulls.procs.values():
                if proc.poll() is None:
                    proc.kill()
        for agent in self.agents:
            agent.kill()
        for proc in self.extra:
            if proc.poll() is None:
                proc.kill()
        if self.cluster is not None:
            self.cluster.cleanup()
        if self.net is not None:
            self.net.close()
        for agent in self.agents:
            agent.cleanup()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    def make_certificates(self):
        self.ca, self.ca_key = bt.make_ca(self.dir)
        ips = ",".join(f"IP:{h.address}" for h in self.replica_hosts)
        self.replica_cert, self.replica_key = leaf(self.dir, "replica", self.ca, self.ca_key,
                                                   f"{ips},IP:127.0.0.1,DNS:localhost")
        # One certificate for every agent (and the fake ones): agents verify each other against
        # the name berth-agent and the CA.
        self.agent_cert, self.agent_key = leaf(self.dir, "agent", self.ca, self.ca_key, "DNS:berth-agent")
        self.client_context = ssl.create_default_context(cafile=self.ca)  # the test: no certificate
        self.agent_context = ssl.create_default_context(cafile=self.ca)  # the test as an agent
        self.agent_context.load_cert_chain(self.agent_cert, self.agent_key)
        self.agent_context.check_hostname = False  # fellow agents' certificates name berth-agent

    def start_replicas(self):
        tls = {"cert": self.replica_cert, "key": self.replica_key, "client_ca": self.ca, "client_auth": "optional"}
        config = {"tls": tls, "log": {"access": self.access_log}}
        extra = self.replica_config(self) if callable(self.replica_config) else self.replica_config
        config.update(extra or {})
        self.cluster = bt.Cluster(n=3, config=config)
        self.cluster.replicas = [BurstReplica(self.cluster, i) for i in range(3)]
        for replica, host in zip(self.cluster, self.replica_hosts):
            replica.lab = self
            replica.netns, replica.listen_host = host.netns, "0.0.0.0"
            replica.peer_host = replica.host = host.address
        self.cluster.start()

    def agent_config(self, name, index):
        urls = [r.url for r in self.cluster]
        if self.spread:
            urls = urls[index % 3:] + urls[:index % 3]
        agent = {"replicas": urls, "ca_file": self.ca, "cert_file": self.agent_cert, "key_file": self.agent_key,
                 "authorize": self.authorize}
        if self.sharing:
            agent["peers"] = {"listen": f"0.0.0.0:{PEER_PORT}", "seeds": self.seeds, "node": name,
                              "announce_seconds": self.announce_seconds}
        else:
            agent["peers"] = {"enabled": False}
        agent.update(self.agent_extra)
        return {"agent": agent, "cache": {"max_bytes": self.cache_max_bytes}, "log": {"access": self.access_log}}

    def make_agent(self, host, name, index):
        return Agent(self, host, name, self.agent_config(name, index))

    # ---- state

    def addresses(self, extra=()):
        """The addresses every sharing agent ranks: the agents', and those of fake ones given."""
        return [a.address for a in self.agents] + list(extra)

    def wait_peers(self, count=None, agents=None, timeout=30):
        """Poll until every (given) agent's berth_agent_peers is count (default: every agent)."""
        count = len(self.agents) if count is None else count
        agents = self.agents if agents is None else agents

        def check():
            seen = {a.name: a.metric("berth_agent_peers", None) for a in agents}
            return all(v == count for v in seen.values()) or None
        try:
            bt.poll(check, timeout, 0.1, f"every agent to know {count} agents")
        except AssertionError:
            seen = {a.name: a.metric("berth_agent_peers", None) for a in agents}
            raise AssertionError(f"berth_agent_peers is not {count} everywhere after {timeout}s: {seen}; "
                                 f"replica 0 lists {self.roster(self.cluster[0])}") from None

    def roster(self, replica):
        """GET /_berth/v1/agents on a replica, with an agent's client certificate."""
        conn = http.client.HTTPSConnection(replica.host, replica.port, timeout=10, context=self.agent_context)
        try:
            conn.request("GET", "/_berth/v1/agents")
            r = conn.getresponse()
            body = r.read()
            return r.status, (json.loads(body) if r.status == 200 else body[:300])
        finally:
            conn.close()

    def replica_blob_bytes(self, agents=None):
        """Sum over agents of berth_agent_blob_bytes_total{source="replicas"}."""
        return sum(a.replica_bytes() for a in (agents or self.agents) if a.alive())

    def agent_blob_bytes(self, agents=None):
        return sum(a.agent_bytes() for a in (agents or self.agents) if a.alive())

    def replica_tx(self):
        """Bytes sent by the replica hosts' links (Ethernet frames, headers and TLS included)."""
        return sum(h.counters().tx_bytes for h in self.replica_hosts)

    # ---- images and pulls

    def push_image(self, repo, tag, layer_sizes=(3 << 20,), headers=None, image=None):
        """Push (to r0, with the test's own connection: no client certificate) and wait until every
        replica has it."""
        image = image or bt.make_image(layer_sizes)
        r0 = self.cluster[0]
        for digest, data in image["blobs"].items():
            r = r0.request("POST", f"/v2/{repo}/blobs/uploads/?digest={digest}", body=data,
                           headers={**(headers or {}), "Content-Type": "application/octet-stream"}, timeout=120)
            if r.status != 201:
                raise AssertionError(f"push of {digest} to {repo}: {r}")
        r = r0.request("PUT", f"/v2/{repo}/manifests/{tag}", body=image["manifest"],
                       headers={**(headers or {}), "Content-Type": bt.OCI_MANIFEST})
        if r.status != 201:
            raise AssertionError(f"PUT manifest {repo}:{tag}: {r}")
        self.cluster.wait_caught_up(timeout=120)
        image["repo"], image["tag"] = repo, tag
        return image

    def pulls(self, agents, repo, ref, **kw):
        """Pull clients in the agents' namespaces, loaded and waiting (Pulls.go() releases them)."""
        p = Pulls(self, agents, repo, ref, **kw)
        self._pulls.append(p)
        return p

    def burst(self, agents, repo, ref, timeout=120, **kw):
        """Every agent's node pulls at once; {agent name: result} (see Pulls.results)."""
        return self.pulls(agents, repo, ref, timeout=timeout, **kw).go().results(timeout)

    def pull(self, agent, repo, ref, timeout=120, **kw):
        """One pull through one agent; its result."""
        return self.burst([agent], repo, ref, timeout, **kw)[agent.name]

    # ---- fake agents

    def add_host(self, name, rate_mbit=None):
        return self.net.host(name, rate_mbit=self.rate_mbit if rate_mbit is None else rate_mbit)

    def start_liar(self, host, sizes=None, node="liar"):
        """tests/lib/lying_agent.py on host: announced to every replica, answering blob GETs with
        the wrong bytes. Returns (address, log path)."""
        log = os.path.join(self.dir, f"{host.name}.log")
        argv = [sys.executable, LIAR_SCRIPT, "--listen", f"0.0.0.0:{PEER_PORT}", "--cert", self.agent_cert,
                "--key", self.agent_key, "--ca", self.ca, "--log", log, "--node", node]
        for r in self.cluster:
            argv += ["--replica", r.url]
        if sizes:
            path = os.path.join(self.dir, f"{host.name}-sizes.json")
            with open(path, "w") as f:
                json.dump(sizes, f)
            argv += ["--sizes", path]
        errors = open(os.path.join(self.dir, f"{host.name}.stderr"), "wb")
        proc = host.popen(argv, stdout=subprocess.DEVNULL, stderr=errors)
        errors.close()
        self.extra.append(proc)
        return f"{host.address}:{PEER_PORT}", log

    # ---- diagnostics

    def dump_logs(self, limit=4000):
        parts = [self.cluster.dump_logs(limit)] if self.cluster else []
        for a in self.agents:
            parts.append(f"--- {a.name} ({a.address}) stderr:\n{a.stderr()[-limit:]}")
        return "\n".join(parts)
