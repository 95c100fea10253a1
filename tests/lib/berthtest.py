"""Shared helpers for berth's integration and fault tests.

Standard library only. Each test starts the real berth binary (env BERTH_BIN, default
/work/main/build/berth) on a free loopback port with a temporary root directory, waits until
GET /v2/ answers, and talks HTTP to it. Every process started here is killed and every
temporary directory removed on cleanup, including when a test fails.
"""

import hashlib
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
import urllib.parse

BIN = os.environ.get("BERTH_BIN", "/work/main/build/berth")
REQUEST_TIMEOUT = 30  # seconds, per HTTP request
READY_TIMEOUT = 20  # seconds berth may take to answer GET /v2/

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"

SPEC_ERROR_CODES = {
    "BLOB_UNKNOWN", "BLOB_UPLOAD_INVALID", "BLOB_UPLOAD_UNKNOWN", "DIGEST_INVALID",
    "MANIFEST_BLOB_UNKNOWN", "MANIFEST_INVALID", "MANIFEST_UNKNOWN", "NAME_INVALID",
    "NAME_UNKNOWN", "SIZE_INVALID", "UNAUTHORIZED", "DENIED", "UNSUPPORTED", "TOOMANYREQUESTS",
    "TAG_INVALID", "MANIFEST_UNVERIFIED",
}


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


def sha256_digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


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


# --------------------------------------------------------------------------- HTTP


class Resp:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def header(self, name):
        values = [v for k, v in self.headers if k.lower() == name.lower()]
        return ", ".join(values) if values else None

    def header_all(self, name):
        return [v for k, v in self.headers if k.lower() == name.lower()]

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def error_codes(self):
        """Codes of the spec error body, or None if the body is not {"errors":[{"code":..}]}."""
        doc = self.json()
        if not isinstance(doc, dict) or not isinstance(doc.get("errors"), list) or not doc["errors"]:
            return None
        codes = []
        for err in doc["errors"]:
            if not isinstance(err, dict) or not isinstance(err.get("code"), str):
                return None
            codes.append(err["code"])
        return codes

    def __repr__(self):
        return f"<{self.status} {self.body[:200]!r}>"


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
        self.listen_host = "127.0.0.1"  # what berth binds; tests connect to 127.0.0.1 either way
        # With auth on, GET /v2/ answers 401 to the anonymous readiness probe: also "ready".
        self.ready_statuses = (200,)
        # An ssl.SSLContext: requests (and the readiness probe) go over HTTPS.
        self.ssl_context = None
        self.proc = None
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
                                     stderr=self._stderr, start_new_session=True)

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

    def kill(self):
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


def location_path(loc):
    """Path + query of a Location header (which may be absolute)."""
    parts = urllib.parse.urlsplit(loc)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def with_query(path, **params):
    return path + ("&" if "?" in path else "?") + urllib.parse.urlencode(params)


def make_image(layer_sizes=(1024,), rng=None):
    """A random OCI image: {"blobs": {digest: bytes}, "manifest": bytes, "digest": str, ...}."""
    rnd = rng or random
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "nonce": rnd.getrandbits(64),
                         "rootfs": {"type": "layers", "diff_ids": []}}).encode()
    layers = [rnd.randbytes(n) if rng else os.urandom(n) for n in layer_sizes]
    blobs = {sha256_digest(config): config}
    for layer in layers:
        blobs[sha256_digest(layer)] = layer
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": sha256_digest(config), "size": len(config)},
        "layers": [{"mediaType": OCI_LAYER, "digest": sha256_digest(x), "size": len(x)} for x in layers],
    }).encode()
    return {"blobs": blobs, "config": config, "layers": layers, "manifest": manifest,
            "digest": sha256_digest(manifest)}


# --------------------------------------------------------------------------- raw sockets


def connect(port, timeout=10):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


