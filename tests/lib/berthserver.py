"""One berth process for a test: the binary (env BERTH_BIN, default build/berth of this checkout) started on
a free loopback port with a temporary root, waited for until GET /v2/ answers, spoken to over
HTTP, stopped, killed and restarted on the same root; and poll(), the one way tests wait.

Standard library only; part of `import berthtest as bt` (see berthtest.py).
"""

import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from berthhttp import REQUEST_TIMEOUT, Resp, location_path, parse_metrics, with_query
from berthimage import OCI_MANIFEST, make_image, sha256_digest

__all__ = ["BIN", "READY_TIMEOUT", "wait_for_binary", "run_cli", "free_port", "poll", "Berth"]

BIN = os.environ.get("BERTH_BIN", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "berth"))
READY_TIMEOUT = 20  # seconds berth may take to answer GET /v2/


def wait_for_binary(timeout=180):
    """The lead rebuilds the binary from time to time; wait (bounded) while it is missing."""
    deadline = time.monotonic() + timeout
    while not (os.path.isfile(BIN) and os.access(BIN, os.X_OK)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"berth binary {BIN} not found (set BERTH_BIN)")
        time.sleep(1)
    return BIN


def run_cli(*args, timeout=30):
    """Run berth with arguments to completion; returns CompletedProcess (text)."""
    wait_for_binary()
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout)


def _ports_outside_ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(v) for v in f.read().split())
    except (OSError, ValueError):
        lo, hi = 32768, 60999
    return range(10000, lo) if lo - 10000 >= 4096 else range(hi + 1, 65536)


def free_port():
    """A loopback port that nothing has bound, outside the kernel's ephemeral range: on a busy
    machine outgoing connections take ephemeral ports between this probe and berth's bind."""
    ports = _ports_outside_ephemeral_range()
    for _ in range(200):
        port = random.choice(ports)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port outside the ephemeral range")


