#!/usr/bin/env python3
"""A fake node agent that lies about blobs, for the burst tests (tests/fault/test_agent_burst.py):
it holds a real agent certificate (signed by the cluster's CA, SAN DNS:berth-agent), tells every
replica where it listens every second (POST /_berth/v1/agents with its client certificate, body
{"port": P, "node": NODE}), so real agents rank it among themselves, and answers every blob GET
of a fellow agent with the right status and length and the wrong bytes:

    GET  /v2/NAME/blobs/DIGEST                -> 200, Content-Length = the blob's size, garbage
    GET  ... with Range: bytes=N- (or N-M)    -> 206, Content-Range, garbage
    HEAD /v2/NAME/blobs/DIGEST                -> 200, the right Content-Length
    anything else                             -> 404

The size comes from --sizes (a JSON file {digest: size}) or, for a digest not in it, a HEAD of
the blob on the replicas with the fake's client certificate. It serves TLS only to clients with a
certificate of the CA (as a real agent's peer listener does). Every request is written as one
JSON line to --log: {"client": IP, "method", "path", "range", "status", "sent"}; every
announcement's outcome too ({"announce": URL, "status"}), the first and every change.

    lying_agent.py --listen 0.0.0.0:5051 --cert agent.crt --key agent.key --ca ca.crt
                   --replica https://10.77.0.2:PORT [--replica ...] --log FILE [--sizes FILE]
                   [--node liar] [--interval 1]

Standard library only; runs inside its own network namespace (netlab host.popen).
"""

import argparse
import http.client
import http.server
import json
import re
import ssl
import sys
import threading
import time
import urllib.parse

BLOB = re.compile(r"/v2/(.+)/blobs/(sha256:[0-9a-f]{64})")
RANGE = re.compile(r"bytes=(\d+)-(\d*)")


class Liar:
    def __init__(self, args):
        self.args = args
        self.sizes = {}
        if args.sizes:
            with open(args.sizes) as f:
                self.sizes.update(json.load(f))
        self.log_lock = threading.Lock()
        self.log_file = open(args.log, "a", buffering=1)
        self.client_context = ssl.create_default_context(cafile=args.ca)
        self.client_context.load_cert_chain(args.cert, args.key)
        self.announced = {}

    def log(self, **entry):
        entry["t"] = round(time.time(), 3)
        with self.log_lock:
            self.log_file.write(json.dumps(entry) + "\n")

    def replica_request(self, url, method, path, body=None, headers=None):
        parts = urllib.parse.urlsplit(url)
        conn = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=5, context=self.client_context)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            data = r.read()
            return r.status, r.getheaders(), data
        finally:
            conn.close()

    def size_of(self, name, digest):
        if digest in self.sizes:
            return self.sizes[digest]
        for url in self.args.replica:
            try:
                status, headers, _ = self.replica_request(url, "HEAD", f"/v2/{name}/blobs/{digest}")
            except (OSError, http.client.HTTPException):
                continue
            if status == 200:
                length = dict((k.lower(), v) for k, v in headers).get("content-length")
                if length is not None:
                    self.sizes[digest] = int(length)
                    return int(length)
        return None

    def announce_forever(self):
        body = json.dumps({"port": self.args.port, "node": self.args.node}).encode()
        while True:
            for url in self.args.replica:
                try:
                    status = self.replica_request(url, "POST", "/_berth/v1/agents", body,
                                                  {"Content-Type": "application/json"})[0]
                except (OSError, http.client.HTTPException) as e:
                    status = f"{type(e).__name__}: {e}"
                if self.announced.get(url) != status:
                    self.announced[url] = status
                    self.log(announce=url, status=status)
            time.sleep(self.args.interval)


def handler_for(liar):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            self.answer(body=True)

        def do_HEAD(self):
            self.answer(body=False)

        def answer(self, body):
            path = urllib.parse.urlsplit(self.path).path
            wanted = self.headers.get("Range")
            entry = {"client": self.client_address[0], "method": self.command, "path": path, "range": wanted}
            m = BLOB.fullmatch(path)
            size = liar.size_of(m.group(1), m.group(2)) if m else None
            if size is None:
                entry["status"] = 404
                liar.log(**entry)
                payload = b'{"errors":[{"code":"BLOB_UNKNOWN","message":"no"}]}'
                self.send_response(404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if body:
                    self.wfile.write(payload)
                return
            start, end = 0, size - 1
            r = RANGE.fullmatch(wanted or "")
            status = 200
            if r:
                start = int(r.group(1))
                if r.group(2):
                    end = min(end, int(r.group(2)))
                status = 206
            length = max(0, end - start + 1)
            entry["status"] = status
            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Docker-Content-Digest", m.group(2))
            self.send_header("Content-Length", str(length))
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
            self.end_headers()
            sent = 0
            if body:
                garbage = (b"not the blob you asked for. " * 4096)[:1 << 16]
                try:
                    while sent < length:
                        piece = garbage[:min(len(garbage), length - sent)]
                        self.wfile.write(piece)
                        sent += len(piece)
                except OSError:
                    pass
            entry["sent"] = sent
            liar.log(**entry)
    return Handler


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, handler, context):
        self.context = context
        super().__init__(address, handler)

    def finish_request(self, request, client_address):
        # The handshake in the request's own thread, so a slow client holds up no other.
        try:
            request.settimeout(30)
            tls = self.context.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError):
            return
        try:
            self.RequestHandlerClass(tls, client_address, self)
        finally:
            try:
                tls.close()
            except OSError:
                pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", default="0.0.0.0:5051")
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--ca", required=True)
    ap.add_argument("--replica", action="append", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--sizes")
    ap.add_argument("--node", default="liar")
    ap.add_argument("--interval", type=float, default=1.0)
    args = ap.parse_args()
    host, _, port = args.listen.rpartition(":")
    args.port = int(port)

    liar = Liar(args)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    context.load_verify_locations(args.ca)
    context.verify_mode = ssl.CERT_REQUIRED
    server = Server((host, args.port), handler_for(liar), context)
    threading.Thread(target=liar.announce_forever, daemon=True).start()
    liar.log(listening=args.listen)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