class RawReader:
    """Reads HTTP/1.1 responses from a socket, keeping leftover bytes between responses."""

    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("connection closed by server")
        self.buf += data

    def read_response(self, head_request=False):
        """Returns (status, headers dict lower-cased, body). Raises ConnectionError on EOF."""
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        if status in (100, 204, 304) or head_request or 100 <= status < 200:
            return status, headers, b""
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                while b"\r\n" not in self.buf:
                    self._fill()
                size_line, self.buf = self.buf.split(b"\r\n", 1)
                size = int(size_line.split(b";")[0], 16)
                while len(self.buf) < size + 2:
                    self._fill()
                body += self.buf[:size]
                self.buf = self.buf[size + 2:]
                if size == 0:
                    return status, headers, body
        length = int(headers.get("content-length", "0"))
        while len(self.buf) < length:
            self._fill()
        body, self.buf = self.buf[:length], self.buf[length:]
        return status, headers, body


def raw_exchange(port, data, timeout=10):
    """Send raw bytes on a fresh connection and read one response: (status, headers, body)."""
    with connect(port, timeout) as s:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        return RawReader(s).read_response()


def wait_closed(sock, timeout):
    """Read (and drop) whatever the server sends until it closes; True if closed within timeout.

    Returns (closed, data) where data is everything received."""
    sock.settimeout(0.5)
    deadline = time.monotonic() + timeout
    received = b""
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return True, received
        if not chunk:
            return True, received
        received += chunk
    return False, received


# --------------------------------------------------------------------------- filesystem


def tree(root):
    """{relative path: (size, sha256)} of every regular file under root (RocksDB files excluded
    from hashing, since its files change on their own)."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            if rel.startswith("meta" + os.sep):
                out[rel] = None
                continue
            try:
                with open(full, "rb") as f:
                    data = f.read()
            except OSError:
                continue
            out[rel] = (len(data), hashlib.sha256(data).hexdigest())
    return out


def blob_files(root):
    """{hex: path} of every file under <root>/blobs/sha256."""
    base = os.path.join(root, "blobs", "sha256")
    out = {}
    for dirpath, _, files in os.walk(base):
        for name in files:
            out[name] = os.path.join(dirpath, name)
    return out


def evict_from_page_cache(path):
    """Drops a file's pages from the page cache, so the next read of it goes to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def on_tmpfs(path):
    """Whether path is on tmpfs, where page-cache eviction does nothing."""
    kind = subprocess.run(["stat", "-f", "-c", "%T", path], capture_output=True, text=True, check=True)
    return kind.stdout.strip() == "tmpfs"


COLD_BYTES = "berth_blob_read_from_disk_bytes_total"


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            h.update(chunk)
    return h.hexdigest()