def poll(predicate, timeout, interval=0.05, what="condition"):
    """Call predicate until it returns a truthy value; return it, or raise AssertionError."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


class Berth:
    """One berth process on a free loopback port with its own root (a temp dir by default)."""

    def __init__(self, config=None, root=None, extra_args=(), use_flags=True):
        self.tmp = tempfile.mkdtemp(prefix="berth-test-")
        # The root sits a few levels down in the temp dir, so a path that climbs out of it
        # (../..) still lands inside the temp dir, where outside_root() sees it.
        self.root = root or os.path.join(self.tmp, "j1", "j2", "j3", "root")
        self.config = dict(config or {})
        self.extra_args = list(extra_args)
        self.use_flags = use_flags  # False: listen and root go in the config file instead
        self.env = None  # the process's environment: this one's when None
        self.listen_host = "127.0.0.1"  # what berth binds; tests connect to 127.0.0.1 either way
        # With auth on, GET /v2/ answers 401 to the anonymous readiness probe: also "ready".
        self.ready_statuses = (200,)
        # An ssl.SSLContext: requests (and the readiness probe) go over HTTPS.
        self.ssl_context = None
        self.proc = None
        self.frozen = False
        self.port = None
        self.stderr_path = None
        self._stderr = None
        self._starts = 0

    # ---- lifecycle

    def start(self, timeout=READY_TIMEOUT):
        wait_for_binary()
        for attempt in range(5):  # a free port can be taken between probing and binding
            self.port = free_port()
            self._spawn()
            try:
                self.wait_ready(timeout)
                return self
            except AssertionError:
                if self.proc.poll() is not None and attempt < 4 and "ddress already in use" in self.stderr():
                    continue
                self.kill()
                raise
        raise AssertionError("could not start berth")

    def _spawn(self):
        self._starts += 1
        args = [BIN, "serve"]
        if self.use_flags:
            args += ["--root", self.root, "--listen", f"{self.listen_host}:{self.port}"]
        if self.config or not self.use_flags:
            cfg = dict(self.config)
            if not self.use_flags:
                cfg["listen"], cfg["root"] = f"{self.listen_host}:{self.port}", self.root
            path = os.path.join(self.tmp, "config.json")
            with open(path, "w") as f:
                json.dump(cfg, f)
            args += ["--config", path]
        args += self.extra_args
        self.stderr_path = os.path.join(self.tmp, f"stderr.{self._starts}.log")
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self._stderr, start_new_session=True, env=self.env)

    def wait_ready(self, timeout=READY_TIMEOUT):
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"berth exited with {self.proc.returncode} before it was ready: "
                                     f"{self.stderr()[-2000:]}")
            try:
                conn = self.conn(2)
                conn.request("GET", "/v2/")
                r = conn.getresponse()
                r.read()
                conn.close()
                if r.status in self.ready_statuses:
                    return
            except (OSError, http.client.HTTPException):
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"berth not ready after {timeout}s: {self.stderr()[-2000:]}")
            time.sleep(0.05)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def send_signal(self, sig):
        self.proc.send_signal(sig)

    def wait(self, timeout):
        """Wait for exit; returns the exit code or raises subprocess.TimeoutExpired."""
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is not None and self._stderr:
                self._stderr.close()

    def stop(self, sig=signal.SIGTERM, timeout=15):
        """Signal and wait; returns the exit code (kills it if it does not exit in time)."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(sig)
        try:
            return self.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"berth did not exit within {timeout}s of signal {sig}")

    def freeze(self):
        """SIGSTOP: the process holds its sockets and answers nothing (a hung server)."""
        self.proc.send_signal(signal.SIGSTOP)
        self.frozen = True

    def thaw(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
        self.frozen = False

    def kill(self):
        if self.frozen:
            self.thaw()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self._stderr:
            self._stderr.close()

    def restart(self, timeout=READY_TIMEOUT):
        """Start again on the same root (after stop/kill)."""
        assert not self.alive()
        return self.start(timeout)

    def cleanup(self):
        self.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.cleanup()

    def outside_root(self):
        """Files under the temp dir that are neither inside the root nor berth's own config/logs."""
        out = []
        for dirpath, _, files in os.walk(self.tmp):
            for name in files:
                full = os.path.join(dirpath, name)
                if os.path.commonpath([full, self.root]) == self.root:
                    continue
                if dirpath == self.tmp and (name == "config.json" or name.startswith("stderr.")):
                    continue
                out.append(os.path.relpath(full, self.tmp))
        return sorted(out)

    def log_lines(self):
        """berth's stderr parsed as JSON lines (raises ValueError on a line that is not JSON)."""
        return [json.loads(line) for line in self.stderr().splitlines() if line.strip()]

    def stderr(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except (OSError, TypeError):
            return ""

    # ---- requests

    def conn(self, timeout=REQUEST_TIMEOUT):
        if self.ssl_context is not None:
            return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout, context=self.ssl_context)
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def config_path(self):
        """Where the config file is written (relative paths in it resolve against self.tmp)."""
        return os.path.join(self.tmp, "config.json")

    def metrics(self):
        """{metric{labels}: float} of GET /metrics."""
        return parse_metrics(self.get("/metrics").body.decode())

    def request(self, method, path, body=None, headers=None, chunked=False, timeout=REQUEST_TIMEOUT):
        """One request on a fresh connection."""
        conn = self.conn(timeout)
        try:
            try:
                if chunked:
                    chunks = body if isinstance(body, (list, tuple)) else [body]
                    conn.request(method, path, body=iter(chunks), headers=headers or {}, encode_chunked=True)
                else:
                    conn.request(method, path, body=body, headers=headers or {})
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server may answer early (413) and close; read the answer below
            r = conn.getresponse()
            data = r.read()
            return Resp(r.status, r.getheaders(), data)
        finally:
            conn.close()

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def head(self, path, **kw):
        return self.request("HEAD", path, **kw)

    # ---- registry operations

    def start_upload(self, repo, params=""):
        r = self.request("POST", f"/v2/{repo}/blobs/uploads/{params}", headers={"Content-Length": "0"})
        return r

    def upload_location(self, repo):
        r = self.start_upload(repo)
        if r.status != 202:
            raise AssertionError(f"POST upload in {repo}: {r}")
        return location_path(r.header("Location"))

    def push_blob(self, repo, data):
        """POST + monolithic PUT; returns the digest. Raises unless 201."""
        loc = self.upload_location(repo)
        digest = sha256_digest(data)
        r = self.request("PUT", with_query(loc, digest=digest), body=data,
                         headers={"Content-Type": "application/octet-stream"})
        if r.status != 201:
            raise AssertionError(f"PUT blob {digest} in {repo}: {r}")
        return digest

    def put_manifest(self, repo, ref, data, media_type=OCI_MANIFEST, query=""):
        return self.request("PUT", f"/v2/{repo}/manifests/{ref}{query}", body=data,
                            headers={"Content-Type": media_type})

    def push_image(self, repo, tag=None, layer_sizes=(1024,)):
        """Push config + layers + manifest (by tag, or by digest if tag is None)."""
        img = make_image(layer_sizes)
        for data in img["blobs"].values():
            self.push_blob(repo, data)
        r = self.put_manifest(repo, tag or img["digest"], img["manifest"])
        if r.status != 201:
            raise AssertionError(f"PUT manifest in {repo}: {r}")
        img["repo"], img["tag"] = repo, tag
        return img
