"""CNCF Distribution (Debian's docker-registry) as a real upstream for berth's proxy tests, and a
throttling TCP relay to put between berth and it.

Standard library only. A Distribution runs on a free loopback port with its own temp dir
(config.yml, data/, a log holding both its logrus lines and its access log in combined log
format, one line per finished request). It can be killed and started again on the same port and
data, with htpasswd (bcrypt) Basic authentication and/or TLS. Content is pushed into it with
plain registry requests (POST + PUT of blobs, PUT of manifests).

Relay: a loopback TCP relay (listen port -> target port) that copies the target's answers back
at a rate the test sets (bytes/s; None for no limit), so a fetch through it is still in flight
while the test acts (kills the upstream, sends more clients). It can also flip one byte of every
response body (an upstream serving bytes that do not match their digest) or answer every request
with a 5xx itself. It records each connection's client port and the request lines sent through
it, and `owner_pid` maps a relayed connection back to the process that opened it (through
/proc), which tells which berth replica fetched what. slow_get reads a response on a raw socket
and tells a complete body from one cut short.
"""

import collections
import http.client
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import berthtest as bt  # noqa: E402

BIN = os.environ.get("DISTRIBUTION_BIN", "/usr/bin/docker-registry")
READY_TIMEOUT = 20

# 127.0.0.1 - - [23/Nov/2026:18:02:19 +0000] "GET /v2/ HTTP/1.1" 200 2 "" "curl/7.88.1"
ACCESS_LINE = re.compile(r'^(\S+) \S+ (\S+) \[[^\]]+\] "(\S+) (\S+) [^"]*" (\d{3}) (\d+|-)')


def port_bindable(port):
    """Whether a listener could bind 127.0.0.1:port now (SO_REUSEADDR, as Go's net.Listen sets it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def available():
    return os.path.isfile(BIN) and os.access(BIN, os.X_OK)


def skip_unless_available(what):
    """Exit 0 (the whole test skipped) with a message when docker-registry is not installed."""
    if not available():
        print(f"SKIP {what}: {BIN} (CNCF Distribution, Debian package docker-registry) is not installed; "
              f"the proxy tests need it as the upstream registry", file=sys.stderr)
        sys.exit(0)


class Access:
    """One line of Distribution's access log."""

    def __init__(self, method, path, status, user):
        self.method, self.path, self.status, self.user = method, path, status, user

    def __repr__(self):
        return f"{self.method} {self.path} {self.status}"


