#!/usr/bin/env python3
"""The network lab itself (tests/lib/netlab.py): hosts in network namespaces on one bridge that
the root namespace joins at the subnet's .1. One lab for the class, with hosts a and b unlimited
and s limited to 40 Mbit/s each way.

- a and b talk TCP (python -m http.server in a, urllib in b); the test process reaches the hosts
  and a host reaches a server of the test process on lab.address, which sees the host's address.
- set_hosts: a name resolves in processes started after it, not in one already running; set back
  to {} the name fails again, at once.
- 4 MiB at 40 Mbit/s take about 0.84 s each way (s sending, s receiving), unlimited far less; the
  byte counters grow by at least what was sent.
- cut() makes the host unreachable (silence, not refusals) and restore() brings it back, its
  rate limit still in place.
- close() kills every process in the lab's namespaces (one escaped into a session of its own
  too) and leaves no namespace, interface, /etc/netns dir or record; sweep() removes what a
  process killed with SIGKILL left.
- delay_ms adds a round trip of 2 x delay (skipped where the kernel has no netem).
"""

import http.server
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

LIB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib")
sys.path.insert(0, LIB)
import berthtest as bt  # noqa: E402
import netlab  # noqa: E402

SKIP = netlab.skip_reason()
PY = sys.executable
MIB = 1 << 20

# Receives one connection on argv[1]:argv[2] and prints the bytes and the seconds from accept to EOF.
RECEIVER = r"""
import socket, sys, time
srv = socket.create_server((sys.argv[1], int(sys.argv[2])))
print("ready", flush=True)
conn, _ = srv.accept()
t0, n = time.monotonic(), 0
while True:
    data = conn.recv(1 << 20)
    if not data:
        break
    n += len(data)
print(n, time.monotonic() - t0, flush=True)
"""

SENDER = r"""
import socket, sys
with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30) as s:
    s.sendall(bytes(int(sys.argv[3])))
"""

# Tries to connect; prints "refused" when the host answered, "timeout" when nothing came back.
PROBE = r"""
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3])).close()
    print("connected")
except ConnectionRefusedError:
    print("refused")
except OSError as e:
    print("timeout" if isinstance(e, TimeoutError) else repr(e))
"""

# Resolves each name read from stdin with the files the process started with.
RESOLVER = r"""
import socket, sys
for line in sys.stdin:
    try:
        print(socket.gethostbyname(line.strip()), flush=True)
    except OSError:
        print("unknown", flush=True)
"""


def readline(proc, timeout=10):
    """The next line proc prints, waiting at most timeout seconds."""
    if not select.select([proc.stdout], [], [], timeout)[0]:
        raise AssertionError(f"no output from {proc.args} within {timeout}s")
    return proc.stdout.readline().strip()


def root_probe(address, port, timeout=0.5):
    """Like PROBE, from the test process (the root namespace)."""
    try:
        socket.create_connection((address, port), timeout=timeout).close()
        return "connected"
    except ConnectionRefusedError:
        return "refused"
    except TimeoutError:
        return "timeout"
    except OSError as e:
        return repr(e)


def lab_traces(lab_id):
    """What of a lab with this id exists: namespaces, root interfaces, /etc/netns dirs, records."""
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, timeout=10).stdout
    etc = os.listdir(netlab.ETC_NETNS) if os.path.isdir(netlab.ETC_NETNS) else []
    return ([line for line in netns.splitlines() if lab_id in line]
            + [line for line in links.splitlines() if lab_id in line]
            + [name for name in etc if lab_id in name]
            + [p for p in (netlab.STATE_PREFIX + lab_id + ".json",) if os.path.exists(p)])


