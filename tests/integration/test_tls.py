#!/usr/bin/env python3
"""TLS: a CA and certificates made here with the openssl CLI; HTTPS with that CA works, TLS 1.1
and older are refused (checked with raw ClientHellos as well as the ssl module), plain HTTP on
the TLS port gets no HTTP answer; a blob is pushed (monolithic and chunked) and pulled (whole and
by Range) over TLS; replacing the certificate files is picked up without a restart (a broken
file is ignored meanwhile); with client_ca set, only clients with a certificate from that CA
get in."""

import http.client
import os
import socket
import select
import ssl
import struct
import sys
import time
import unittest
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402


def client_context(ca, cert=None, key=None):
    ctx = ssl.create_default_context(cafile=ca)
    ctx.check_hostname = True
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


def kernel_tls_available():
    """Whether this kernel can encrypt TLS: its tls module is loaded (or built in), read from the ULPs the
    kernel has registered (asking a socket for TCP_ULP "tls" would load the module). berth also tries an
    AES-GCM key once the module is there; the kernels these tests run under can load it (the user-mode
    one has gcm loaded by its init), so the module's presence is what decides here."""
    try:
        with open("/proc/sys/net/ipv4/tcp_available_ulp") as f:
            return "tls" in f.read().split()
    except OSError:
        return False