class Distribution:
    """One docker-registry process. users: {name: password} turns on htpasswd Basic auth;
    tls: (cert_path, key_path) serves HTTPS (then ssl_context must trust it for pushes)."""

    def __init__(self, users=None, tls=None, ssl_context=None):
        self.tmp = tempfile.mkdtemp(prefix="berth-distribution-")
        self.data = os.path.join(self.tmp, "data")
        self.users = dict(users or {})
        self.tls = tls
        self.ssl_context = ssl_context
        self.port = None
        self.proc = None
        self.log_path = os.path.join(self.tmp, "registry.log")
        self._log = None

    @property
    def scheme(self):
        return "https" if self.tls else "http"

    @property
    def url(self):
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def write_config(self):
        lines = [
            "version: 0.1",
            "log:",
            "  level: info",
            "  formatter: text",
            "  accesslog:",
            "    disabled: false",
            "storage:",
            "  filesystem:",
            f"    rootdirectory: {self.data}",
            "  delete:",
            "    enabled: true",
            "  maintenance:",
            "    uploadpurging:",
            "      enabled: false",
            "http:",
            f"  addr: 127.0.0.1:{self.port}",
            "  secret: berth-proxy-tests",
        ]
        if self.tls:
            lines += ["  tls:", f"    certificate: {self.tls[0]}", f"    key: {self.tls[1]}"]
        if self.users:
            htpasswd = bt.write_htpasswd(os.path.join(self.tmp, "htpasswd"), self.users)
            lines += ["auth:", "  htpasswd:", "    realm: distribution-test", f"    path: {htpasswd}"]
        path = os.path.join(self.tmp, "config.yml")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def start(self):
        """Start on a free port (the same port again after stop/kill); wait until /v2/ answers."""
        fixed = self.port is not None
        for attempt in range(5):
            if not fixed:
                self.port = bt.free_port()
            config = self.write_config()
            self._log = open(self.log_path, "ab")
            self.proc = subprocess.Popen([BIN, "serve", config], stdin=subprocess.DEVNULL, stdout=self._log,
                                         stderr=self._log, start_new_session=True)
            try:
                self.wait_ready()
                return self
            except AssertionError:
                in_use = self.proc.poll() is not None and "address already in use" in self.log()[-2000:]
                self.kill()
                if not in_use or attempt == 4:
                    raise
                if fixed:  # the port is someone else's for now: wait until it can be bound again
                    bt.poll(lambda: port_bindable(self.port), 10, 0.05, f"port {self.port} to be free again")
        raise AssertionError("could not start docker-registry")

    def wait_ready(self, timeout=READY_TIMEOUT):
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"docker-registry exited with {self.proc.returncode}: {self.log()[-2000:]}")
            try:
                if self.request("GET", "/v2/", timeout=2, auth=False).status in (200, 401):
                    return
            except (OSError, http.client.HTTPException):
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"docker-registry not ready after {timeout}s: {self.log()[-2000:]}")
            time.sleep(0.05)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        """SIGKILL, as a crash: nothing is finished or flushed."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        if self._log:
            self._log.close()
            self._log = None

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        if self._log:
            self._log.close()
            self._log = None

    def restart(self):
        assert not self.alive()
        return self.start()

    def cleanup(self):
        self.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- logs

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def access_log(self):
        """Every finished request, oldest first."""
        out = []
        for line in self.log().splitlines():
            m = ACCESS_LINE.match(line)
            if m:
                out.append(Access(m.group(3), m.group(4), int(m.group(5)), m.group(2)))
        return out

    def requests(self, method=None, path=None, contains=None):
        """Access log entries with this method and exact path (query ignored) or path substring."""
        out = []
        for a in self.access_log():
            p = a.path.split("?", 1)[0]
            if method and a.method != method:
                continue
            if path is not None and p != path:
                continue
            if contains is not None and contains not in p:
                continue
            out.append(a)
        return out

    # ---- requests and pushes

    def auth_headers(self):
        if not self.users:
            return {}
        user, password = next(iter(self.users.items()))
        return bt.basic_auth(user, password)

    def request(self, method, path, body=None, headers=None, timeout=60, auth=True):
        if self.tls:
            conn = http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout, context=self.ssl_context)
        else:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = dict(self.auth_headers() if auth else {})
        h.update(headers or {})
        try:
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            return bt.Resp(r.status, r.getheaders(), r.read())
        finally:
            conn.close()

    def push_blob(self, repo, data):
        r = self.request("POST", f"/v2/{repo}/blobs/uploads/", headers={"Content-Length": "0"})
        if r.status != 202:
            raise AssertionError(f"upstream POST upload in {repo}: {r}")
        loc = bt.location_path(r.header("Location"))
        digest = bt.sha256_digest(data)
        r = self.request("PUT", bt.with_query(loc, digest=digest), body=data,
                         headers={"Content-Type": "application/octet-stream"})
        if r.status != 201:
            raise AssertionError(f"upstream PUT blob {digest} in {repo}: {r}")
        return digest

    def put_manifest(self, repo, ref, data, media_type=bt.OCI_MANIFEST):
        r = self.request("PUT", f"/v2/{repo}/manifests/{ref}", body=data, headers={"Content-Type": media_type})
        if r.status != 201:
            raise AssertionError(f"upstream PUT manifest {repo}:{ref}: {r}")
        return r

    def push_image(self, repo, tag=None, layer_sizes=(1024,), img=None):
        """Push an image (made here unless given): blobs, then the manifest by tag (or digest)."""
        img = img or bt.make_image(layer_sizes)
        for data in img["blobs"].values():
            self.push_blob(repo, data)
        self.put_manifest(repo, tag or img["digest"], img["manifest"])
        img["repo"], img["tag"] = repo, tag
        return img


# --------------------------------------------------------------------------- relay


class Relay:
    """127.0.0.1:port -> 127.0.0.1:target_port; target->client bytes paced at `rate` bytes/s.

    With corrupt_offset=N, byte N of every response body (that has one) is flipped on its way
    back: an upstream whose bytes do not match their digests. set_fail_status(503) stops
    relaying: every request gets that status and an empty body, as from a failing load
    balancer in front of the registry."""

    def __init__(self, target_port, rate=None, corrupt_offset=None):
        self.target_port = target_port
        self.rate = rate
        self.corrupt_offset = corrupt_offset
        self.fail_status = None
        self.lock = threading.Lock()
        self.conns = []  # {"client_port", "client", "server", "requests": [...], "down": bytes}
        self.failed = []  # request lines answered with fail_status
        self.failing = []  # client sockets of connections answered with fail_status
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(128)
        self.port = self.listener.getsockname()[1]
        self.closed = False
        self.thread = threading.Thread(target=self._accept_loop, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def set_rate(self, rate):
        self.rate = rate

    def set_fail_status(self, status):
        """From now on answer every request with `status` (None: relay again); relayed
        connections still open are closed, so the next request comes on a new one."""
        self.fail_status = status
        with self.lock:
            conns, failing = list(self.conns), list(self.failing)
        for c in conns if status else ():
            self._close(c)
        for client in failing if not status else ():
            try:
                client.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _accept_loop(self):
        while not self.closed:
            try:
                client, addr = self.listener.accept()
            except OSError:
                return
            if self.fail_status:
                threading.Thread(target=self._fail, args=(client, self.fail_status), daemon=True).start()
                continue
            try:
                server = socket.create_connection(("127.0.0.1", self.target_port), timeout=10)
            except OSError:
                abort(client)  # the upstream is down: reset, as a dead host behind a balancer would
                continue
            server.settimeout(None)
            client.settimeout(None)
            conn = {"client_port": addr[1], "client": client, "server": server, "requests": [], "down": 0,
                    "last_down": 0.0, "open": True, "mutator": BodyCorrupter(self.corrupt_offset) if self.corrupt_offset is not None
                    else None}
            with self.lock:
                self.conns.append(conn)
            threading.Thread(target=self._up, args=(conn,), daemon=True).start()
            threading.Thread(target=self._down, args=(conn,), daemon=True).start()

    def _fail(self, client, status):
        """Answer every request head on this connection with `status` (bodies are not expected:
        the upstream is only read from)."""
        buf = b""
        client.settimeout(30)
        with self.lock:
            self.failing.append(client)
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = client.recv(65536)
                    if not data:
                        return
                    buf += data
                head, buf = buf.split(b"\r\n\r\n", 1)
                line = head.split(b"\r\n", 1)[0].decode("latin-1")
                with self.lock:
                    self.failed.append(line)
                client.sendall(f"HTTP/1.1 {status} Failing\r\nContent-Length: 0\r\n\r\n".encode())
        except OSError:
            pass
        finally:
            with self.lock:
                self.failing.remove(client)
            client.close()

    def _up(self, conn):
        """client -> server, unpaced; request lines recorded."""
        pending = b""
        try:
            while True:
                data = conn["client"].recv(65536)
                if not data:
                    break
                pending = (pending + data)[-8192:]
                for m in re.finditer(rb"(GET|HEAD|POST|PUT|PATCH|DELETE) (\S+) HTTP/1\.[01]\r\n", pending):
                    with self.lock:
                        conn["requests"].append((m.group(1).decode(), m.group(2).decode("latin-1")))
                    if conn["mutator"]:
                        conn["mutator"].methods.append(m.group(1).decode())
                pending = pending[pending.rfind(b"\r\n") + 2:] if b"\r\n" in pending else pending
                conn["server"].sendall(data)
        except OSError:
            pass
        self._close(conn)

    def _down(self, conn):
        """server -> client, paced at self.rate."""
        try:
            while True:
                rate = self.rate
                size = 65536 if not rate else max(1024, min(65536, int(rate) // 50))
                data = conn["server"].recv(size)
                if not data:
                    break
                if conn["mutator"]:
                    data = conn["mutator"].feed(data)
                conn["client"].sendall(data)
                with self.lock:
                    conn["down"] += len(data)
                    conn["last_down"] = time.monotonic()
                if rate:
                    time.sleep(len(data) / rate)
        except OSError:
            pass
        self._close(conn)

    def _close(self, conn):
        with self.lock:
            if not conn["open"]:
                return
            conn["open"] = False
        for s in (conn["client"], conn["server"]):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def connections(self, path_contains=None):
        """Snapshot of connections (open or not) that carried a request whose path contains this."""
        with self.lock:
            out = []
            for c in self.conns:
                if path_contains is None or any(path_contains in p for _, p in c["requests"]):
                    out.append({k: (list(v) if k == "requests" else v) for k, v in c.items()
                                if k not in ("client", "server")})
            return out

    def active(self, window=0.2):
        """How many connections carried bytes back within the last `window` seconds."""
        now = time.monotonic()
        with self.lock:
            return sum(1 for c in self.conns if c["open"] and now - c["last_down"] < window)

    def close(self):
        self.closed = True
        try:
            self.listener.close()
        except OSError:
            pass
        with self.lock:
            conns, failing = list(self.conns), list(self.failing)
        for c in conns:
            self._close(c)
        for client in failing:
            try:
                client.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class BodyCorrupter:
    """Follows the responses on one connection (Content-Length bodies; HEAD answers have none)
    and flips byte `offset` of each body."""

    def __init__(self, offset):
        self.offset = offset
        self.methods = collections.deque()  # request methods, in order, filled by the relay
        self.head = b""
        self.remaining = None  # body bytes still to come of the current response
        self.position = 0

    def feed(self, data):
        out = bytearray()
        i = 0
        while i < len(data):
            if self.remaining is None:
                self.head += data[i:i + 1]
                out += data[i:i + 1]
                i += 1
                if self.head.endswith(b"\r\n\r\n"):
                    self._start_body()
                continue
            take = min(self.remaining, len(data) - i)
            chunk = bytearray(data[i:i + take])
            if self.position <= self.offset < self.position + take:
                chunk[self.offset - self.position] ^= 0x01
            out += chunk
            self.position += take
            self.remaining -= take
            i += take
            if self.remaining == 0:
                self.remaining = None
        return bytes(out)

    def _start_body(self):
        text = self.head.decode("latin-1")
        self.head = b""
        status = int(text.split(" ", 2)[1])
        method = self.methods.popleft() if self.methods else "GET"
        m = re.search(r"(?im)^content-length:\s*(\d+)", text)
        length = int(m.group(1)) if m else 0
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200 or not length:
            return
        self.remaining, self.position = length, 0


def abort(sock):
    """Close with RST (SO_LINGER 0)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    except OSError:
        pass
    sock.close()


