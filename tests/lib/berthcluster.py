"""Replicated berth for the fault tests and bench/quorum: a Cluster of N Replicas peered with each
other on free loopback ports (optionally in network namespaces), frozen, killed, wiped and
restarted, with waits on /readyz and /_berth/v1/status.

Standard library only; part of `import berthtest as bt` (see berthtest.py).
"""

import http.client
import json
import os
import shutil
import subprocess
import time

from berthhttp import REQUEST_TIMEOUT
from berthimage import OCI_MANIFEST
from berthserver import BIN, READY_TIMEOUT, Berth, free_port, poll, wait_for_binary

__all__ = ["PEER_SECRET_HEADER", "netns_usable", "Replica", "Cluster", "pull_image"]

PEER_SECRET_HEADER = "Berth-Peer-Secret"


def netns_usable():
    """Whether this process may create network namespaces (root, iproute2, a kernel that allows it)."""
    if os.geteuid() != 0 or shutil.which("ip") is None or os.environ.get("BERTH_NO_NETNS"):
        return False
    probe = f"berth-probe-{os.urandom(3).hex()}"
    ok = subprocess.run(["ip", "netns", "add", probe], capture_output=True, timeout=10).returncode == 0
    if ok:
        ok = subprocess.run(["ip", "netns", "exec", probe, "true"], capture_output=True, timeout=10).returncode == 0
        subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=10)
    return ok


class Replica(Berth):
    """One replica of a Cluster: a berth process whose port (and so its peers' lists) is fixed by
    the cluster before any replica starts. Its temp dir holds config.json, peer-secret, stderr
    logs and root/. With netns set it runs inside that network namespace (`ip netns exec`)."""

    def __init__(self, cluster, index):
        super().__init__()
        self.cluster, self.index = cluster, index
        self.replica_id = f"berth-{index}"
        self.root = os.path.join(self.tmp, "root")
        self.host = "127.0.0.1"  # where this test's clients connect
        self.peer_host = "127.0.0.1"  # how the other replicas reach it
        self.netns = None
        self.peers_override = None  # a list replaces the peers computed from the cluster
        self.replication_overrides = {}
        self.frozen = False

    @property
    def address(self):
        return f"{self.peer_host}:{self.port}"

    def write_config(self):
        peers = self.peers_override if self.peers_override is not None else self.cluster.peers_of(self)
        replication = {"peers": peers, "secret_file": "peer-secret",
                       "write_quorum": self.cluster.write_quorum, "quorum_timeout_seconds": 10,
                       "poll_interval_ms": self.cluster.poll_interval_ms, "bootstrap_parallelism": 8}
        replication.update(self.cluster.replication_overrides)
        replication.update(self.replication_overrides)
        cfg = {"listen": f"{self.listen_host}:{self.port}", "root": self.root,
               "replica_id": self.replica_id, "log": {"access": False}, "replication": replication}
        cfg.update(self.cluster.config_overrides)
        with open(os.path.join(self.tmp, "peer-secret"), "w") as f:
            f.write(self.cluster.secret + "\n")
        path = os.path.join(self.tmp, "config.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        return path

    def _spawn(self):
        self._starts += 1
        args = [BIN, "serve", "--config", self.write_config()]
        if self.netns:
            args = ["ip", "netns", "exec", self.netns, *args]
        self.stderr_path = os.path.join(self.tmp, f"stderr.{self._starts}.log")
        self._stderr = open(self.stderr_path, "wb")
        self.frozen = False
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self._stderr, start_new_session=True)

    def spawn(self):
        wait_for_binary()
        self._spawn()

    def start(self, timeout=READY_TIMEOUT):
        """Start on the cluster-assigned port; returns once GET /v2/ answers (not /readyz)."""
        self.spawn()
        try:
            self.wait_ready(timeout)
        except AssertionError:
            self.kill()
            raise
        return self

    def restart(self, timeout=READY_TIMEOUT):
        assert not self.alive()
        return self.start(timeout)

    def conn(self, timeout=REQUEST_TIMEOUT):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def wait_ready(self, timeout=READY_TIMEOUT):
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.replica_id} exited with {self.proc.returncode} before it was "
                                     f"ready: {self.stderr()[-2000:]}")
            try:
                if self.request("GET", "/v2/", timeout=2).status == 200:
                    return
            except (OSError, http.client.HTTPException):
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.replica_id} not answering after {timeout}s: {self.stderr()[-2000:]}")
            time.sleep(0.05)

    def readyz(self, timeout=5):
        """Status of GET /readyz, or None if it cannot be reached."""
        try:
            return self.request("GET", "/readyz", timeout=timeout).status
        except (OSError, http.client.HTTPException):
            return None

    def wait_readyz(self, timeout=60):
        def check():
            if not self.alive():
                raise AssertionError(f"{self.replica_id} exited: {self.stderr()[-2000:]}")
            return self.readyz() == 200
        poll(check, timeout, 0.05, f"{self.replica_id} /readyz 200")

    def peer_request(self, method, path, secret=None, body=None, headers=None, timeout=REQUEST_TIMEOUT):
        """A /_berth/v1/ request with the cluster's secret (or the given one)."""
        h = dict(headers or {})
        h[PEER_SECRET_HEADER] = self.cluster.secret if secret is None else secret
        return self.request(method, "/_berth/v1/" + path, body=body, headers=h, timeout=timeout)

    def status(self):
        r = self.peer_request("GET", "status")
        if r.status != 200:
            raise AssertionError(f"{self.replica_id} /_berth/v1/status: {r}")
        return r.json()

    def wipe(self):
        assert not self.alive()
        shutil.rmtree(self.root, ignore_errors=True)