def peer_certificate(port, ctx, host="127.0.0.1"):
    """(serial hex, CN) of the certificate a fresh connection is shown."""
    with socket.create_connection((host, port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname=host) as s:
            cert = s.getpeercert()
    cn = dict(x[0] for x in cert["subject"])["commonName"]
    return cert["serialNumber"].upper(), cn


def client_hello(version):
    """A raw ClientHello record offering only `version` (no supported_versions extension, so a
    TLS 1.3 server must treat it as exactly that version)."""
    suites = [0xC02B, 0xC02F, 0xC009, 0xC013, 0xC00A, 0xC014, 0x002F, 0x0035, 0x000A]
    cipher_bytes = b"".join(struct.pack(">H", c) for c in suites)

    def ext(kind, data):
        return struct.pack(">HH", kind, len(data)) + data
    groups = b"".join(struct.pack(">H", g) for g in (0x001D, 0x0017, 0x0018))
    sigalgs = b"".join(struct.pack(">H", a) for a in (0x0403, 0x0804, 0x0401, 0x0503, 0x0201, 0x0203))
    extensions = (ext(0x000A, struct.pack(">H", len(groups)) + groups) +
                  ext(0x000B, b"\x01\x00") +
                  ext(0x000D, struct.pack(">H", len(sigalgs)) + sigalgs) +
                  ext(0xFF01, b"\x00"))  # renegotiation_info
    body = (struct.pack(">H", version) + os.urandom(32) + b"\x00" +
            struct.pack(">H", len(cipher_bytes)) + cipher_bytes + b"\x01\x00" +
            struct.pack(">H", len(extensions)) + extensions)
    handshake = b"\x01" + struct.pack(">I", len(body))[1:] + body
    record_version = min(version, 0x0301)
    return b"\x16" + struct.pack(">HH", record_version, len(handshake)) + handshake


def hello_answer(port, version):
    """What the server sends back to a raw ClientHello: ("server_hello", version),
    ("alert", description) or ("closed", None)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(client_hello(version))
        data = b""
        try:
            while len(data) < 11:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        except (ConnectionResetError, socket.timeout):
            pass
    if len(data) >= 7 and data[0] == 0x15:
        return "alert", data[6]
    if len(data) >= 11 and data[0] == 0x16 and data[5] == 0x02:
        return "server_hello", struct.unpack(">H", data[9:11])[0]
    if not data:
        return "closed", None
    return "other", data[:16]


class _TlsServer(bt.ServerTest):
    """berth over TLS with cert1 of a test CA; cert2 (RSA) is at hand for a reload."""

    @classmethod
    def configure(cls, b):
        d = b.tmp
        cls.ca, cls.ca_key = bt.make_ca(d)
        cls.cert1 = bt.make_cert(d, "server1", cls.ca, cls.ca_key, cn="berth-one", serial=0x1111)
        cls.cert2 = bt.make_cert(d, "server2", cls.ca, cls.ca_key, cn="berth-two", serial=0x2222, rsa=True)
        with open(cls.cert1[0], "rb") as f, open(os.path.join(d, "srv.crt"), "wb") as out:
            out.write(f.read())
        with open(cls.cert1[1], "rb") as f, open(os.path.join(d, "srv.key"), "wb") as out:
            out.write(f.read())
        b.ssl_context = client_context(cls.ca)
        return {"tls": {"cert": "srv.crt", "key": "srv.key"}}  # kernel_tls: true by default


class TlsTest(_TlsServer):
    def test_https_with_the_ca(self):
        r = self.b.get("/v2/")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(peer_certificate(self.b.port, client_context(self.ca), "localhost")[1], "berth-one")
        # without the CA the certificate is not trusted
        with self.assertRaises(ssl.SSLCertVerificationError):
            peer_certificate(self.b.port, ssl.create_default_context(cafile=self.cert2[0]))

    def test_old_protocols_refused(self):
        # control: a raw TLS 1.2 hello gets a ServerHello for TLS 1.2
        self.assertEqual(hello_answer(self.b.port, 0x0303), ("server_hello", 0x0303))
        for version in (0x0302, 0x0301, 0x0300):
            kind, detail = hello_answer(self.b.port, version)
            self.assertIn(kind, ("alert", "closed"), f"hello for {version:#06x}: {kind} {detail}")
        # the ssl module, restricted to TLS 1.0/1.1
        for top in (ssl.TLSVersion.TLSv1_1, ssl.TLSVersion.TLSv1):
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)
                    ctx.minimum_version = ssl.TLSVersion.TLSv1
                    ctx.maximum_version = top
                ctx.set_ciphers("ALL:@SECLEVEL=0")
            except (ValueError, ssl.SSLError):
                continue  # this OpenSSL cannot even offer it; the raw hellos above cover it
            with socket.create_connection(("127.0.0.1", self.b.port), timeout=10) as raw:
                with self.assertRaises((ssl.SSLError, ConnectionResetError, OSError), msg=str(top)):
                    with ctx.wrap_socket(raw) as s:
                        s.sendall(b"GET /v2/ HTTP/1.1\r\nHost: x\r\n\r\n")
                        s.recv(100)
        # TLS 1.2 and 1.3 through the ssl module
        for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            ctx = client_context(self.ca)
            ctx.minimum_version = ctx.maximum_version = version
            with socket.create_connection(("127.0.0.1", self.b.port), timeout=10) as raw:
                with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                    self.assertEqual(s.version(), {ssl.TLSVersion.TLSv1_2: "TLSv1.2",
                                                   ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[version])

    def test_cold_blob_over_tls(self):
        # TLS copies the file through user space in pieces; a piece not in the page cache is
        # read in by a worker first, as for sendfile.
        b = self.b
        if bt.on_tmpfs(b.root):
            self.skipTest("tmpfs keeps every page in memory: nothing can be evicted")
        data = os.urandom(6 * 1024 * 1024 + 5)
        digest = b.push_blob("tls/cold", data)
        bt.evict_from_page_cache(bt.blob_files(b.root)[digest.split(":")[1]])
        before = b.metrics()[bt.COLD_BYTES]
        r = b.get(f"/v2/tls/cold/blobs/{digest}")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body, data)
        self.assertGreaterEqual(b.metrics()[bt.COLD_BYTES] - before, 4 * 1024 * 1024)

    def test_plain_http_on_tls_port(self):
        with socket.create_connection(("127.0.0.1", self.b.port), timeout=10) as s:
            s.sendall(b"GET /v2/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            closed, data = bt.wait_closed(s, 10)
        self.assertTrue(closed, "server kept a plain-HTTP connection open on the TLS port")
        self.assertFalse(data.startswith(b"HTTP/1.1 2"), data[:200])
        plain = http.client.HTTPConnection("127.0.0.1", self.b.port, timeout=10)
        try:
            plain.request("GET", "/v2/")
            r = plain.getresponse()
            r.read()
            status = r.status
        except (http.client.HTTPException, OSError):
            status = None
        finally:
            plain.close()
        self.assertTrue(status is None or status >= 400, f"plain HTTP on the TLS port answered {status}")
        self.assertEqual(self.b.get("/v2/").status, 200)  # still serving TLS

    def test_push_pull_over_tls(self):
        b = self.b
        data = os.urandom(3 * 1024 * 1024 + 17)
        digest = b.push_blob("tls/repo", data)
        r = b.get(f"/v2/tls/repo/blobs/{digest}")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body, data)
        r = b.get(f"/v2/tls/repo/blobs/{digest}", headers={"Range": "bytes=1000-1048575"})
        self.assertEqual(r.status, 206, r)
        self.assertEqual(r.body, data[1000:1048576])
        self.assertEqual(r.header("Content-Range"), f"bytes 1000-1048575/{len(data)}")
        r = b.get(f"/v2/tls/repo/blobs/{digest}", headers={"Range": "bytes=-10"})
        self.assertEqual((r.status, r.body), (206, data[-10:]))
        # chunked upload (PATCH with Content-Range, then PUT)
        data2 = os.urandom(2 * 1024 * 1024 + 5)
        loc = b.upload_location("tls/repo")
        half = len(data2) // 2
        for start, chunk in ((0, data2[:half]), (half, data2[half:])):
            r = b.request("PATCH", loc, body=chunk, headers={
                "Content-Type": "application/octet-stream",
                "Content-Range": f"{start}-{start + len(chunk) - 1}"})
            self.assertEqual(r.status, 202, r)
            loc = bt.location_path(r.header("Location"))
        r = b.request("PUT", bt.with_query(loc, digest=bt.sha256_digest(data2)), headers={"Content-Length": "0"})
        self.assertEqual(r.status, 201, r)
        self.assertEqual(b.get(f"/v2/tls/repo/blobs/{bt.sha256_digest(data2)}").body, data2)
        img = b.push_image("tls/repo", "v1")
        r = b.get("/v2/tls/repo/manifests/v1", headers={"Accept": bt.OCI_MANIFEST})
        self.assertEqual(r.body, img["manifest"])

    def test_one_connection_carries_many_requests(self):
        # Keep-alive over TLS: a large body, then small answers, then the large body again, all
        # on one connection (the stream keeps its buffers in step across requests).
        b = self.b
        data = os.urandom(5 * 1024 * 1024 + 3)
        digest = b.push_blob("tls/keep", data)
        img = b.push_image("tls/keep", "v1")
        conn = http.client.HTTPSConnection("127.0.0.1", b.port, timeout=30, context=b.ssl_context)
        try:
            for _ in range(2):
                conn.request("GET", f"/v2/tls/keep/blobs/{digest}")
                r = conn.getresponse()
                self.assertEqual((r.status, r.read()), (200, data))
                for _ in range(20):
                    conn.request("GET", "/v2/tls/keep/manifests/v1", headers={"Accept": bt.OCI_MANIFEST})
                    r = conn.getresponse()
                    self.assertEqual((r.status, r.read()), (200, img["manifest"]))
                conn.request("HEAD", f"/v2/tls/keep/blobs/{digest}")
                r = conn.getresponse()
                r.read()
                self.assertEqual((r.status, r.getheader("Content-Length")), (200, str(len(data))))
        finally:
            conn.close()

    def test_request_in_one_byte_records(self):
        # Every TLS record holds one byte of the request: the server reads across records.
        b = self.b
        body = os.urandom(3000)
        loc = b.upload_location("tls/tiny")
        request = (f"PUT {bt.with_query(loc, digest=bt.sha256_digest(body))} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
        with socket.create_connection(("127.0.0.1", b.port), timeout=30) as raw:
            with b.ssl_context.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                for i in range(len(request)):
                    s.sendall(request[i:i + 1])
                answer = b""
                while chunk := s.recv(65536):
                    answer += chunk
        self.assertTrue(answer.startswith(b"HTTP/1.1 201"), answer[:200])
        self.assertEqual(b.get(f"/v2/tls/tiny/blobs/{bt.sha256_digest(body)}").body, body)

    def test_sessions_resume(self):
        # A client that comes back resumes its session (a ticket) instead of a full handshake.
        ctx = client_context(self.ca)
        with socket.create_connection(("127.0.0.1", self.b.port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                s.sendall(b"GET /v2/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 200"))
                session = s.session  # TLS 1.3 tickets arrive after the handshake
                self.assertFalse(s.session_reused)
        with socket.create_connection(("127.0.0.1", self.b.port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1", session=session) as s:
                s.sendall(b"GET /v2/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 200"))
                self.assertTrue(s.session_reused, "the server did not resume the session")

    def test_close_notify_mid_body_ends_the_connection(self):
        # The client ends TLS while the server waits for the rest of a body: the server closes
        # (it has no answer to give), and goes on serving others.
        b = self.b
        loc = b.upload_location("tls/closed")
        raw = socket.create_connection(("127.0.0.1", b.port), timeout=10)
        with b.ssl_context.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            s.sendall(f"PATCH {loc} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nab".encode())
            with socket.socket(fileno=os.dup(s.fileno())) as tcp:  # the same connection, below TLS
                try:
                    s.unwrap()  # sends close_notify, then waits for the server's end
                except (ssl.SSLError, OSError):
                    pass  # the server closed without a close_notify of its own
                closed, data = bt.wait_closed(tcp, 10)
        self.assertTrue(closed, "the server kept the connection after close_notify")
        self.assertEqual(b.get("/v2/").status, 200)

    def test_metrics_and_log_say_who_encrypts(self):
        # kernel_tls and berth_records are on by default: where the kernel has the tls module it
        # encrypts; elsewhere berth seals TLS 1.3 records itself, and the log says why.
        by = "kernel" if kernel_tls_available() else "berth"
        before = self.b.metrics()  # over TLS: a connection counted once its handshake is done
        self.assertEqual(self.b.get("/v2/").status, 200)
        m = self.b.metrics()
        key = f'berth_tls_connections_total{{encryption="{by}"}}'
        self.assertGreaterEqual(m.get(key, 0) - before.get(key, 0), 2)
        if by == "berth":
            self.assertNotIn('berth_tls_connections_total{encryption="kernel"}', m)
        # (where the kernel encrypts, a connection its peer closed before the handshake ended cannot take
        # the kernel's TLS, and berth seals its records: other tests' connections may be counted so)
        self.assertIn("kTLS" if by == "kernel" else "berth seals TLS 1.3 AES-GCM records itself", self.b.stderr())

    def test_berth_seals_tls13_records(self):
        # where the kernel has TLS it takes both versions' keys (and a range goes out with sendfile too)
        kernel = kernel_tls_available()
        b = self.b
        data = os.urandom(8 * 1024 * 1024 + 11)
        digest = b.push_blob("tls/sealed", data)
        img = b.push_image("tls/sealed", "v1")
        for version, by in ((ssl.TLSVersion.TLSv1_3, "kernel" if kernel else "berth"),
                            (ssl.TLSVersion.TLSv1_2, "kernel" if kernel else "openssl")):
            ctx = client_context(self.ca)
            ctx.minimum_version = ctx.maximum_version = version
            key = f'berth_tls_connections_total{{encryption="{by}"}}'
            before = b.metrics().get(key, 0)
            conn = http.client.HTTPSConnection("127.0.0.1", b.port, timeout=30, context=ctx)
            try:
                for _ in range(2):  # blob and manifest in turn on one connection: the client's AES-GCM checks each record
                    conn.request("GET", f"/v2/tls/sealed/blobs/{digest}", headers={"Range": "bytes=5-"})
                    r = conn.getresponse()
                    self.assertEqual((r.status, r.read()), (206, data[5:]), version)
                    conn.request("GET", "/v2/tls/sealed/manifests/v1", headers={"Accept": bt.OCI_MANIFEST})
                    r = conn.getresponse()
                    self.assertEqual((r.status, r.read()), (200, img["manifest"]), version)
            finally:
                conn.close()
            # the metrics request's own connection counts as berth's (TLS 1.3)
            self.assertGreaterEqual(b.metrics().get(key, 0) - before, 1, version)

    def test_key_update_from_the_client(self):
        # openssl s_client sends a KeyUpdate asking for ours when it reads "K" on a line of its own;
        # berth answers with its own KeyUpdate and seals what follows with the next key. Where the kernel
        # encrypts, OpenSSL 3.0 cannot give it the next key: berth sends its KeyUpdate and then ends the
        # connection, rather than send records under a key the client has dropped (docs/tls.md).
        kernel = kernel_tls_available()
        proc = subprocess.Popen(["openssl", "s_client", "-connect", f"127.0.0.1:{self.b.port}", "-CAfile", self.ca,
                                 "-tls1_3", "-msg"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        seen = []

        def wait_for(text, count):
            deadline = time.monotonic() + 20
            while "".join(seen).count(text) < count:
                left = deadline - time.monotonic()
                self.assertGreater(left, 0, f"no {count} x {text!r}:\n{''.join(seen)[-3000:]}")
                if select.select([proc.stdout], [], [], left)[0]:
                    chunk = os.read(proc.stdout.fileno(), 65536)
                    self.assertTrue(chunk, f"s_client ended:\n{''.join(seen)[-3000:]}")
                    seen.append(chunk.decode(errors="replace"))

        def wait_ended():
            deadline = time.monotonic() + 20
            while True:
                left = deadline - time.monotonic()
                self.assertGreater(left, 0, f"berth kept the connection:\n{''.join(seen)[-3000:]}")
                if select.select([proc.stdout], [], [], left)[0]:
                    chunk = os.read(proc.stdout.fileno(), 65536)
                    if not chunk:
                        return
                    seen.append(chunk.decode(errors="replace"))

        def send(data):
            proc.stdin.write(data)
            proc.stdin.flush()
        try:
            send(b"GET /v2/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            wait_for("HTTP/1.1 200", 1)
            if kernel:
                send(b"K\n")
                wait_for(">>> TLS 1.3, Handshake [length 0005], KeyUpdate", 1)
                send(b"GET /v2/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                wait_ended()
                text = "".join(seen)
                self.assertIn("<<< TLS 1.3, Handshake [length 0005], KeyUpdate", text)
                self.assertEqual(text.count("HTTP/1.1 200"), 1, text[-3000:])
                self.assertNotIn("bad record mac", text.lower())
                return
            for n in (1, 2):
                send(b"K\n")
                wait_for(">>> TLS 1.3, Handshake [length 0005], KeyUpdate", n)
                # berth sends its KeyUpdate before its next answer, which comes under the new key
                send(b"GET /v2/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                wait_for("HTTP/1.1 200", 1 + n)
                wait_for("<<< TLS 1.3, Handshake [length 0005], KeyUpdate", n)
            self.assertNotIn("bad record mac", "".join(seen).lower())
        finally:
            proc.kill()
            proc.wait()
            proc.stdin.close()
            proc.stdout.close()

    def test_kernel_tls_sends_blobs_with_sendfile(self):
        if not kernel_tls_available():
            self.skipTest("this kernel cannot encrypt TLS (no tls module, CONFIG_TLS unset): "
                          "berth encrypts in user space, as the other tests show")
        b = self.b
        data = os.urandom(8 * 1024 * 1024 + 11)
        digest = b.push_blob("tls/kernel", data)
        img = b.push_image("tls/kernel", "v1")
        before = b.metrics()["berth_tls_kernel_sent_bytes_total"]
        conn = http.client.HTTPSConnection("127.0.0.1", b.port, timeout=30, context=b.ssl_context)
        try:
            for _ in range(2):  # records sent by OpenSSL and by the kernel, in turn, on one connection
                conn.request("GET", f"/v2/tls/kernel/blobs/{digest}")
                r = conn.getresponse()
                self.assertEqual((r.status, r.read()), (200, data))
                conn.request("GET", "/v2/tls/kernel/manifests/v1", headers={"Accept": bt.OCI_MANIFEST})
                r = conn.getresponse()
                self.assertEqual((r.status, r.read()), (200, img["manifest"]))
        finally:
            conn.close()
        self.assertEqual(b.metrics()["berth_tls_kernel_sent_bytes_total"] - before, 2 * len(data))



class OpenSslRecordsTest(_TlsServer):
    """tls.berth_records false: OpenSSL encrypts every record where the kernel does not."""

    @classmethod
    def configure(cls, b):
        config = super().configure(b)
        config["tls"]["berth_records"] = False
        return config

    def test_openssl_encrypts(self):
        if kernel_tls_available():
            self.skipTest("the kernel encrypts here (tls module loaded)")
        data = os.urandom(3 * 1024 * 1024 + 1)
        digest = self.b.push_blob("tls/openssl", data)
        self.assertEqual(self.b.get(f"/v2/tls/openssl/blobs/{digest}").body, data)
        m = self.b.metrics()
        self.assertGreaterEqual(m.get('berth_tls_connections_total{encryption="openssl"}', 0), 2)
        self.assertNotIn('berth_tls_connections_total{encryption="berth"}', m)
        self.assertIn("tls.berth_records is false", self.b.stderr())


class CertificateReloadTest(_TlsServer):
    """A server of its own: the reload changes the certificate TlsTest's tests expect."""

    def test_certificate_reload(self):
        b = self.b
        pid = b.proc.pid
        ctx = client_context(self.ca)
        self.assertEqual(peer_certificate(b.port, ctx), ("1111", "berth-one"))
        # a broken certificate file is not taken: the old certificate stays
        cert_path, key_path = os.path.join(b.tmp, "srv.crt"), os.path.join(b.tmp, "srv.key")
        with open(cert_path, "rb") as f:
            good_cert = f.read()
        replace_file(cert_path, b"-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n")
        bt.poll(lambda: "TLS reload failed" in b.stderr(), 20, 0.2, "a log line about the failed reload")
        self.assertEqual(peer_certificate(b.port, ctx), ("1111", "berth-one"))
        self.assertEqual(b.get("/v2/").status, 200)
        replace_file(cert_path, good_cert)
        # the new pair: key first, then certificate (a check in between sees a mismatch and waits)
        with open(self.cert2[1], "rb") as f:
            replace_file(key_path, f.read())
        with open(self.cert2[0], "rb") as f:
            replace_file(cert_path, f.read())
        seen = bt.poll(lambda: (lambda c: c if c[1] == "berth-two" else None)(peer_certificate(b.port, ctx)),
                       20, 0.2, "new connections to see the new certificate")
        self.assertEqual(seen, ("2222", "berth-two"))
        self.assertEqual(b.proc.pid, pid)
        self.assertTrue(b.alive())
        self.assertEqual(b.get("/v2/").status, 200)
        self.assertEqual(b._starts, 1)  # never restarted


def replace_file(path, data):
    tmp = path + ".new"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


class ClientCertificateTest(bt.ServerTest):
    @classmethod
    def configure(cls, b):
        d = b.tmp
        cls.ca, ca_key = bt.make_ca(d)
        cls.other_ca, other_key = bt.make_ca(d, "other-ca")
        bt.make_cert(d, "srv", cls.ca, ca_key)
        cls.client = bt.make_cert(d, "client", cls.ca, ca_key, client=True)
        cls.stranger = bt.make_cert(d, "stranger", cls.other_ca, other_key, client=True)
        b.ssl_context = client_context(cls.ca, *cls.client)
        return {"tls": {"cert": "srv.crt", "key": "srv.key", "client_ca": cls.ca}}

    def request_with(self, ctx, version=None):
        if version:
            ctx.minimum_version = ctx.maximum_version = version
        conn = http.client.HTTPSConnection("127.0.0.1", self.b.port, timeout=10, context=ctx)
        try:
            conn.request("GET", "/v2/")
            r = conn.getresponse()
            r.read()
            return r.status
        finally:
            conn.close()

    def test_client_certificates(self):
        self.assertEqual(self.request_with(client_context(self.ca, *self.client)), 200)
        self.assertEqual(self.b.push_blob("mtls/repo", b"x" * 1000), bt.sha256_digest(b"x" * 1000))
        for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            with self.subTest(version=version):
                self.assertEqual(self.request_with(client_context(self.ca, *self.client), version), 200)
                with self.assertRaises((ssl.SSLError, OSError, http.client.HTTPException), msg="no client cert"):
                    self.request_with(client_context(self.ca), version)
                with self.assertRaises((ssl.SSLError, OSError, http.client.HTTPException),
                                       msg="client cert from another CA"):
                    self.request_with(client_context(self.ca, *self.stranger), version)
        self.assertTrue(self.b.alive())

    def test_sessions_resume_with_client_certificates(self):
        # Resuming under client verification needs a session id context; without one OpenSSL
        # failed the resumed handshake with internal_error.
        for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            ctx = client_context(self.ca, *self.client)
            ctx.minimum_version = ctx.maximum_version = version
            session = None
            for attempt in range(2):
                with socket.create_connection(("127.0.0.1", self.b.port), timeout=10) as raw:
                    with ctx.wrap_socket(raw, server_hostname="127.0.0.1", session=session) as s:
                        s.sendall(b"GET /v2/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                        self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 200"), (version, attempt))
                        self.assertEqual(s.session_reused, attempt == 1, (version, attempt))
                        session = s.session