def owner_pid(local_port, remote_port, pids):
    """Which of pids holds the TCP socket 127.0.0.1:local_port -> 127.0.0.1:remote_port (None if none)."""
    inode = None
    want_local, want_remote = f"0100007F:{local_port:04X}", f"0100007F:{remote_port:04X}"
    for table in ("/proc/net/tcp",):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    if parts[1] == want_local and parts[2] == want_remote:
                        inode = parts[9]
                        break
        except OSError:
            return None
    if not inode or inode == "0":
        return None
    target = f"socket:[{inode}]"
    for pid in pids:
        fd_dir = f"/proc/{pid}/fd"
        try:
            for fd in os.listdir(fd_dir):
                try:
                    if os.readlink(os.path.join(fd_dir, fd)) == target:
                        return pid
                except OSError:
                    continue
        except OSError:
            continue
    return None


# --------------------------------------------------------------------------- raw HTTP reads


def slow_get(port, path, first_bytes_event=None, stop_reading=None, chunk=65536, pause=0.0, timeout=60):
    """GET on a raw socket, reading the body `chunk` bytes at a time with `pause` between reads.

    Returns {"status", "headers", "body", "length" (Content-Length or None), "complete", "error"}.
    first_bytes_event (a threading.Event) is set once the first body byte has arrived. Stops
    at EOF, an error, the end of a Content-Length body, or when stop_reading is set."""
    out = {"status": None, "headers": {}, "body": b"", "length": None, "complete": False, "error": None}
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            data = s.recv(65536)
            if not data:
                out["error"] = "closed before the headers"
                return out
            buf += data
        head, body = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        out["status"] = int(lines[0].split(" ")[1])
        for line in lines[1:]:
            k, _, v = line.partition(":")
            out["headers"][k.strip().lower()] = v.strip()
        if "content-length" in out["headers"]:
            out["length"] = int(out["headers"]["content-length"])
        chunked = out["headers"].get("transfer-encoding", "").lower() == "chunked"
        raw = bytearray(body)
        while True:
            if raw and first_bytes_event is not None:
                first_bytes_event.set()
            if out["length"] is not None and len(raw) >= out["length"]:
                break
            if stop_reading is not None and stop_reading.is_set():
                out["error"] = "stopped reading"
                break
            try:
                data = s.recv(chunk)
            except OSError as err:
                out["error"] = repr(err)
                break
            if not data:
                out["error"] = "connection closed"
                break
            raw += data
            if pause:
                time.sleep(pause)
        if chunked:
            out["body"], out["complete"] = dechunk(bytes(raw))
        else:
            out["body"] = bytes(raw[:out["length"]]) if out["length"] is not None else bytes(raw)
            out["complete"] = out["length"] is not None and len(raw) >= out["length"]
        return out
    finally:
        s.close()


