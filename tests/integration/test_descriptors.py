#!/usr/bin/env python3
"""Descriptors are a budget berth plans for.

- At start berth raises its soft RLIMIT_NOFILE to the hard limit and logs both: started under
  `prlimit --nofile=1024:20000` it logs a JSON line naming 1024 and 20000, and with 1000 idle
  connections open it still answers GET /v2/ within 1 s (at a soft limit of 1024 it could not).
- It refuses to start (exit code 2) when limits.max_connections plus its headroom (256) does
  not fit under the hard limit, naming both numbers; exactly at the limit it starts.
- Out of descriptors (EMFILE) the listener backs off instead of spinning: with the running
  process's limit lowered to 64 and 150 connections waiting, it burns (almost) no CPU, counts
  the pauses in berth_accept_backoffs_total, and serves again once connections close.

Needs util-linux `prlimit`. Every process started here is killed in tearDown."""

import http.client
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402

PRLIMIT = shutil.which("prlimit")
CLK_TCK = os.sysconf("SC_CLK_TCK")


class LimitedBerth(bt.Berth):
    """berth started under `prlimit --nofile=SOFT:HARD` (prlimit execs it: same pid)."""

    def __init__(self, nofile, **kw):
        super().__init__(**kw)
        self.nofile = nofile

    def _spawn(self):
        self._starts += 1
        args = [PRLIMIT, f"--nofile={self.nofile[0]}:{self.nofile[1]}", bt.BIN, "serve",
                "--root", self.root, "--listen", f"{self.listen_host}:{self.port}"]
        if self.config:
            path = os.path.join(self.tmp, "config.json")
            with open(path, "w") as f:
                json.dump(self.config, f)
            args += ["--config", path]
        self.stderr_path = os.path.join(self.tmp, f"stderr.{self._starts}.log")
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self._stderr, start_new_session=True)

    def run_to_exit(self, timeout=20):
        """Spawn once and wait for the process to end by itself; returns the exit code."""
        bt.wait_for_binary()
        self.port = bt.free_port()
        self._spawn()
        try:
            return self.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"berth did not exit within {timeout}s: {self.stderr()[-2000:]}")


