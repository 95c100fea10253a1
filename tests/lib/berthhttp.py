"""HTTP client helpers of the test harness: a response (Resp), the Location and query helpers,
the Prometheus text parser, and raw sockets for requests http.client will not send.

Standard library only; part of `import berthtest as bt` (see berthtest.py).
"""

import json
import socket
import time
import urllib.parse

__all__ = ["REQUEST_TIMEOUT", "SPEC_ERROR_CODES", "Resp", "location_path", "with_query", "parse_metrics",
           "connect", "RawReader", "raw_exchange", "wait_closed"]

REQUEST_TIMEOUT = 30  # seconds, per HTTP request

SPEC_ERROR_CODES = {
    "BLOB_UNKNOWN", "BLOB_UPLOAD_INVALID", "BLOB_UPLOAD_UNKNOWN", "DIGEST_INVALID",
    "MANIFEST_BLOB_UNKNOWN", "MANIFEST_INVALID", "MANIFEST_UNKNOWN", "NAME_INVALID",
    "NAME_UNKNOWN", "SIZE_INVALID", "UNAUTHORIZED", "DENIED", "UNSUPPORTED", "TOOMANYREQUESTS",
    "TAG_INVALID", "MANIFEST_UNVERIFIED",
}


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


def location_path(loc):
    """Path + query of a Location header (which may be absolute)."""
    parts = urllib.parse.urlsplit(loc)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def with_query(path, **params):
    return path + ("&" if "?" in path else "?") + urllib.parse.urlencode(params)


def parse_metrics(text):
    """{metric{labels}: float} of a Prometheus text exposition (comments skipped)."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key.strip()] = float(value)
    return out


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