def dechunk(raw):
    """(body, complete) of a chunked body that may be cut short."""
    body, i = b"", 0
    while True:
        j = raw.find(b"\r\n", i)
        if j < 0:
            return body, False
        size = int(raw[i:j].split(b";")[0] or b"0", 16)
        if size == 0:
            return body, True
        if len(raw) < j + 2 + size:
            return body + raw[j + 2:], False
        body += raw[j + 2:j + 2 + size]
        i = j + 2 + size + 2


def quote(value):
    return urllib.parse.quote(value, safe="")


def tls_context(ca):
    ctx = ssl.create_default_context(cafile=ca)
    ctx.check_hostname = True
    return ctx


def concurrent_gets(requests, timeout=120):
    """GET (server, path) pairs all at once (released together by a barrier); returns the Resps in
    order, or raises AssertionError naming every request that failed to complete."""
    barrier = threading.Barrier(len(requests))
    results, errors = [None] * len(requests), []

    def client(i, server, path):
        try:
            barrier.wait(10)
            results[i] = server.get(path, timeout=timeout)
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(f"request {i} to port {server.port}: {err!r}")
    threads = [threading.Thread(target=client, args=(i, *r)) for i, r in enumerate(requests)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 60)
    if errors:
        raise AssertionError("; ".join(errors))
    return results
