"""A real NATS server (Debian's nats-server with JetStream) for tests, and the little of NATS's
client protocol they need: create a stream, count and read its messages. Standard library only:
the protocol is text lines (INFO, CONNECT, PING/PONG, SUB, PUB, MSG/HMSG), and JetStream's API is
request and reply on $JS.API subjects (https://docs.nats.io/reference/reference-protocols)."""

import base64
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time

from berthserver import free_port, poll

NATS_SERVER = shutil.which("nats-server") or "/usr/sbin/nats-server"


class NatsServer:
    """nats-server -js on a loopback port with its own store; stop() and start() keep both."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="berth-nats-")
        self.port = free_port()
        self.proc = None
        self.start()

    @property
    def url(self):
        return f"nats://127.0.0.1:{self.port}"

    def start(self):
        with open(os.path.join(self.dir, "server.log"), "ab") as log:
            self.proc = subprocess.Popen([NATS_SERVER, "-js", "-a", "127.0.0.1", "-p", str(self.port),
                                          "-sd", os.path.join(self.dir, "store")],
                                         stdout=log, stderr=log, start_new_session=True)

        def answers():
            if self.proc.poll() is not None:
                with open(os.path.join(self.dir, "server.log")) as f:
                    raise AssertionError(f"nats-server exited: {f.read()[-2000:]}")
            try:
                with Client(self.port) as c:
                    return c.request("$JS.API.INFO", b"").get("type", "").endswith("account_info_response")
            except OSError:
                return False
        poll(answers, 30, 0.1, "nats-server with JetStream")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def close(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class Client:
    """One connection; request() publishes with a reply inbox and returns the JSON answer."""

    def __init__(self, port, timeout=5):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""
        self._line()  # INFO
        self.sock.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true}\r\n'
                          b"PING\r\n")
        while self._line() != b"PONG":
            pass
        self.sock.sendall(b"SUB _INBOX.test.> 1\r\n")
        self.next = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.sock.close()

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise OSError("nats-server closed the connection")
        self.buf += data

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _bytes(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def request(self, subject, payload, timeout=5):
        self.next += 1
        reply = f"_INBOX.test.{self.next}"
        self.sock.sendall(f"PUB {subject} {reply} {len(payload)}\r\n".encode() + payload + b"\r\n")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            parts = self._line().split()
            if not parts or parts[0] in (b"PING",):
                self.sock.sendall(b"PONG\r\n")
                continue
            if parts[0] == b"MSG":
                body = self._bytes(int(parts[-1]))
            elif parts[0] == b"HMSG":
                raw = self._bytes(int(parts[-1]))
                body = raw[int(parts[-2]):]
            else:
                continue
            if parts[1].decode() == reply:
                return json.loads(body) if body else {}
        raise OSError(f"no answer to {subject}")


def create_stream(port, name, subjects):
    with Client(port) as c:
        answer = c.request(f"$JS.API.STREAM.CREATE.{name}",
                           json.dumps({"name": name, "subjects": subjects, "storage": "file",
                                       "duplicate_window": 120 * 10**9}).encode())
    if "error" in answer:
        raise AssertionError(f"stream {name}: {answer}")


def stream_messages(port, name):
    """Every message in the stream: (subject, headers text, data bytes), in stream order."""
    out = []
    with Client(port) as c:
        state = c.request(f"$JS.API.STREAM.INFO.{name}", b"")["state"]
        for seq in range(state["first_seq"], state["last_seq"] + 1) if state["messages"] else []:
            answer = c.request(f"$JS.API.STREAM.MSG.GET.{name}", json.dumps({"seq": seq}).encode())
            if "message" not in answer:
                continue
            m = answer["message"]
            headers = base64.b64decode(m.get("hdrs", "")).decode() if m.get("hdrs") else ""
            out.append((m["subject"], headers, base64.b64decode(m.get("data", ""))))
    return out
