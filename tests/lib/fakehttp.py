"""Scripted HTTP(S) servers for tests whose berth talks to something else (a registry, a token realm,
a peer, a host a redirect names): every request is answered by a function of the test's and kept,
headers and body, for the test to look at afterwards.

    realm = fakehttp.FakeServer(lambda req: (200, b'{"token":"T"}', {"Content-Type": "application/json"}))
    self.addCleanup(realm.close)
    ...
    self.assertEqual(realm.seen(), [])  # nobody asked it

answer(req) returns (status, body, headers): body is bytes, or an iterable of bytes written and
flushed piece by piece (then headers say Content-Length; a piece may wait on `stopping`, set by
close()). tls=(cert, key) serves HTTPS (the handshake runs on the connection's own thread). An answer
that raises is kept in `errors` and answered 500. Standard library only (tests/lib/hostile_upstream.py
is the raw-socket sibling, for answers that break HTTP itself).
"""

import http.server
import json
import socketserver
import ssl
import threading
import traceback
import urllib.parse

__all__ = ["Seen", "FakeServer", "json_reply"]


class Seen:
    """One request as the fake read it."""

    def __init__(self, method, target, headers, body):
        self.method, self.target, self.body = method, target, body
        self.headers = {k.lower(): v for k, v in headers.items()}
        parts = urllib.parse.urlsplit(target)
        self.path = parts.path
        self.query = urllib.parse.parse_qs(parts.query, keep_blank_values=True)

    def header(self, name):
        return self.headers.get(name.lower())

    def __repr__(self):
        return f"<{self.method} {self.target} Authorization={self.header('Authorization')!r}>"


def json_reply(doc, status=200, headers=None):
    return status, json.dumps(doc).encode(), {"Content-Type": "application/json", **(headers or {})}


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _any(self):
        fake = self.server.fake
        req = Seen(self.command, self.path, self.headers, self._body())
        with fake.lock:
            fake.requests.append(req)
        try:
            status, body, headers = fake.answer(req)
        except Exception:  # the test's mistake: kept for it to fail on
            with fake.lock:
                fake.errors.append(f"{req!r}: {traceback.format_exc()}")
            status, body, headers = 500, b"", {}
        headers = dict(headers or {})
        if isinstance(body, (bytes, bytearray)):
            headers.setdefault("Content-Length", str(len(body)))
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command == "HEAD":
            return
        try:
            for piece in [body] if isinstance(body, (bytes, bytearray)) else body:
                self.wfile.write(piece)
                self.wfile.flush()
        except OSError:
            self.close_connection = True

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _any


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def finish_request(self, request, client_address):
        if self.fake.tls is None:
            return super().finish_request(request, client_address)
        wrapped = self.fake.tls.wrap_socket(request, server_side=True, do_handshake_on_connect=False)
        try:
            wrapped.settimeout(10)
            wrapped.do_handshake()
            wrapped.settimeout(None)
        except (OSError, ValueError):
            wrapped.close()
            return  # not TLS, or a client that refused the certificate
        try:
            super().finish_request(wrapped, client_address)
        finally:
            wrapped.close()  # shutdown_request closes only the socket it was given, detached by the wrap


class FakeServer:
    def __init__(self, answer, tls=None, name="fake"):
        self.answer, self.name = answer, name
        self.tls = None
        if tls is not None:
            self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.tls.load_cert_chain(*tls)
        self.lock = threading.Lock()
        self.requests, self.errors = [], []
        self.stopping = threading.Event()
        self.server = _Server(("127.0.0.1", 0), _Handler)
        self.server.fake = self
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.1,), name=name, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def seen(self, path_prefix=""):
        """The requests read so far whose path starts with path_prefix."""
        with self.lock:
            return [r for r in self.requests if r.path.startswith(path_prefix)]

    def close(self):
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)
