#!/usr/bin/env python3
"""Clients on the same host are served without TCP pacing: their connections get
tcp.same_host_congestion_control (reno by default), while connections from other hosts keep the
system's congestion control. Read off the server's side of each real connection with ss(8); the
other host is a network namespace joined by a veth pair."""

import http.client
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402

with open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
    SYSTEM = f.read().strip()
SAME_HOST = "reno"


def server_side_congestion(port, client_port):
    """The congestion control of berth's end of the connection from client_port."""
    out = subprocess.run(["ss", "-tinH", "state", "established", f"( sport = :{port} and dport = :{client_port} )"],
                         capture_output=True, text=True, timeout=10, check=True).stdout
    lines = [line.split() for line in out.splitlines() if line.strip()]
    assert len(lines) == 2, f"expected one connection from :{client_port}, ss says:\n{out}"
    return lines[1][0]


def open_connection(b):
    """A keep-alive connection that has had one answer; returns it and its local port."""
    conn = http.client.HTTPConnection("127.0.0.1", b.port, timeout=10)
    conn.request("GET", "/v2/")
    r = conn.getresponse()
    r.read()
    assert r.status == 200, r.status
    return conn, conn.sock.getsockname()[1]


@unittest.skipIf(SYSTEM == SAME_HOST, f"the system already uses {SAME_HOST}: nothing to tell apart")
class SameHostCongestionTest(unittest.TestCase):
    def start(self, config=None, listen_host="127.0.0.1"):
        b = bt.Berth(config=config)
        b.listen_host = listen_host
        self.addCleanup(b.cleanup)
        return b.start()

    def assert_client_gets(self, b, expected):
        conn, port = open_connection(b)
        self.addCleanup(conn.close)
        self.assertEqual(server_side_congestion(b.port, port), expected)

    def test_loopback_listener(self):
        self.assert_client_gets(self.start(), SAME_HOST)

    def test_turned_off(self):
        self.assert_client_gets(self.start({"tcp": {"same_host_congestion_control": ""}}), SYSTEM)

    def test_refused_name_is_logged_and_changes_nothing(self):
        b = self.start({"tcp": {"same_host_congestion_control": "no_such_cc"}})
        self.assert_client_gets(b, SYSTEM)
        self.assertTrue(any("congestion control" in line.get("msg", "") and "no_such_cc" in line.get("error", "")
                            for line in b.log_lines()), b.stderr()[-2000:])

    def other_host(self):
        """A network namespace joined to this one by a veth pair; returns (namespace, host-side
        device, the subnet's first three octets): the host end is .1, the namespace's .2."""
        if not bt.netns_usable():
            self.skipTest("network namespaces need root and iproute2")
        tag = os.urandom(3).hex()
        ns, host_dev, ns_dev = f"berth-{tag}", f"vt{tag}h", f"vt{tag}n"
        net = f"10.215.{int(tag[:2], 16) % 250 + 1}"

        def ip(*args):
            subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)
        ip("netns", "add", ns)
        self.addCleanup(subprocess.run, ["ip", "netns", "del", ns], capture_output=True, timeout=10)
        ip("link", "add", host_dev, "type", "veth", "peer", "name", ns_dev)
        self.addCleanup(subprocess.run, ["ip", "link", "del", host_dev], capture_output=True, timeout=10)
        ip("link", "set", ns_dev, "netns", ns)
        ip("addr", "add", f"{net}.1/24", "dev", host_dev)
        ip("-n", ns, "addr", "add", f"{net}.2/24", "dev", ns_dev)
        ip("link", "set", host_dev, "up")
        ip("-n", ns, "link", "set", ns_dev, "up")
        return ns, host_dev, net

    def assert_remote_pull_gets(self, b, ns, net, expected):
        """A client in the namespace pulls a blob whole over a connection whose server end uses
        `expected`."""
        digest = b.push_blob("tcp/remote", os.urandom(3 << 20))
        # The client prints its port and what it got, then keeps the connection open until
        # its stdin closes.
        client = ("import hashlib, http.client, sys\n"
                  f"c = http.client.HTTPConnection('{net}.1', {b.port}, timeout=10)\n"
                  f"c.request('GET', '/v2/tcp/remote/blobs/{digest}')\n"
                  "r = c.getresponse()\n"
                  "print(c.sock.getsockname()[1], r.status, 'sha256:' + hashlib.sha256(r.read()).hexdigest(), "
                  "flush=True)\n"
                  "sys.stdin.read()\n")
        with subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", client],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as proc:
            try:
                port, status, got = proc.stdout.readline().split()
                self.assertEqual((status, got), ("200", digest))
                self.assertEqual(server_side_congestion(b.port, port), expected)
            finally:
                proc.stdin.close()
                proc.wait(timeout=10)

    def test_listener_on_every_address(self):
        """Loopback clients get the same-host choice; a client on another host the system's."""
        ns, _, net = self.other_host()
        b = self.start(listen_host="0.0.0.0")
        self.assert_client_gets(b, SAME_HOST)
        self.assert_remote_pull_gets(b, ns, net, SYSTEM)

    def test_route_choice_is_kept(self):
        """A congestion control set on the route to a client (ip route ... congctl) stays."""
        ns, host_dev, net = self.other_host()
        with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
            others = [name for name in f.read().split() if name not in (SYSTEM, SAME_HOST)]
        if not others:
            self.skipTest("no third congestion control in this kernel")
        subprocess.run(["ip", "route", "replace", f"{net}.0/24", "dev", host_dev, "congctl", others[0]],
                       check=True, capture_output=True, timeout=10)
        b = self.start(listen_host="0.0.0.0")
        self.assert_remote_pull_gets(b, ns, net, others[0])


if __name__ == "__main__":
    unittest.main()