# --------------------------------------------------------------------------- replication

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

    def metrics(self):
        """{metric{labels}: float} of GET /metrics."""
        out = {}
        for line in self.get("/metrics").body.decode().splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                out[key.strip()] = float(value)
        return out

    def freeze(self):
        self.proc.send_signal(signal.SIGSTOP)
        self.frozen = True

    def thaw(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
        self.frozen = False

    def kill(self):
        if self.frozen:
            self.thaw()
        super().kill()

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


# --------------------------------------------------------------------------- metrics


def parse_metrics(text):
    """{metric{labels}: float} of a Prometheus text exposition (comments skipped)."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key.strip()] = float(value)
    return out


# --------------------------------------------------------------------------- auth and TLS material
#
# Keys and certificates are made with the openssl CLI; JWTs are put together here (base64url
# + `openssl dgst -sha256 -sign`), so tests can also forge the malformed ones.

import base64  # noqa: E402


def basic_auth(user, password):
    """{"Authorization": "Basic ..."}."""
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


def openssl(*args, input=None):
    """Run the openssl CLI; returns stdout bytes, raises with stderr on failure."""
    r = subprocess.run(["openssl", *args], input=input, capture_output=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)}: {r.stderr.decode(errors='replace')}")
    return r.stdout


def write_htpasswd(path, users):
    """users: {name: password}; bcrypt entries as `htpasswd -B` writes them (cost 5, for speed)."""
    with open(path, "w") as f:
        for name, password in users.items():
            r = subprocess.run(["htpasswd", "-nbB", "-C", "5", name, password], capture_output=True, text=True,
                               timeout=60)
            if r.returncode != 0:
                raise RuntimeError(f"htpasswd: {r.stderr}")
            f.write(r.stdout.strip() + "\n")
    return path


def gen_rsa_key(path, bits=2048):
    openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", f"rsa_keygen_bits:{bits}", "-out", path)
    return path


def gen_ec_key(path):
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path)
    return path


def public_key(private_path, public_path):
    openssl("pkey", "-in", private_path, "-pubout", "-out", public_path)
    return public_path


def make_ca(directory, name="berth-test-ca"):
    """A self-signed CA: returns (cert_path, key_path)."""
    key, cert = os.path.join(directory, f"{name}.key"), os.path.join(directory, f"{name}.crt")
    gen_ec_key(key)
    openssl("req", "-x509", "-new", "-key", key, "-sha256", "-days", "2", "-subj", f"/CN={name}",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            "-out", cert)
    return cert, key


def make_cert(directory, name, ca_cert, ca_key, cn=None, san="IP:127.0.0.1,DNS:localhost", client=False,
              serial=None, rsa=False):
    """A leaf certificate signed by the CA: returns (cert_path, key_path)."""
    key, csr, cert = (os.path.join(directory, f"{name}.{ext}") for ext in ("key", "csr", "crt"))
    (gen_rsa_key if rsa else gen_ec_key)(key)
    openssl("req", "-new", "-key", key, "-subj", f"/CN={cn or name}", "-out", csr)
    ext = os.path.join(directory, f"{name}.ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\n")
        f.write(f"extendedKeyUsage={'clientAuth' if client else 'serverAuth'}\n")
        if san and not client:
            f.write(f"subjectAltName={san}\n")
    openssl("x509", "-req", "-in", csr, "-CA", ca_cert, "-CAkey", ca_key, "-days", "2", "-sha256",
            "-set_serial", str(serial if serial is not None else random.getrandbits(62)), "-extfile", ext,
            "-out", cert)
    return cert, key


def b64url(data):
    if isinstance(data, str):
        data = data.encode()
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _der_ecdsa_to_raw(der):
    """DER ECDSA-Sig-Value (SEQUENCE { INTEGER r, INTEGER s }) -> r||s, 32 bytes each."""
    def read_len(buf, i):
        n = buf[i]
        if n < 0x80:
            return n, i + 1
        count = n & 0x7F
        return int.from_bytes(buf[i + 1:i + 1 + count], "big"), i + 1 + count
    if der[0] != 0x30:
        raise ValueError("not a DER sequence")
    _, i = read_len(der, 1)
    out = b""
    for _ in range(2):
        if der[i] != 0x02:
            raise ValueError("not a DER integer")
        n, i = read_len(der, i + 1)
        value = int.from_bytes(der[i:i + n], "big")
        i += n
        out += value.to_bytes(32, "big")
    return out


def sign_sha256(key_path, data, alg):
    """Signature of data with a PEM private key, as JWS wants it (ES256: raw r||s)."""
    sig = openssl("dgst", "-sha256", "-sign", key_path, input=data)
    return _der_ecdsa_to_raw(sig) if alg == "ES256" else sig


def make_jwt(claims, key_path=None, alg="RS256", header=None, signature=None):
    """header.claims.signature. With key_path the signature is made by openssl (RS256/ES256);
    HS256 takes the raw key bytes as key (key_path is then a bytes secret); "none" or an explicit
    signature (bytes) skips signing."""
    import hmac
    head = {"alg": alg, "typ": "JWT"}
    head.update(header or {})
    signing_input = b64url(json.dumps(head, separators=(",", ":"))) + "." + \
        b64url(json.dumps(claims, separators=(",", ":")))
    if signature is None:
        if alg == "none":
            signature = b""
        elif alg == "HS256":
            signature = hmac.new(key_path, signing_input.encode(), hashlib.sha256).digest()
        else:
            signature = sign_sha256(key_path, signing_input.encode(), alg)
    return signing_input + "." + b64url(signature)


def jwt_claims(token):
    """The (unverified) claims of a JWT."""
    return json.loads(b64url_decode(token.split(".")[1]))