def gone(pid):
    """Whether pid has exited (a zombie counts: it is only waiting for its parent)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@unittest.skipIf(SKIP, SKIP)
class NetlabTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        t0 = time.monotonic()
        cls.lab = netlab.Lab("nlt")
        cls.a = cls.lab.host("a")
        cls.b = cls.lab.host("b")
        cls.s = cls.lab.host("s", rate_mbit=40)
        print(f"\nnetlab: {cls.lab} with {cls.a}, {cls.b}, {cls.s} in {time.monotonic() - t0:.2f} s",
              file=sys.stderr)

    @classmethod
    def tearDownClass(cls):
        cls.lab.close()

    def popen(self, host, argv, **kw):
        proc = host.popen(argv, stdout=subprocess.PIPE, text=True, **kw)
        self.addCleanup(lambda: (proc.kill(), proc.wait(), proc.stdout.close(),
                                 proc.stdin and proc.stdin.close()))
        return proc

    def probe(self, host, address, port, timeout=0.5):
        return host.run([PY, "-c", PROBE, address, str(port), str(timeout)],
                        capture_output=True, text=True).stdout.strip()

    # ------------------------------------------------------------------ reachability

    def test_addresses(self):
        self.assertEqual(self.lab.address, str(self.lab.subnet.network_address + 1))
        self.assertEqual([self.a.address, self.b.address, self.s.address],
                         [str(self.lab.subnet.network_address + i) for i in (2, 3, 4)])
        self.assertLessEqual(len(self.lab.uplink), 15)
        out = self.a.run(["ip", "-4", "-o", "addr", "show", "dev", "eth0"], capture_output=True, text=True).stdout
        self.assertIn(f"inet {self.a.address}/24", out)

    def test_hosts_talk_http(self):
        root = tempfile.mkdtemp(prefix="netlab-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", root]))
        body = os.urandom(200_000)
        with open(os.path.join(root, "blob"), "wb") as f:
            f.write(body)
        server = self.a.popen([PY, "-m", "http.server", "--bind", self.a.address, "--directory", root, "8000"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: (server.kill(), server.wait(), server.stderr.close()))
        # the test process reaches a's address: ready once it stops refusing
        bt.poll(lambda: root_probe(self.a.address, 8000) == "connected", 10, what="http.server in a")
        fetch = ("import hashlib, urllib.request, sys\n"
                 "print(hashlib.sha256(urllib.request.urlopen(sys.argv[1], timeout=10).read()).hexdigest())")
        r = self.b.run([PY, "-c", fetch, f"http://{self.a.address}:8000/blob"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), bt.sha256_digest(body).split(":")[1])
        server.kill()
        server.wait()
        self.assertIn(f"{self.b.address} - - ", server.stderr.read(), "the server logs b's address as the client")

    def test_host_reaches_the_root_namespace(self):
        seen = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                seen.append(self.client_address[0])
                self.send_response(200)
                self.send_header("Content-Length", "5")
                self.end_headers()
                self.wfile.write(b"hello")

            def log_message(self, *args):
                pass

        server = http.server.ThreadingHTTPServer((self.lab.address, 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        url = f"http://{self.lab.address}:{server.server_address[1]}/"
        r = self.s.run([PY, "-c", f"import urllib.request; print(urllib.request.urlopen({url!r}, timeout=10).read())"],
                       capture_output=True, text=True)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "b'hello'"), r.stderr)
        self.assertEqual(seen, [self.s.address])

    # ------------------------------------------------------------------ names

    def test_set_hosts(self):
        self.addCleanup(self.a.set_hosts, {})

        def getent(name):
            t0 = time.monotonic()
            r = self.a.run(["getent", "hosts", name], capture_output=True, text=True)
            return r.returncode, r.stdout.split(), time.monotonic() - t0

        code, _, took = getent("replica.test")
        self.assertEqual(code, 2, "an unknown name is not found")
        self.assertLess(took, 2, "and that is known at once (no DNS server to wait for)")
        self.assertEqual(getent(socket.gethostname())[:2], (0, ["127.0.0.1", "localhost", socket.gethostname()]),
                         "the machine's name is local, as in the root namespace")

        before = self.popen(self.a, [PY, "-c", RESOLVER], stdin=subprocess.PIPE)
        before.stdin.write("replica.test\n")
        before.stdin.flush()
        self.assertEqual(readline(before), "unknown")

        self.a.set_hosts({"replica.test": self.b, "other.test": "10.1.2.3"})
        self.assertEqual(getent("replica.test")[:2], (0, [self.b.address, "replica.test"]))
        self.assertEqual(getent("other.test")[:2], (0, ["10.1.2.3", "other.test"]))
        before.stdin.write("replica.test\n")
        before.stdin.flush()
        self.assertEqual(readline(before), "unknown", "a process started before set_hosts keeps its file")
        r = self.b.run(["getent", "hosts", "replica.test"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2, "b's names are its own")

        self.a.set_hosts({})
        code, _, took = getent("replica.test")
        self.assertEqual(code, 2)
        self.assertLess(took, 2)

    # ------------------------------------------------------------------ bandwidth

    def transfer(self, sender, receiver, size, port):
        """Seconds receiver took to get size bytes from sender (measured by the receiver)."""
        rx = self.popen(receiver, [PY, "-c", RECEIVER, receiver.address, str(port)])
        self.assertEqual(readline(rx), "ready")
        r = sender.run([PY, "-c", SENDER, receiver.address, str(port), str(size)], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        got, seconds = readline(rx, 30).split()
        self.assertEqual(int(got), size)
        return float(seconds)

    def test_rate_limit_both_ways(self):
        size = 4 * MIB
        expected = size * 8 / 40e6  # 0.84 s
        s0, a0 = self.s.counters(), self.a.counters()
        out = self.transfer(self.s, self.a, size, 9001)  # s's egress: tbf on its eth0
        s1, a1 = self.s.counters(), self.a.counters()
        into = self.transfer(self.a, self.s, size, 9002)  # s's ingress: tbf on the bridge's port
        s2 = self.s.counters()
        free = self.transfer(self.a, self.b, size, 9003)
        print(f"\n4 MiB at 40 Mbit/s (expected {expected:.2f} s): out of s {out:.2f} s, into s {into:.2f} s; "
              f"unlimited {free:.3f} s", file=sys.stderr)
        for took in (out, into):
            self.assertGreater(took, 0.6)
            self.assertLess(took, 1.6)
        self.assertLess(free, 0.3, "unlimited hosts are not slowed down")
        self.assertGreaterEqual(s1.tx_bytes - s0.tx_bytes, size)
        self.assertGreaterEqual(a1.rx_bytes - a0.rx_bytes, size)
        self.assertGreaterEqual(s2.rx_bytes - s1.rx_bytes, size)
        self.assertLess(s1.tx_bytes - s0.tx_bytes, size * 1.1, "headers and acks are a few percent")

    # ------------------------------------------------------------------ partition

    def test_cut_and_restore(self):
        # Nothing listens on port 9: a reachable host refuses at once.
        self.assertEqual(self.probe(self.a, self.s.address, 9), "refused")
        self.s.cut()
        self.addCleanup(lambda: self.s.is_cut and self.s.restore())
        self.assertEqual(self.probe(self.a, self.s.address, 9), "timeout")
        self.assertEqual(self.probe(self.s, self.a.address, 9), "timeout")
        self.assertEqual(root_probe(self.s.address, 9), "timeout")
        self.assertEqual(self.probe(self.a, self.b.address, 9), "refused", "the others still talk")
        self.s.restore()
        self.assertEqual(self.probe(self.a, self.s.address, 9, timeout=5), "refused")
        self.assertEqual(root_probe(self.s.address, 9, timeout=5), "refused")
        qdisc = subprocess.run(["tc", "-n", self.lab.switch, "qdisc", "show", "dev", self.s.port],
                               capture_output=True, text=True, timeout=10).stdout
        self.assertIn("tbf", qdisc, "the rate limit survives the cut")

    @unittest.skipUnless(netlab.delay_supported(), "this kernel has no netem (CONFIG_NET_SCH_NETEM), which delay_ms needs")
    def test_delay(self):
        slow = self.lab.host("d", delay_ms=50)
        t0 = time.monotonic()
        self.assertEqual(root_probe(slow.address, 9, timeout=5), "refused")
        self.assertGreaterEqual(time.monotonic() - t0, 0.1)

    # ------------------------------------------------------------------ cleanup

    def test_close_leaves_nothing(self):
        with netlab.Lab("nlc") as lab:
            h = lab.host("x", rate_mbit=10)
            h.set_hosts({"x.test": h})
            sleeper = h.popen(["sleep", "300"])
            # a process in a session of its own, which lab.close() finds in the namespace
            escaped = h.run(["sh", "-c", "setsid sleep 300 >/dev/null 2>&1 & echo $!"],
                            capture_output=True, text=True).stdout.strip()
            self.assertTrue(escaped.isdigit(), escaped)
            self.assertIn(int(escaped), h.pids())
            self.assertIn(sleeper.pid, h.pids())
            self.assertGreaterEqual(len(lab_traces(lab.id)), 4)  # netns x 2, uplink, etc dir, record
        self.assertEqual(lab_traces(lab.id), [])
        self.assertIsNotNone(sleeper.poll())
        self.assertTrue(bt.poll(lambda: gone(int(escaped)), 5, what="the escaped process to die"))
        lab.close()  # again: nothing to do

    def test_sweep_after_sigkill(self):
        child = subprocess.Popen([PY, "-c", f"import sys, time; sys.path.insert(0, {LIB!r}); import netlab\n"
                                  "lab = netlab.Lab('nls'); h = lab.host('x', rate_mbit=10); p = h.popen(['sleep', '300'])\n"
                                  "print(lab.id, p.pid, flush=True); time.sleep(300)"],
                                 stdout=subprocess.PIPE, text=True, start_new_session=True)
        self.addCleanup(lambda: (child.poll() is None and child.kill(), child.wait(), child.stdout.close()))
        lab_id, sleeper = readline(child, 20).split()
        self.assertGreaterEqual(len(lab_traces(lab_id)), 4)
        os.killpg(child.pid, signal.SIGKILL)  # the sleep, in a session of its own, lives on
        child.wait()
        self.assertFalse(gone(int(sleeper)))
        netlab.sweep()  # (or the Lab() of a test running in parallel did it already)
        self.assertEqual(lab_traces(lab_id), [])
        self.assertTrue(bt.poll(lambda: gone(int(sleeper)), 5, what="the lab's process to die"))


if __name__ == "__main__":
    unittest.main()