def cpu_seconds(pid):
    """utime + stime of a process, in seconds (fields 14 and 15 of /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def open_fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def numbers_in(value):
    """Every integer among a JSON value's leaves (numbers, and strings that are numbers)."""
    if isinstance(value, bool):
        return set()
    if isinstance(value, int):
        return {value}
    if isinstance(value, str):
        return {int(value)} if value.isdigit() else set()
    if isinstance(value, dict):
        return set().union(*map(numbers_in, value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*map(numbers_in, value)) if value else set()
    return set()


def open_idle(port, count, sources):
    """count idle connections, spread over the given source addresses; returns the sockets."""
    socks = []
    try:
        for i in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(s)
            s.settimeout(10)
            s.bind((sources[i % len(sources)], 0))
            s.connect(("127.0.0.1", port))
    except BaseException:
        close_all(socks)
        raise
    return socks


def close_all(socks):
    for s in socks:
        try:
            s.close()
        except OSError:
            pass
    socks.clear()


@unittest.skipUnless(PRLIMIT, "util-linux prlimit is not installed")
class DescriptorLimitTest(unittest.TestCase):
    def setUp(self):
        self.socks = []
        self.addCleanup(close_all, self.socks)
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        # This process holds the client ends of the connections below.
        if soft != resource.RLIM_INFINITY and soft < 2200:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))

    def berth(self, nofile, config=None):
        b = LimitedBerth(nofile, config=config)
        self.addCleanup(b.cleanup)
        return b

    # ---------------------------------------------------------------- a

    def test_soft_limit_raised_and_logged(self):
        hard = 20000
        _, our_hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if os.geteuid() != 0 and our_hard != resource.RLIM_INFINITY and our_hard < hard:
            hard = our_hard  # only root may raise a hard limit
        if hard < 2000:
            self.skipTest(f"hard descriptor limit {hard} is too low for 1000 connections")
        b = self.berth((1024, hard)).start()
        # The start logs one JSON line naming the soft limit it found and the hard limit.
        lines = [line for line in b.log_lines() if {1024, hard} <= numbers_in(line)]
        self.assertTrue(lines, f"no JSON log line names both 1024 and {hard}:\n{b.stderr()[-3000:]}")
        with open(f"/proc/{b.proc.pid}/limits") as f:
            limits = [line for line in f if line.startswith("Max open files")][0].split()
        self.assertEqual((int(limits[3]), int(limits[4])), (hard, hard), "soft limit not raised to the hard one")

        # 1000 idle connections (from four addresses: 250 each, under the per-client limit of 1000).
        sources = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]
        self.socks.extend(open_idle(b.port, 1000, sources))
        bt.poll(lambda: open_fds(b.proc.pid) >= 1000, 20, 0.05, "berth to accept the 1000 connections")
        bt.poll(lambda: b.metrics().get("berth_http_connections", 0) >= 1000, 20, 0.1,
                "berth_http_connections to count the 1000 connections")
        for _ in range(3):
            start = time.monotonic()
            r = b.get("/v2/", timeout=5)
            elapsed = time.monotonic() - start
            self.assertEqual(r.status, 200, r)
            self.assertLess(elapsed, 1.0, f"GET /v2/ took {elapsed:.2f}s with 1000 idle connections")
        # A push and a pull need descriptors beyond the connections (files): they work too.
        data = os.urandom(100 * 1024)
        digest = b.push_blob("fd/app", data)
        self.assertEqual(b.get(f"/v2/fd/app/blobs/{digest}").body, data)
        self.assertTrue(b.alive())

    # ---------------------------------------------------------------- b

    def test_refuses_to_start_when_connections_do_not_fit(self):
        b = self.berth((512, 512))  # default config: max_connections 10000
        code = b.run_to_exit()
        err = b.stderr()
        self.assertEqual(code, 2, f"exit code {code}: {err[-2000:]}")
        self.assertIn("10000", err, f"stderr does not name max_connections:\n{err[-2000:]}")
        self.assertIn("512", err, f"stderr does not name the descriptor limit:\n{err[-2000:]}")

    def test_refuses_with_max_connections_from_the_config(self):
        b = self.berth((512, 512), config={"limits": {"max_connections": 300}})
        code = b.run_to_exit()
        err = b.stderr()
        self.assertEqual(code, 2, f"exit code {code}: {err[-2000:]}")
        self.assertIn("300", err, err[-2000:])
        self.assertIn("512", err, err[-2000:])

    def test_starts_when_connections_and_headroom_just_fit(self):
        # 256 connections + 256 of headroom = 512: fits.
        b = self.berth((512, 512), config={"limits": {"max_connections": 256}}).start()
        self.assertEqual(b.get("/v2/").status, 200)

    # ---------------------------------------------------------------- c

    def test_out_of_descriptors_backs_off(self):
        b = self.berth((1024, 1024), config={"limits": {"max_connections": 100,
                                                          "max_connections_per_client": 1000}}).start()
        pid = b.proc.pid
        self.assertEqual(b.metrics().get("berth_accept_backoffs_total"), 0.0)
        r = subprocess.run([PRLIMIT, "--pid", str(pid), "--nofile=64:64"], capture_output=True, text=True,
                           timeout=10)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.socks.extend(open_idle(b.port, 150, ["127.0.0.1"]))
        # berth takes connections until its descriptors run out (64), then must pause.
        bt.poll(lambda: open_fds(pid) >= 60, 10, 0.05, "berth to use up its descriptors")
        self.assertTrue(b.alive(), b.stderr()[-2000:])

        before = cpu_seconds(pid)
        window_start = time.monotonic()
        while time.monotonic() - window_start < 2.0:  # a measuring window, not a wait for an event
            self.assertTrue(b.alive(), f"berth exited out of descriptors: {b.stderr()[-2000:]}")
            time.sleep(0.1)
        burned = cpu_seconds(pid) - before
        window = time.monotonic() - window_start
        print(f"  {burned:.2f}s of CPU in {window:.2f}s while out of descriptors ({open_fds(pid)} open)",
              file=sys.stderr)
        self.assertLess(burned, 0.5, f"berth burned {burned:.2f}s of CPU in {window:.2f}s out of descriptors")

        # Free descriptors, then the metrics must show the pauses.
        close_all(self.socks)
        metrics = bt.poll(lambda: self.try_metrics(b), 15, 0.1, "GET /metrics once connections closed")
        self.assertGreater(metrics.get("berth_accept_backoffs_total", 0), 0,
                           f"berth_accept_backoffs_total: {metrics.get('berth_accept_backoffs_total')}")
        start = time.monotonic()
        r = bt.poll(lambda: self.try_get(b, "/v2/"), 2, 0.05, "GET /v2/ after the connections closed")
        self.assertEqual(r.status, 200, r)
        self.assertLess(time.monotonic() - start, 2.0)
        self.assertTrue(b.alive())

    @staticmethod
    def try_metrics(b):
        try:
            r = b.get("/metrics", timeout=2)
        except (OSError, http.client.HTTPException):
            return None
        return bt.parse_metrics(r.body.decode()) if r.status == 200 else None

    @staticmethod
    def try_get(b, path):
        try:
            return b.get(path, timeout=2)
        except (OSError, http.client.HTTPException):
            return None


if __name__ == "__main__":
    unittest.main()
