"""A deliberately misbehaving upstream OCI registry for berth's proxy tests.

Standard library only. A HostileUpstream listens on a loopback port and speaks HTTP/1.1 on raw
sockets (one thread per connection), so a behaviour can misbehave anywhere: in the status line,
the headers, the framing or the timing. It records every request it read (`requests`, `received`)
so tests can count fetches.

Without rules it is an honest registry for what was given to it (`add_image`, `add_blob`,
`add_tags`): manifests by tag and digest, blobs, tag lists with `n`/`last` and `Link`, HEAD, and
404 with a spec error body for the rest. `on(pattern, behaviour)` makes requests whose path matches
the regular expression answer with the behaviour instead; the first matching rule wins, and
`clear()` makes it honest again. A behaviour is a callable `behaviour(conn, request) -> bool` that
writes whatever it likes with `conn` and returns whether the connection may carry another request.
The module-level functions build the usual ones (`respond`, `json_answer`, `silent`, `trickle`,
`raw`, `firehose`, `redirect`, ...).

A behaviour that raises (other than OSError: the peer went away) is recorded in `errors`, and its
connection closed. `close()` stops everything: the accept loop, every connection and every
sleeping behaviour.
"""

import hashlib
import json
import re
import socket
import struct
import threading
import time
import traceback
import urllib.parse

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MAX_REQUEST_HEAD = 64 * 1024

REASONS = {200: "OK", 206: "Partial Content", 301: "Moved Permanently", 302: "Found", 303: "See Other",
           307: "Temporary Redirect", 308: "Permanent Redirect", 400: "Bad Request", 401: "Unauthorized",
           403: "Forbidden", 404: "Not Found", 429: "Too Many Requests", 500: "Internal Server Error",
           502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}


def sha256_digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


class Request:
    """One request as the upstream read it."""

    def __init__(self, method, target, headers, conn_id, peer):
        self.method, self.target, self.headers = method, target, headers
        parts = urllib.parse.urlsplit(target)
        self.path = parts.path
        self.query = urllib.parse.parse_qs(parts.query, keep_blank_values=True)
        self.conn_id, self.peer = conn_id, peer
        self.time = time.monotonic()
        self.sent = None  # bytes a streaming behaviour (firehose) got written, as it goes

    def header(self, name):
        values = [v for k, v in self.headers if k.lower() == name.lower()]
        return values[0] if values else None

    def q(self, name, default=None):
        return self.query.get(name, [default])[0]

    def __repr__(self):
        return f"<{self.method} {self.target}>"


class Conn:
    """One accepted connection, as behaviours see it."""

    def __init__(self, server, sock, conn_id):
        self.server, self.sock, self.id = server, sock, conn_id
        self.buf = b""
        self.busy = None  # the request whose behaviour runs now

    @property
    def stopping(self):
        return self.server.stop_event.is_set()

    def send(self, data):
        """Write all of data; False when the peer went away or the server is stopping."""
        if self.stopping:
            return False
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            return False

    def sleep(self, seconds):
        """Pause (a trickle's pace); False when the server is stopping."""
        return not self.server.stop_event.wait(seconds)

    def hold(self):
        """Say nothing until the peer closes or the server stops (whatever it sends is dropped)."""
        while not self.stopping:
            try:
                self.sock.settimeout(0.2)
                if not self.sock.recv(65536):
                    return
            except socket.timeout:
                continue
            except OSError:
                return

    def reset(self):
        """Close with a TCP RST (SO_LINGER 0)."""
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.close()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def read_request(self):
        """The next request on this connection, or None at EOF / on garbage / when stopping."""
        while b"\r\n\r\n" not in self.buf:
            if len(self.buf) > MAX_REQUEST_HEAD or self.stopping:
                return None
            try:
                self.sock.settimeout(1.0)
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return None
            if not data:
                return None
            self.buf += data
        self.sock.settimeout(None)
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            return None
        headers = []
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers.append((k.strip(), v.strip()))
        req = Request(parts[0], parts[1], headers, self.id, self.sock.getpeername() if self.sock else None)
        length = int(req.header("Content-Length") or 0)
        while len(self.buf) < length:  # berth sends no bodies upstream; drop any
            try:
                data = self.sock.recv(65536)
            except OSError:
                return None
            if not data:
                return None
            self.buf += data
        self.buf = self.buf[length:]
        return req