# --------------------------------------------------------------------------- alerts and cipher suites
#
# Checked with the openssl CLI (s_client), which prints the alert a server sends and the suite
# it chose: a refused client must get a TLS alert, not a bare EOF; TLS 1.2 offers AEAD suites
# with forward secrecy only (no CBC) unless tls.ciphers says otherwise.

import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402

CBC_SUITES = ("AES128-SHA:AES256-SHA:AES128-SHA256:AES256-SHA256:ECDHE-RSA-AES128-SHA:ECDHE-ECDSA-AES128-SHA:"
              "ECDHE-RSA-AES256-SHA:ECDHE-ECDSA-AES256-SHA:ECDHE-RSA-AES128-SHA256:ECDHE-ECDSA-AES128-SHA256:"
              "ECDHE-RSA-AES256-SHA384:ECDHE-ECDSA-AES256-SHA384")
HTTP_REQUEST = b"GET /v2/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"


def s_client(port, *args, timeout=20):
    """openssl s_client to 127.0.0.1:port sending one GET /v2/ (Connection: close) and reading until
    the server closes. Returns (exit code or None on timeout, stdout+stderr as text)."""
    cmd = ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-ign_eof", *args]
    try:
        r = subprocess.run(cmd, input=HTTP_REQUEST, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired as err:
        out = (err.stdout or b"") + (err.stderr or b"")
        return None, out.decode(errors="replace")
    return r.returncode, (r.stdout + r.stderr).decode(errors="replace")


def served(output):
    return "HTTP/1.1 200" in output


def negotiated_cipher(output):
    m = re.search(r"Cipher is (\S+)", output)
    return m.group(1) if m else None


class ClientCertificateAlertTest(bt.ServerTest):
    """tls.client_ca with client_auth require: a client refused gets an alert it can read."""

    @classmethod
    def configure(cls, b):
        d = b.tmp
        cls.ca, ca_key = bt.make_ca(d)
        other_ca, other_key = bt.make_ca(d, "other-ca")
        bt.make_cert(d, "srv", cls.ca, ca_key)
        cls.client = bt.make_cert(d, "client", cls.ca, ca_key, client=True)
        cls.stranger = bt.make_cert(d, "stranger", other_ca, other_key, client=True)
        b.ssl_context = client_context(cls.ca, *cls.client)
        return {"tls": {"cert": "srv.crt", "key": "srv.key", "client_ca": cls.ca, "client_auth": "require"}}

    def run_s_client(self, *args):
        code, out = s_client(self.b.port, "-CAfile", self.ca, *args)
        self.assertIsNotNone(code, f"s_client {args}: the server neither answered nor closed:\n{out[-2000:]}")
        return code, out

    def assert_alert(self, out, names, numbers, label):
        self.assertFalse(served(out), f"{label}: served without a valid client certificate:\n{out[-2000:]}")
        self.assertIn("alert", out.lower(), f"{label}: no TLS alert (a bare EOF?):\n{out[-2000:]}")
        self.assertTrue(any(n in out for n in names) or any(f"alert number {n}" in out for n in numbers),
                        f"{label}: alert is not one of {names} / {numbers}:\n{out[-2000:]}")

    def test_control_with_a_certificate(self):
        for version in ("-tls1_2", "-tls1_3"):
            code, out = self.run_s_client(version, "-cert", self.client[0], "-key", self.client[1])
            self.assertTrue(served(out), f"{version} with a good client certificate:\n{out[-2000:]}")

    def test_no_certificate_tls13_alert(self):
        _, out = self.run_s_client("-tls1_3")
        self.assert_alert(out, ("certificate required",), (116,), "TLS 1.3 without a certificate")

    def test_no_certificate_tls12_alert(self):
        _, out = self.run_s_client("-tls1_2")
        self.assert_alert(out, ("handshake failure", "certificate required"), (40, 116),
                          "TLS 1.2 without a certificate")

    def test_certificate_from_another_ca_alert(self):
        for version in ("-tls1_2", "-tls1_3"):
            _, out = self.run_s_client(version, "-cert", self.stranger[0], "-key", self.stranger[1])
            self.assert_alert(out, ("unknown ca", "bad certificate", "certificate unknown", "decrypt error",
                                    "handshake failure"), (48, 42, 46, 51, 40),
                              f"{version} with a certificate from another CA")
        self.assertTrue(self.b.alive())
        self.assertEqual(self.b.get("/v2/").status, 200)

    def test_alert_with_the_ssl_module(self):
        # The same through Python's ssl: the refusal arrives as an SSL alert error, not a reset or EOF.
        for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            ctx = client_context(self.ca)
            ctx.minimum_version = ctx.maximum_version = version
            with self.subTest(version=version):
                with socket.create_connection(("127.0.0.1", self.b.port), timeout=10) as raw:
                    with self.assertRaises(ssl.SSLError) as caught:
                        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                            s.sendall(HTTP_REQUEST)
                            while s.recv(4096):
                                pass
                text = str(caught.exception).upper()
                self.assertTrue("ALERT" in text or "CERTIFICATE_REQUIRED" in text or "HANDSHAKE_FAILURE" in text,
                                f"{version}: {caught.exception!r}")


class _CipherSuites(bt.ServerTest):
    """A berth with a certificate of one key type, default tls.ciphers."""

    rsa = False
    config_ciphers = None

    @classmethod
    def configure(cls, b):
        d = b.tmp
        cls.ca, ca_key = bt.make_ca(d)
        bt.make_cert(d, "srv", cls.ca, ca_key, rsa=cls.rsa)
        tls = {"cert": "srv.crt", "key": "srv.key"}
        if cls.config_ciphers is not None:
            tls["ciphers"] = cls.config_ciphers
        b.ssl_context = client_context(cls.ca)
        return {"tls": tls}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.kind = "RSA" if cls.rsa else "ECDSA"

    def tls12(self, cipher):
        """(served, negotiated cipher, output) of a TLS 1.2 handshake offering only `cipher`."""
        code, out = s_client(self.b.port, "-CAfile", self.ca, "-tls1_2", "-cipher", cipher)
        self.assertIsNotNone(code, f"s_client -cipher {cipher}: the server neither answered nor closed")
        self.assertNotIn("no ciphers available", out, f"this openssl cannot offer {cipher}: the check proves nothing")
        return served(out), negotiated_cipher(out), out

    def assert_refused(self, cipher):
        ok, chosen, out = self.tls12(cipher)
        self.assertFalse(ok, f"TLS 1.2 with only {cipher} offered was served (suite {chosen}):\n{out[-1500:]}")
        self.assertIn(chosen, (None, "0000", "(NONE)"), f"a suite was negotiated: {chosen}")
        self.assertIn("alert", out.lower(), f"refused {cipher} without an alert:\n{out[-1500:]}")

    def assert_accepted(self, cipher):
        ok, chosen, out = self.tls12(cipher)
        self.assertTrue(ok, f"TLS 1.2 with {cipher} was not served:\n{out[-1500:]}")
        self.assertEqual(chosen, cipher)

    def assert_tls13_works(self):
        code, out = s_client(self.b.port, "-CAfile", self.ca, "-tls1_3")
        self.assertTrue(served(out), f"TLS 1.3:\n{out[-1500:]}")


class DefaultCipherSuitesTest(_CipherSuites):
    def test_no_cbc_suites_in_tls12(self):
        self.assert_refused(CBC_SUITES)
        # One at a time too: a server could refuse the list only for the order it came in.
        for cipher in CBC_SUITES.split(":"):
            if cipher.startswith(f"ECDHE-{self.kind}-"):
                with self.subTest(cipher=cipher):
                    self.assert_refused(cipher)

    def test_aead_suites_accepted(self):
        for cipher in (f"ECDHE-{self.kind}-AES128-GCM-SHA256", f"ECDHE-{self.kind}-AES256-GCM-SHA384",
                       f"ECDHE-{self.kind}-CHACHA20-POLY1305"):
            with self.subTest(cipher=cipher):
                self.assert_accepted(cipher)
        self.assert_tls13_works()

    def test_ssl_module_with_cbc_only_refused(self):
        ctx = client_context(self.ca)
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_ciphers(CBC_SUITES)
        with socket.create_connection(("127.0.0.1", self.b.port), timeout=10) as raw:
            with self.assertRaises(ssl.SSLError):
                with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                    s.sendall(HTTP_REQUEST)
                    s.recv(100)
        # and a default client gets an AEAD suite
        ctx = client_context(self.ca)
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        with socket.create_connection(("127.0.0.1", self.b.port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                name = s.cipher()[0]
        self.assertRegex(name, r"^ECDHE-.*-(GCM-SHA\d+|CHACHA20-POLY1305)$")


class DefaultCipherSuitesRsaTest(DefaultCipherSuitesTest):
    rsa = True

    def test_no_static_rsa_key_exchange(self):
        # AEAD but without forward secrecy: not in the intermediate list.
        self.assert_refused("AES128-GCM-SHA256:AES256-GCM-SHA384")


class ConfiguredCipherTest(_CipherSuites):
    config_ciphers = "ECDHE-ECDSA-AES256-GCM-SHA384"

    def test_only_the_configured_suite(self):
        self.assert_accepted("ECDHE-ECDSA-AES256-GCM-SHA384")
        for cipher in ("ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305", CBC_SUITES):
            with self.subTest(cipher=cipher):
                self.assert_refused(cipher)
        # A client offering its whole default list gets the one configured.
        ctx = client_context(self.ca)
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        with socket.create_connection(("127.0.0.1", self.b.port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                self.assertEqual(s.cipher()[0], "ECDHE-ECDSA-AES256-GCM-SHA384")
        self.assert_tls13_works()  # TLS 1.3 suites are not governed by tls.ciphers


class ConfiguredCbcCipherTest(_CipherSuites):
    # The key really sets the list: one that names a CBC suite gets it.
    config_ciphers = "ECDHE-ECDSA-AES128-SHA"

    def test_configured_cbc_suite_accepted(self):
        self.assert_accepted("ECDHE-ECDSA-AES128-SHA")
        self.assert_refused("ECDHE-ECDSA-AES128-GCM-SHA256")


class BadCipherConfigTest(unittest.TestCase):
    def test_cipher_string_matching_nothing_is_refused_at_start(self):
        b = bt.Berth()
        self.addCleanup(b.cleanup)
        ca, ca_key = bt.make_ca(b.tmp)
        bt.make_cert(b.tmp, "srv", ca, ca_key)
        b.config = {"tls": {"cert": "srv.crt", "key": "srv.key", "ciphers": "NO-SUCH-CIPHER"}}
        b.ssl_context = client_context(ca)
        bt.wait_for_binary()
        b.port = bt.free_port()
        b._spawn()
        try:
            code = b.wait(20)
        except subprocess.TimeoutExpired:
            self.fail("berth started with tls.ciphers matching no suite")
        self.assertNotEqual(code, 0)
        self.assertIn("tls.ciphers", b.stderr(), b.stderr()[-2000:])


TESTSSL = shutil.which("testssl.sh") or shutil.which("testssl")


@unittest.skipUnless(os.environ.get("BERTH_TESTSSL") == "1" and TESTSSL,
                     "opt-in: BERTH_TESTSSL=1 and testssl.sh installed (Debian package testssl.sh)")
class TestsslTest(_CipherSuites):
    def test_testssl_finds_no_cbc(self):
        r = subprocess.run([TESTSSL, "--quiet", "--color", "0", "-P", f"127.0.0.1:{self.b.port}"],
                           capture_output=True, text=True, timeout=600)
        out = r.stdout + r.stderr
        self.assertIn("ECDHE", out, f"testssl.sh listed no suites:\n{out[-3000:]}")
        cbc = [line for line in out.splitlines()
               if "CBC" in line or re.search(r"\b(?:ECDHE-(?:RSA|ECDSA)-)?(?:AES|CAMELLIA)(?:128|256)-SHA(?:256|384)?\b",
                                             line) or "DES-CBC3" in line]
        self.assertEqual(cbc, [], f"testssl.sh saw CBC suites:\n{out[-3000:]}")


if __name__ == "__main__":
    unittest.main()
