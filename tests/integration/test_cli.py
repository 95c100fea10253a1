#!/usr/bin/env python3
"""berth's command line: version, help, exit codes, configuration validation, flags over the
config file, and graceful shutdown on SIGTERM/SIGINT with a request in flight."""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402


class VersionHelpTest(unittest.TestCase):
    def test_version(self):
        for args in (["version"], ["--version"]):
            r = bt.run_cli(*args)
            self.assertEqual(r.returncode, 0, (args, r.stderr))
            self.assertRegex(r.stdout, r"^berth \d+\.\d+\.\d+\S*\n$", args)

    def test_help(self):
        for args in (["--help"], ["-h"], ["help"]):
            r = bt.run_cli(*args)
            self.assertEqual(r.returncode, 0, (args, r.stderr))
            self.assertIn("Usage", r.stdout, args)
            for word in ("serve", "version"):
                self.assertIn(word, r.stdout, args)

    def test_serve_help(self):
        for args in (["serve", "--help"], ["serve", "-h"], ["serve", "--root", "/nonexistent/x", "--help"]):
            r = bt.run_cli(*args, timeout=10)  # a serve that started would time out here
            self.assertEqual(r.returncode, 0, (args, r.stderr))
            for flag in ("--config", "--listen", "--root", "SIGTERM"):
                self.assertIn(flag, r.stdout, args)
        self.assertFalse(os.path.exists("/nonexistent/x"))

    def test_version_help(self):
        r = bt.run_cli("version", "--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("Usage", r.stdout)

    def test_no_command(self):
        r = bt.run_cli()
        self.assertEqual(r.returncode, 2)
        self.assertIn("Usage", r.stdout + r.stderr)

    def test_unknown_command(self):
        for cmd in ("bogus", "srve", "--bogus", "SERVE"):
            r = bt.run_cli(cmd)
            self.assertEqual(r.returncode, 2, cmd)
            self.assertIn(cmd, r.stderr, cmd)

    def test_unknown_serve_option(self):
        with tempfile.TemporaryDirectory() as tmp:
            for args, named in [(["--bogus"], "--bogus"), (["--listen"], "--listen"), (["--root"], "--root"),
                                (["--config"], "--config"), (["extra"], "extra"), (["--port", "5"], "--port")]:
                r = bt.run_cli("serve", "--root", os.path.join(tmp, "root"), *args, timeout=10)
                self.assertEqual(r.returncode, 2, (args, r.stderr))
                self.assertIn(named, r.stderr, args)


class ConfigValidationTest(unittest.TestCase):
    """A bad configuration stops the start with exit code 2 and a message naming the key."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="berth-cli-")
        self.addCleanup(lambda: __import__("shutil").rmtree(self.tmp, ignore_errors=True))

    def start_with(self, config_text, *flags):
        path = os.path.join(self.tmp, "config.json")
        with open(path, "w") as f:
            f.write(config_text)
        root = os.path.join(self.tmp, "root")
        args = ["serve", "--config", path, "--root", root, *flags]
        if "--listen" not in flags and '"listen"' not in config_text:
            args += ["--listen", f"127.0.0.1:{bt.free_port()}"]
        try:
            return bt.run_cli(*args, timeout=10)
        except subprocess.TimeoutExpired:
            self.fail(f"berth started with a bad configuration: {config_text[:200]}")

    def assert_refused(self, config, key):
        text = config if isinstance(config, str) else json.dumps(config)
        r = self.start_with(text)
        self.assertEqual(r.returncode, 2, f"{text[:200]}: rc {r.returncode}, stderr {r.stderr!r}")
        if key:
            self.assertIn(key, r.stderr, f"{text[:200]}: message does not name {key!r}")
        # Refused before touching the root.
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "root", "meta")), text[:200])

    def test_unknown_keys(self):
        for config, key in [
            ({"bogus_key": 1}, "bogus_key"),
            ({"listen": "127.0.0.1:0", "Listen": "x"}, "Listen"),
            ({"limits": {"bogus": 1}}, "limits.bogus"),
            ({"limits": {"max_uploads": 5, "max_upload": 5}}, "limits.max_upload"),
            ({"threads": {"io": 1, "extra": 1}}, "threads.extra"),
            ({"uploads": {"ttl": 1}}, "uploads.ttl"),
            ({"log": {"access": True, "level": "debug"}}, "log.level"),
            ({"limits": {}, "tsl": {}}, "tsl"),
            ({"backup": {"target": "t", "interval_seconds": 60, "every": 1}}, "backup.every"),
            ({"backup": {"interval_seconds": 60}}, "backup.target"),
            ({"backup": {"target": "t"}}, "backup: give secret_file"),
            ({"backup": {"target": "t", "secret_file": "missing"}}, "backup.secret_file"),
        ]:
            with self.subTest(config=config):
                self.assert_refused(config, key)

    def test_wrong_types(self):
        for config, key in [
            ({"deletes": "yes"}, "deletes"),
            ({"deletes": 1}, "deletes"),
            ({"listen": 5000}, "listen"),
            ({"root": ["a"]}, "root"),
            ({"shutdown_grace_seconds": "10"}, "shutdown_grace_seconds"),
            ({"shutdown_grace_seconds": None}, "shutdown_grace_seconds"),
            ({"shutdown_grace_seconds": -1}, "shutdown_grace_seconds"),
            ({"limits": 5}, "limits"),
            ({"limits": {"max_uploads": "3"}}, "limits.max_uploads"),
            ({"limits": {"max_uploads": -1}}, "limits.max_uploads"),
            ({"limits": {"max_page": 1.5}}, "limits.max_page"),
            ({"limits": {"max_manifest_bytes": 1e30}}, "limits.max_manifest_bytes"),
            ({"threads": {"io": 100000}}, "threads.io"),
            ({"threads": []}, "threads"),
            ({"uploads": {"idle_ttl_seconds": True}}, "uploads.idle_ttl_seconds"),
            ({"log": {"access": 1}}, "log.access"),
            ({"log": "on"}, "log"),
        ]:
            with self.subTest(config=config):
                self.assert_refused(config, key)

    def test_not_json(self):
        for text in ("{", "", "[]", '"x"', '{"deletes": true,}', '{"deletes": true} // comment',
                     "{'deletes': true}", "deletes = true", '{"deletes": true} {"x": 1}'):
            with self.subTest(text=text):
                self.assert_refused(text, None)

    def test_missing_config_file(self):
        missing = os.path.join(self.tmp, "no-such.json")
        r = bt.run_cli("serve", "--config", missing, "--root", os.path.join(self.tmp, "root"),
                       "--listen", f"127.0.0.1:{bt.free_port()}", timeout=10)
        self.assertEqual(r.returncode, 2)
        self.assertIn("no-such.json", r.stderr)

    def test_bad_listen_address(self):
        for listen in ("nonsense", "127.0.0.1", "127.0.0.1:", "127.0.0.1:99999", "127.0.0.1:abc",
                       "127.0.0.1:-1", ":"):
            with self.subTest(listen=listen, via="config"):
                self.assert_refused({"listen": listen}, "listen")
            with self.subTest(listen=listen, via="flag"):
                r = self.start_with("{}", "--listen", listen)
                self.assertEqual(r.returncode, 2, (listen, r.stderr))
                self.assertIn("listen", r.stderr.lower(), listen)

    # Server bug: a host that is not an IP literal ("localhost", "999.1.1.1", "127.0.0.1:5000" from
    # "127.0.0.1:5000:1") passes validation,
    # opens the root, then fails in bind with "berth: Invalid argument" and exit code 1 -- the
    # message names no key and the code is not the configuration error's 2.
    
    def test_listen_host_not_an_ip(self):
        for listen in ("999.1.1.1:5000", "not a host:5000", "127.0.0.1:5000:1"):
            with self.subTest(listen=listen):
                self.assert_refused({"listen": listen}, "listen")
        # "localhost" is a HOST: either it is served, or it is refused like any bad address.
        port = bt.free_port()
        r = None
        proc = subprocess.Popen([bt.BIN, "serve", "--root", os.path.join(self.tmp, "lh"),
                                 "--listen", f"localhost:{port}"], stderr=subprocess.PIPE, text=True)
        try:
            rc = proc.wait(3)
            r = proc.stderr.read()
            self.assertEqual(rc, 2, r)
            self.assertIn("listen", r)
        except subprocess.TimeoutExpired:
            pass  # it is serving
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stderr.close()

    def test_good_config_accepted(self):
        # The documented example configuration starts (the negative tests above must be able to pass).
        config = {"deletes": True, "shutdown_grace_seconds": 10, "threads": {"io": 0, "workers": 0},
                  "limits": {"max_manifest_bytes": 4194304, "max_header_bytes": 16384, "max_uploads": 1000,
                             "max_blob_bytes": 0, "max_page": 1000, "max_connections": 10000,
                             "idle_timeout_seconds": 60, "body_timeout_seconds": 60},
                  "uploads": {"idle_ttl_seconds": 3600, "purge_interval_seconds": 60}, "log": {"access": True}}
        b = bt.Berth(config=config)
        try:
            b.start()
            self.assertEqual(b.get("/v2/").status, 200)
            self.assertEqual(b.stop(), 0)
        finally:
            b.cleanup()


class FlagsOverrideTest(unittest.TestCase):
    def test_flags_override_config(self):
        other_port = bt.free_port()
        b = bt.Berth()
        other_root = os.path.join(b.tmp, "config-root")
        b.config = {"listen": f"127.0.0.1:{other_port}", "root": other_root}
        try:
            b.start()  # --listen/--root flags point elsewhere; start() waits on the flag's port
            self.assertNotEqual(b.port, other_port)
            with self.assertRaises(OSError):
                socket.create_connection(("127.0.0.1", other_port), timeout=2).close()
            b.push_blob("flags/repo", b"hello")
            self.assertTrue(os.path.isdir(os.path.join(b.root, "meta")))
            self.assertTrue(os.path.isfile(os.path.join(b.root, "blobs", "sha256",
                                                        bt.sha256_digest(b"hello")[7:9],
                                                        bt.sha256_digest(b"hello")[7:])))
            self.assertFalse(os.path.exists(other_root), "the config file's root was used")
        finally:
            b.cleanup()

    def test_config_file_alone(self):
        b = bt.Berth(use_flags=False)
        try:
            b.start()  # listen and root only in the file
            b.push_blob("flags/repo", b"from config")
            self.assertTrue(os.path.isdir(os.path.join(b.root, "meta")))
        finally:
            b.cleanup()


class LoggingTest(unittest.TestCase):
    def test_logs_are_json_lines(self):
        for access in (True, False):
            with self.subTest(access=access):
                b = bt.Berth(config={"log": {"access": access}})
                try:
                    b.start()
                    b.get("/v2/Bad/tags/list")
                    b.get("/v2/")
                    self.assertEqual(b.stop(), 0)
                    lines = b.log_lines()  # raises on a line that is not JSON
                    self.assertTrue(lines)
                    self.assertTrue(all(isinstance(x, dict) for x in lines))
                    text = b.stderr()
                    self.assertEqual("/v2/Bad/tags/list" in text, access, "access log setting ignored")
                finally:
                    b.cleanup()


class ShutdownTest(unittest.TestCase):
    GRACE = 10

    def slow_upload_then_signal(self, sig):
        b = bt.Berth(config={"shutdown_grace_seconds": self.GRACE})
        try:
            b.start()
            repo = "shutdown/repo"
            loc = b.upload_location(repo)
            data = os.urandom(300_000)
            s = bt.connect(b.port, timeout=20)
            try:
                s.sendall(f"PATCH {loc} HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
                          f"Content-Length: {len(data)}\r\nExpect: 100-continue\r\n\r\n".encode())
                reader = bt.RawReader(s)
                # 100 Continue: the server has the request in hand -- it is in flight.
                self.assertEqual(reader.read_response()[0], 100)
                s.sendall(data[:100_000])
                signalled = time.monotonic()
                b.send_signal(sig)

                # New connections are refused (poll, bounded).
                def refused():
                    try:
                        socket.create_connection(("127.0.0.1", b.port), timeout=1).close()
                        return False
                    except ConnectionRefusedError:
                        return True
                    except OSError:
                        return False
                bt.poll(refused, 5, what="the listener to close")
                self.assertTrue(b.alive(), "exited with a request in flight")

                # The in-flight request still completes, sent slowly.
                for i in range(100_000, len(data), 50_000):
                    s.sendall(data[i:i + 50_000])
                    time.sleep(0.1)
                status, headers, _ = reader.read_response()
                self.assertEqual(status, 202)
                self.assertEqual(headers.get("range"), f"0-{len(data) - 1}")
                closed, _ = bt.wait_closed(s, 5)
                self.assertTrue(closed, "connection kept open while draining")
            finally:
                s.close()
            rc = b.wait(self.GRACE + 5)
            self.assertEqual(rc, 0)
            self.assertLess(time.monotonic() - signalled, self.GRACE, "did not exit within the grace period")

            # What the in-flight request wrote was kept: the session resumes after a restart.
            b.restart()
            r = b.get(loc)
            self.assertEqual(r.status, 204, r)
            self.assertEqual(r.header("Range"), f"0-{len(data) - 1}")
            r = b.request("PUT", bt.with_query(loc, digest=bt.sha256_digest(data)), headers={"Content-Length": "0"})
            self.assertEqual(r.status, 201, r)
            self.assertEqual(b.get(f"/v2/{repo}/blobs/{bt.sha256_digest(data)}").body, data)
        finally:
            b.cleanup()

    def test_sigterm_with_slow_upload(self):
        self.slow_upload_then_signal(signal.SIGTERM)

    def test_sigint_with_slow_upload(self):
        self.slow_upload_then_signal(signal.SIGINT)

    def test_idle_connections_do_not_delay_exit(self):
        b = bt.Berth(config={"shutdown_grace_seconds": 30})
        try:
            b.start()
            with bt.connect(b.port) as s:
                s.sendall(b"GET /v2/ HTTP/1.1\r\nHost: x\r\n\r\n")
                self.assertEqual(bt.RawReader(s).read_response()[0], 200)  # keep-alive, now idle
                start = time.monotonic()
                b.send_signal(signal.SIGTERM)
                self.assertEqual(b.wait(10), 0)
                self.assertLess(time.monotonic() - start, 5, "an idle keep-alive connection held up the exit")
        finally:
            b.cleanup()

    def test_grace_period_bounds_exit(self):
        grace = 2
        b = bt.Berth(config={"shutdown_grace_seconds": grace})
        try:
            b.start()
            loc = b.upload_location("shutdown/stall")
            with bt.connect(b.port) as s:
                s.sendall(f"PATCH {loc} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n"
                          f"Expect: 100-continue\r\n\r\n".encode())
                self.assertEqual(bt.RawReader(s).read_response()[0], 100)
                s.sendall(b"x" * 1000)  # and then stall: the request never finishes
                start = time.monotonic()
                b.send_signal(signal.SIGTERM)
                rc = b.wait(grace + 8)
                elapsed = time.monotonic() - start
                self.assertEqual(rc, 0)
                self.assertGreater(elapsed, grace - 0.5, "did not wait for the in-flight request")
                self.assertLess(elapsed, grace + 3, "overran the grace period")
        finally:
            b.cleanup()


if __name__ == "__main__":
    unittest.main(verbosity=2)