class Cluster:
    """N replicas peered with each other, each with its own temp root, on free loopback ports."""

    def __init__(self, n=3, write_quorum="quorum", poll_interval_ms=100, replication=None, config=None):
        self.write_quorum = write_quorum
        self.poll_interval_ms = poll_interval_ms
        self.replication_overrides = dict(replication or {})
        self.config_overrides = dict(config or {})
        self.secret = os.urandom(16).hex()
        self.replicas = [Replica(self, i) for i in range(n)]

    def __getitem__(self, i):
        return self.replicas[i]

    def __iter__(self):
        return iter(self.replicas)

    def __len__(self):
        return len(self.replicas)

    def peers_of(self, replica):
        return [r.address for r in self.replicas if r is not replica]

    def assign_ports(self):
        ports = set()
        for r in self.replicas:
            while True:
                p = free_port()
                if p not in ports:
                    break
            ports.add(p)
            r.port = p

    def start(self, timeout=READY_TIMEOUT, readyz_timeout=60):
        """Start every replica (all at once), then wait until each answers /readyz 200."""
        wait_for_binary()
        for attempt in range(5):
            self.assign_ports()
            for r in self.replicas:
                r._spawn()
            try:
                for r in self.replicas:
                    r.wait_ready(timeout)
                break
            except AssertionError:
                in_use = any(not r.alive() and "ddress already in use" in r.stderr() for r in self.replicas)
                for r in self.replicas:
                    r.kill()
                if not in_use or attempt == 4:
                    raise
        for r in self.replicas:
            r.wait_readyz(readyz_timeout)
        self.wait_connected()
        return self

    def wait_connected(self, timeout=30, replicas=None):
        """Poll /_berth/v1/status until every given replica reports every peer reachable (a
        replica that tried its peers before they listened retries them only a second later)."""
        live = replicas or self.replicas

        def check():
            return all(p["reachable"] for r in live for p in r.status()["peers"])
        poll(check, timeout, 0.05, "replicas reachable from each other")

    def cleanup(self):
        for r in self.replicas:
            if r.frozen:
                r.thaw()
        for r in self.replicas:
            r.cleanup()

    def wait_caught_up(self, timeout=30, replicas=None):
        """Poll /_berth/v1/status until every (running) replica has applied every reachable
        peer's log up to its head, as seen by the peers themselves."""
        live = [r for r in (replicas or self.replicas) if r.alive() and not r.frozen]

        def check():
            heads = {}
            for r in live:
                st = r.status()
                heads[st["replica"]] = st["log_head"]
            for r in live:
                for p in r.status()["peers"]:
                    if p["id"] in heads and p["cursor"] < heads[p["id"]]:
                        return False
            return True
        poll(check, timeout, 0.05, "replicas caught up with each other")

    def dump_logs(self, limit=3000):
        return "\n".join(f"--- {r.replica_id} stderr:\n{r.stderr()[-limit:]}" for r in self.replicas)


def pull_image(replica, repo, ref, accept=OCI_MANIFEST):
    """GET the manifest (by tag or digest) and every blob it references.

    Returns {"status", "digest" (Docker-Content-Digest), "manifest" (bytes), "blobs": {digest: bytes}}
    or, if the manifest GET was not 200, just {"status", "response"}. A blob whose GET is not 200
    is recorded as the Resp."""
    r = replica.get(f"/v2/{repo}/manifests/{ref}", headers={"Accept": accept})
    if r.status != 200:
        return {"status": r.status, "response": r}
    doc = json.loads(r.body)
    blobs = {}
    for desc in [doc["config"], *doc["layers"]]:
        b = replica.get(f"/v2/{repo}/blobs/{desc['digest']}")
        blobs[desc["digest"]] = b.body if b.status == 200 else b
    return {"status": 200, "digest": r.header("Docker-Content-Digest"), "manifest": r.body, "blobs": blobs}