def head_bytes(status, headers=(), reason=None, version="HTTP/1.1"):
    reason = REASONS.get(status, "Whatever") if reason is None else reason
    lines = [f"{version} {status} {reason}"] + [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _write(conn, req, status, body, headers, content_length=True, keep=True):
    headers = list(headers)
    if content_length and not any(k.lower() == "content-length" for k, _ in headers):
        headers.append(("Content-Length", str(len(body))))
    if not keep:
        headers.append(("Connection", "close"))
    ok = conn.send(head_bytes(status, headers))
    if ok and req.method != "HEAD" and body:
        ok = conn.send(body)
    return ok and keep and (req.header("Connection") or "").lower() != "close"


def error_body(code, message="hostile upstream says so"):
    return json.dumps({"errors": [{"code": code, "message": message}]}).encode()


# --------------------------------------------------------------------------- behaviours


def respond(status, body=b"", headers=(), keep=False):
    """A well-formed answer (Content-Length set unless headers carry one)."""
    if isinstance(body, str):
        body = body.encode()

    def behaviour(conn, req):
        return _write(conn, req, status, body, headers, keep=keep)
    return behaviour


def json_answer(doc, status=200, headers=(), content_type="application/json"):
    body = doc if isinstance(doc, (bytes, bytearray)) else json.dumps(doc).encode()
    return respond(status, bytes(body), [("Content-Type", content_type), *headers])


def manifest_answer(data, media_type=OCI_MANIFEST, digest=None, headers=()):
    """A manifest answer; digest (a string) goes in Docker-Content-Digest when given."""
    extra = [("Content-Type", media_type)]
    if digest:
        extra.append(("Docker-Content-Digest", digest))
    return respond(200, data, [*extra, *headers])


def status_storm(statuses=(500, 503, 429)):
    """5xx / 429 answers, cycling through statuses, with a Retry-After nobody should honour."""
    counter = [0]
    lock = threading.Lock()

    def behaviour(conn, req):
        with lock:
            status = statuses[counter[0] % len(statuses)]
            counter[0] += 1
        return _write(conn, req, status, error_body("UNAVAILABLE"),
                      [("Content-Type", "application/json"), ("Retry-After", "86400")], keep=True)
    return behaviour


def silent():
    """Reads the request and never answers."""
    def behaviour(conn, req):
        conn.hold()
        return False
    return behaviour


def trickle(data, interval, chunk=1, then="close"):
    """Sends data (head and body: raw bytes) `chunk` bytes every `interval` seconds; then closes,
    or holds the connection open (then="hold")."""
    def behaviour(conn, req):
        for i in range(0, len(data), chunk):
            if not conn.send(data[i:i + chunk]) or not conn.sleep(interval):
                return False
        if then == "hold":
            conn.hold()
        return False
    return behaviour


def trickle_body(status, headers, body, interval, chunk=1, then="close"):
    """The head at once, then the body trickled."""
    def behaviour(conn, req):
        if not conn.send(head_bytes(status, headers)):
            return False
        return trickle(body, interval, chunk, then)(conn, req)
    return behaviour


def raw(data, then="close"):
    """Sends raw bytes, then closes ("close"), resets ("reset") or holds the connection ("hold")."""
    def behaviour(conn, req):
        conn.send(data)
        if then == "hold":
            conn.hold()
        elif then == "reset":
            conn.reset()
        return False
    return behaviour


def reset():
    """Closes with a RST as soon as the request is read."""
    def behaviour(conn, req):
        conn.reset()
        return False
    return behaviour


def firehose(prefix, unit, pause=0.0, limit=256 << 20):
    """Sends prefix, then unit over and over (as fast as the peer reads, or one unit per `pause`)
    until the peer goes away, the server stops, or `limit` bytes in all went out (then closes)."""
    def behaviour(conn, req):
        req.sent = 0
        if not conn.send(prefix):
            return False
        sent = req.sent = len(prefix)
        block = unit if pause else unit * max(1, 65536 // max(1, len(unit)))
        while sent < limit:
            piece = block[:limit - sent]
            if not conn.send(piece):
                return False
            sent += len(piece)
            req.sent = sent
            if pause and not conn.sleep(pause):
                return False
        return False
    return behaviour


def redirect(location, status=302, headers=()):
    def behaviour(conn, req):
        loc = location(req) if callable(location) else location
        return _write(conn, req, status, b"", [("Location", loc), *headers], keep=True)
    return behaviour


def bearer_protected(realm, service, token, inner):
    """401 with a Bearer challenge unless the request carries `Bearer <token>`; then `inner`."""
    def behaviour(conn, req):
        if req.header("Authorization") == f"Bearer {token}":
            return inner(conn, req)
        scope = None
        m = re.match(r"^/v2/(.+)/(manifests|blobs|tags)/", req.path)
        if m:
            scope = f"repository:{m.group(1)}:pull"
        challenge = f'Bearer realm="{realm}",service="{service}"' + (f',scope="{scope}"' if scope else "")
        return _write(conn, req, 401, error_body("UNAUTHORIZED"),
                      [("Content-Type", "application/json"), ("WWW-Authenticate", challenge)], keep=True)
    return behaviour


def basic_protected(inner, realm="hostile"):
    """401 with a Basic challenge unless the request carries any Basic credentials; then `inner`."""
    def behaviour(conn, req):
        if (req.header("Authorization") or "").startswith("Basic "):
            return inner(conn, req)
        return _write(conn, req, 401, error_body("UNAUTHORIZED"),
                      [("Content-Type", "application/json"), ("WWW-Authenticate", f'Basic realm="{realm}"')],
                      keep=True)
    return behaviour


def dispatch(choose):
    """A behaviour picked per request: choose(req) returns the behaviour to run."""
    def behaviour(conn, req):
        return choose(req)(conn, req)
    return behaviour


# --------------------------------------------------------------------------- the server


class HostileUpstream:
    def __init__(self, host="127.0.0.1", name="upstream"):
        self.name = name
        self.host = host
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(1024)
        self.port = self.sock.getsockname()[1]
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.rules = []  # (compiled regex, method or None, behaviour)
        self.manifests = {}  # (repo, reference) -> (bytes, media type)
        self.blobs = {}  # (repo, digest) -> bytes
        self.tags = {}  # repo -> sorted list
        self.requests = []
        self.errors = []  # behaviours that raised (not for a closed connection)
        self.conns = {}
        self.threads = []
        self.next_id = 0
        self.accept_thread = None

    @property
    def url(self):
        return f"http://{self.host}:{self.port}"

    def start(self):
        self.accept_thread = threading.Thread(target=self._accept_loop, name=f"{self.name}-accept", daemon=True)
        self.accept_thread.start()
        return self

    def close(self):
        self.stop_event.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept loop
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass
        with self.lock:
            conns = list(self.conns.values())
            threads = list(self.threads)
        for c in conns:
            try:
                c.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()
        if self.accept_thread is not None:
            self.accept_thread.join(5)
        for t in threads:
            t.join(5)

    # ---- configuration

    def on(self, pattern, behaviour, method=None):
        """Requests whose path (without query) matches the regex answer with behaviour."""
        with self.lock:
            self.rules.append((re.compile(pattern), method, behaviour))
        return self

    def clear(self):
        """No rules: honest again."""
        with self.lock:
            self.rules = []

    def forget(self):
        """No content either: 404 for everything (besides /v2/)."""
        with self.lock:
            self.rules = []
            self.manifests.clear()
            self.blobs.clear()
            self.tags.clear()

    def add_blob(self, repo, data):
        with self.lock:
            self.blobs[(repo, sha256_digest(data))] = data
        return sha256_digest(data)

    def add_manifest(self, repo, reference, data, media_type=OCI_MANIFEST):
        with self.lock:
            self.manifests[(repo, reference)] = (data, media_type)
            self.manifests[(repo, sha256_digest(data))] = (data, media_type)
            if ":" not in reference:
                self.tags[repo] = sorted(set(self.tags.get(repo, [])) | {reference})

    def add_image(self, repo, tag, img):
        """An image as berthtest.make_image makes it: blobs and manifest (by tag and digest)."""
        for data in img["blobs"].values():
            self.add_blob(repo, data)
        self.add_manifest(repo, tag or img["digest"], img["manifest"])

    def add_tags(self, repo, tags):
        with self.lock:
            self.tags[repo] = sorted(set(self.tags.get(repo, [])) | set(tags))

    # ---- what it saw

    def received(self, contains=None, method=None, path=None):
        with self.lock:
            reqs = list(self.requests)
        return [r for r in reqs if (contains is None or contains in r.target) and (method is None or r.method == method)
                and (path is None or r.path == path)]

    def busy(self):
        """The requests whose behaviours (holding, trickling, streaming) run now."""
        with self.lock:
            return [c.busy for c in self.conns.values() if c.busy is not None]

    # ---- serving

    def _accept_loop(self):
        self.sock.settimeout(0.5)  # and looks at stop_event twice a second, should shutdown not wake it
        while not self.stop_event.is_set():
            try:
                sock, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                if self.stop_event.is_set():
                    sock.close()
                    return
                self.next_id += 1
                conn = Conn(self, sock, self.next_id)
                self.conns[conn.id] = conn
                t = threading.Thread(target=self._serve, args=(conn,), name=f"{self.name}-{conn.id}", daemon=True)
                self.threads = [x for x in self.threads if x.is_alive()]
                self.threads.append(t)
            t.start()

    def _serve(self, conn):
        try:
            while not self.stop_event.is_set():
                req = conn.read_request()
                if req is None:
                    return
                with self.lock:
                    self.requests.append(req)
                    rules = list(self.rules)
                behaviour = self.honest
                for pattern, method, b in rules:
                    if (method is None or method == req.method) and pattern.search(req.path):
                        behaviour = b
                        break
                conn.busy = req
                try:
                    keep = behaviour(conn, req)
                except OSError:
                    return
                except Exception:  # a mistake of the test's: recorded for it to fail on
                    with self.lock:
                        self.errors.append(f"{req!r}: {traceback.format_exc()}")
                    return
                finally:
                    conn.busy = None
                if not keep:
                    return
        finally:
            conn.close()
            with self.lock:
                self.conns.pop(conn.id, None)

    def honest(self, conn, req):
        """A plain registry of what was added."""
        if req.method not in ("GET", "HEAD"):
            return _write(conn, req, 405, error_body("UNSUPPORTED"), [("Content-Type", "application/json")])
        if req.path in ("/v2/", "/v2"):
            return _write(conn, req, 200, b"{}", [("Content-Type", "application/json")])
        m = re.match(r"^/v2/(.+)/(manifests|blobs)/([^/]+)$", req.path)
        if m:
            repo, kind, ref = m.groups()
            with self.lock:
                found = self.manifests.get((repo, ref)) if kind == "manifests" else self.blobs.get((repo, ref))
            if found is None:
                code = "MANIFEST_UNKNOWN" if kind == "manifests" else "BLOB_UNKNOWN"
                return _write(conn, req, 404, error_body(code), [("Content-Type", "application/json")])
            if kind == "manifests":
                data, media_type = found
                return _write(conn, req, 200, data, [("Content-Type", media_type),
                                                     ("Docker-Content-Digest", sha256_digest(data))])
            return _write(conn, req, 200, found, [("Content-Type", "application/octet-stream"),
                                                  ("Docker-Content-Digest", ref)])
        m = re.match(r"^/v2/(.+)/tags/list$", req.path)
        if m:
            repo = m.group(1)
            with self.lock:
                tags = self.tags.get(repo)
            if tags is None:
                return _write(conn, req, 404, error_body("NAME_UNKNOWN"), [("Content-Type", "application/json")])
            last = req.q("last", "")
            n = int(req.q("n", "0") or 0) or len(tags)
            after = [t for t in tags if t > last]
            page = after[:n]
            headers = [("Content-Type", "application/json")]
            if len(after) > n:
                headers.append(("Link", f'</v2/{repo}/tags/list?n={n}&last={page[-1]}>; rel="next"'))
            return _write(conn, req, 200, json.dumps({"name": repo, "tags": page}).encode(), headers)
        return _write(conn, req, 404, error_body("NAME_UNKNOWN"), [("Content-Type", "application/json")])
