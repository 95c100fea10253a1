"""Several "hosts" on one machine for tests: a Lab is a private Ethernet segment that the root
namespace joins at the subnet's first address; each Host on it is a network namespace with its
own address, an optional bandwidth limit (and delay, where the kernel has netem), its own
/etc/hosts, its processes, a link that can be cut, and byte counters.

    with netlab.Lab("repl") as lab:                     # or lab = Lab(...); addCleanup(lab.close)
        a = lab.host("a", rate_mbit=40)                 # 10.77.0.2, 40 Mbit/s each way
        b = lab.host("b")                               # 10.77.0.3
        lab.set_hosts({"a.test": a, "b.test": b})       # on every host, for processes started later
        server = a.popen([sys.executable, "-m", "http.server", "--bind", a.address, "8000"])
        b.run(["getent", "hosts", "a.test"])            # subprocess.run inside b's namespace
        lab.address                                     # 10.77.0.1: the root namespace, for servers
        a.cut(); a.restore()                            #   of the test process itself
        a.counters().tx_bytes

Root, iproute2 (`ip`, `tc`) and the standard library only; skip_reason() says why a test can't run.

Layout. The bridge does NOT live in the root namespace but in a namespace of its own (`<id>-sw`):
with br_netfilter loaded (it is on this kind of machine: /proc/sys/net/bridge/
bridge-nf-call-iptables is 1), frames between two ports of a bridge go through the iptables
FORWARD chain of the bridge's namespace, and Docker sets that chain's policy to DROP in the root
namespace. In its own namespace the bridge meets an empty ruleset (and netlab turns
bridge-nf-call-ip*tables off there; the setting is per namespace), so hosts reach each other
whatever the root namespace's firewall says. The root namespace joins the bridge through one veth
pair, `<id>r` (the only interface netlab adds to the root namespace), which holds the subnet's
first address: the test process reaches every host, and every host reaches servers the test
binds on lab.address (its default route points there; nothing is forwarded beyond the subnet,
there is no NAT). Root's INPUT chain does apply to hosts -> root traffic.

    root ns: <id>r 10.77.0.1 ==veth== uplink [bridge lab0 in <id>-sw] p2 ==veth== eth0 10.77.0.2 (<id>-a)
                                                                p3 ==veth== eth0 10.77.0.3 (<id>-b)

Names. <id> is `<prefix>-<pid base 36>-<n>` (prefix: up to 5 letters or digits), so labs of
parallel test processes never collide; a host's namespace is `<id>-<name>`. The subnet, when not
given, is the first 10.77.N.0/24 that no route or address of the root namespace overlaps; the
choice and the address are taken under a lock (/run/lock/netlab.lock; not /run/netns, which
`ip netns add` itself flocks), so parallel labs get different subnets. An
explicit subnet that overlaps one in use is refused.

Links carry IPv4 only (IPv6 is off on eth0 and the lab's veths, so router solicitations and the
like do not add to counters; lo keeps ::1).

Bandwidth. rate_mbit limits both directions of a host's link with tbf (rate in 10^6 bit/s):
egress on eth0 inside the host's namespace, and egress of the bridge's port towards the host,
which is the host's ingress (from other hosts and from the root namespace alike). burst is
max(64 KiB, 4 ms of the rate), the queue 50 ms of the rate. The rate counts whole frames, so
TCP payload gets about 96% of it: 4 or 8 MiB at 10, 25, 40 and 100 Mbit/s took 3-4% longer
than size/rate, either way. delay_ms adds that much netem delay in
each direction (round trip + 2 * delay_ms); kernels without netem (CONFIG_NET_SCH_NETEM unset,
as on this machine's) raise Unsupported: ask delay_supported() first.

Name resolution. `ip netns exec NS cmd` bind-mounts each file of /etc/netns/NS/ over the same
name in /etc/, in a mount namespace of cmd's own, when cmd starts. Every host starts with an
/etc/netns/<ns>/hosts holding the localhost lines only and a resolv.conf whose nameserver is
127.0.0.1, where nothing listens: a name that is not in the hosts file fails at once (ICMP port
unreachable) instead of waiting for a DNS server the lab cannot reach. host.set_hosts(mapping)
rewrites hosts (atomically, a new file): processes started AFTER the call see it; a process
already running keeps the file it had when it started, so restart it to pick up a change.
set_hosts({}) goes back to the localhost lines. The root namespace's /etc is never touched.

Processes. host.popen() and host.run() run argv under `ip netns exec` (which execs it: the pid
is the command's), in a new session and with stdin from /dev/null unless told otherwise.
lab.close() kills every process popen started (its whole process group) and every other
process inside the lab's namespaces (`ip netns pids`), then deletes the veths, the namespaces
and /etc/netns/<ns>. close() runs at `with` exit, is idempotent, and runs at interpreter exit
for labs still open. A test killed with SIGKILL leaves a record (/run/netlab-<id>.json, written
before each thing is created); the next Lab() of any process, or sweep(), removes what such a
dead process left.
"""

import atexit
import fcntl
import functools
import glob
import ipaddress
import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import NamedTuple

__all__ = ["Lab", "Host", "Counters", "Unsupported", "skip_reason", "delay_supported", "sweep"]

NETNS_DIR = "/run/netns"
ETC_NETNS = "/etc/netns"
STATE_PREFIX = "/run/netlab-"
LOCK_FILE = "/run/lock/netlab.lock" if os.path.isdir("/run/lock") else "/run/netlab.lock"
DEFAULT_POOL = ipaddress.ip_network("10.77.0.0/16")  # subnet=None: the first free /24 of this
RUN_TIMEOUT = 60  # default timeout of host.run(), seconds
QUEUE_MS = 50  # tbf queue, in ms of the rate
BRIDGE = "lab0"  # inside the switch namespace
UPLINK = "uplink"  # the switch's end of the root namespace's veth


class Unsupported(RuntimeError):
    """The kernel or tools here cannot do what was asked (e.g. delay_ms without netem)."""


class Counters(NamedTuple):
    rx_bytes: int
    tx_bytes: int
    rx_packets: int
    tx_packets: int


# --------------------------------------------------------------------------- commands


def _cmd(argv, check=True, timeout=20):
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError(f"`{' '.join(argv)}` exited {r.returncode}: {r.stderr.strip()}")
    return r


def _ip(*args, ns=None, check=True):
    return _cmd(["ip", *(["-n", ns] if ns else []), *args], check=check)


def _tc(*args, ns=None, check=True):
    return _cmd(["tc", *(["-n", ns] if ns else []), *args], check=check)


def _sysctl_in(ns, settings):
    """Write /proc/sys files inside namespace ns (net sysctls are per namespace); missing ones
    (no IPv6, no br_netfilter) are skipped."""
    script = "; ".join(f"[ -e {path} ] && echo {value} > {path}" for path, value in settings) + "; true"
    _cmd(["ip", "netns", "exec", ns, "sh", "-c", script])


@functools.cache
def skip_reason():
    """None when this process can build labs; else why not (for unittest.skipIf)."""
    if os.environ.get("BERTH_NO_NETNS"):
        return "BERTH_NO_NETNS is set"
    if os.geteuid() != 0:
        return "netlab needs root (network namespaces, veth pairs, tc)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"netlab needs iproute2's `{tool}`"
    probe = f"netlab-probe-{os.getpid()}-{os.urandom(2).hex()}"
    r = _ip("netns", "add", probe, check=False)
    if r.returncode != 0:
        return f"`ip netns add` is not permitted here: {r.stderr.strip()}"
    try:
        steps = [["ip", "netns", "exec", probe, "true"],
                 ["ip", "-n", probe, "link", "add", "b0", "type", "bridge"],
                 ["ip", "-n", probe, "link", "add", "v0", "type", "veth", "peer", "name", "v1"],
                 ["tc", "-n", probe, "qdisc", "add", "dev", "v0", "root", "tbf", "rate", "10mbit",
                  "burst", "64kb", "latency", "50ms"]]
        for argv in steps:
            r = _cmd(argv, check=False)
            if r.returncode != 0:
                return f"`{' '.join(argv)}` failed here: {r.stderr.strip()}"
    finally:
        _ip("netns", "del", probe, check=False)
    return None


@functools.cache
def delay_supported():
    """Whether the kernel has netem, which delay_ms needs."""
    if skip_reason():
        return False
    probe = f"netlab-probe-{os.getpid()}-{os.urandom(2).hex()}"
    if _ip("netns", "add", probe, check=False).returncode != 0:
        return False
    try:
        return _tc("qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms", ns=probe, check=False).returncode == 0
    finally:
        _ip("netns", "del", probe, check=False)


def _shape(ns, dev, rate_mbit, delay_ms):
    """Root qdisc of dev in ns: tbf at rate_mbit and/or netem delay_ms."""
    tbf = None
    if rate_mbit is not None:
        rate = float(rate_mbit) * 1e6 / 8  # bytes per second
        burst = max(65536, int(rate * 0.004))
        tbf = ["tbf", "rate", f"{int(rate_mbit * 1000)}kbit", "burst", str(burst), "latency", f"{QUEUE_MS}ms"]
    if delay_ms is None:
        _tc("qdisc", "replace", "dev", dev, "root", *tbf, ns=ns)
        return
    r = _tc("qdisc", "replace", "dev", dev, "root", "handle", "1:", "netem", "delay", f"{delay_ms}ms",
            "limit", "100000", ns=ns, check=False)
    if r.returncode != 0:
        raise Unsupported(f"delay_ms needs netem, which this kernel lacks ({r.stderr.strip()}); "
                          f"ask netlab.delay_supported() first")
    if tbf:
        _tc("qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", *tbf, ns=ns)


# --------------------------------------------------------------------------- state and sweeping


def _start_time(pid):
    """The start time of pid (clock ticks since boot), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _netns_pids(ns):
    r = _ip("netns", "pids", ns, check=False)
    return [int(p) for p in r.stdout.split() if p.isdigit()] if r.returncode == 0 else []


def _kill_netns_processes(namespaces):
    """SIGKILL every process inside the namespaces, and wait (bounded) until they are gone."""
    deadline = time.monotonic() + 5
    while True:
        pids = [pid for ns in namespaces for pid in _netns_pids(ns) if pid != os.getpid()]
        if not pids or time.monotonic() > deadline:
            return pids
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)


def _teardown(state):
    """Remove what state records; returns the problems (nothing raises)."""
    problems = []
    left = _kill_netns_processes(state.get("netns", []))
    if left:
        problems.append(f"processes {left} survived SIGKILL")
    # Deleting one end of a veth pair deletes both, at once; a namespace's own interfaces go
    # away asynchronously after `ip netns del`, so the pairs are deleted first, explicitly.
    for ns, dev in reversed(state.get("links", [])):
        r = _ip("link", "del", "dev", dev, ns=ns, check=False)
        if r.returncode != 0 and "Cannot find device" not in r.stderr and "No such file" not in r.stderr \
                and "does not exist" not in r.stderr:
            problems.append(f"ip link del {dev} ({ns or 'root'}): {r.stderr.strip()}")
    for ns in reversed(state.get("netns", [])):
        if os.path.exists(os.path.join(NETNS_DIR, ns)):
            r = _ip("netns", "del", ns, check=False)
            if r.returncode != 0:
                problems.append(f"ip netns del {ns}: {r.stderr.strip()}")
    for path in state.get("etc", []):
        shutil.rmtree(path, ignore_errors=True)
        if os.path.exists(path):
            problems.append(f"could not remove {path}")
    if state.get("etc"):
        try:
            os.rmdir(ETC_NETNS)  # only when no other lab (nor anything else) uses it
        except OSError:
            pass
    return problems


@functools.cache
def _lock_fd():
    # Not /run/netns itself: `ip netns add` flocks that directory while it sets it up.
    return os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)


class _Locked:
    """flock on LOCK_FILE across processes, plus a lock across this process's threads;
    reentrant."""
    _thread_lock = threading.RLock()
    _depth = 0

    def __enter__(self):
        self._thread_lock.acquire()
        if _Locked._depth == 0:
            fcntl.flock(_lock_fd(), fcntl.LOCK_EX)
        _Locked._depth += 1

    def __exit__(self, *exc):
        _Locked._depth -= 1
        if _Locked._depth == 0:
            fcntl.flock(_lock_fd(), fcntl.LOCK_UN)
        self._thread_lock.release()


def sweep():
    """Remove what labs of processes that died without closing them left behind; returns the ids
    swept. Lab() calls it; labs of living processes are never touched."""
    swept = []
    with _Locked():
        for path in glob.glob(STATE_PREFIX + "*.json"):
            try:
                with open(path) as f:
                    state = json.load(f)
            except (OSError, ValueError):
                continue
            if state.get("start") is not None and _start_time(state.get("pid")) == state["start"]:
                continue  # its owner is alive
            problems = _teardown(state)
            if problems:
                print(f"netlab: sweeping {path}: {'; '.join(problems)}", file=sys.stderr)
            else:
                os.unlink(path)
                swept.append(state.get("id"))
    return swept


_open_labs = set()
_seq = itertools.count()


@atexit.register
def _close_open_labs():
    for lab in list(_open_labs):
        lab.close()


def _base36(n):
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, d = divmod(n, 36)
        out = digits[d] + out
        if not n:
            return out


def _networks_in_use():
    """IPv4 networks the root namespace routes or has addresses in."""
    nets = []
    for argv in (["-j", "-4", "route", "show", "table", "all"], ["-j", "-4", "addr", "show"]):
        r = _ip(*argv, check=False)
        try:
            entries = json.loads(r.stdout or "[]")
        except ValueError:
            continue
        for e in entries:
            candidates = [e.get("dst")] + [f"{a['local']}/{a['prefixlen']}" for a in e.get("addr_info", [])
                                           if a.get("family") == "inet"]
            for c in candidates:
                if not c or c == "default":
                    continue
                try:
                    nets.append(ipaddress.ip_network(c, strict=False))
                except ValueError:
                    pass
    return nets


# --------------------------------------------------------------------------- Lab and Host


class Lab:
    """A bridge in a namespace of its own, joined by the root namespace at the subnet's .1
    (lab.address) and by each host() at the next free address. A context manager; close() is
    idempotent and also runs at interpreter exit."""

    def __init__(self, prefix="lab", subnet=None):
        if skip_reason():
            raise Unsupported(skip_reason())
        sweep()
        prefix = re.sub(r"[^A-Za-z0-9]", "", prefix)[:5] or "lab"
        self.hosts = {}
        self.closed = False
        self._procs = []
        self._lock = threading.RLock()
        with _Locked():
            for _ in range(1296):
                self.id = f"{prefix}-{_base36(os.getpid())}-{_base36(next(_seq) % 1296)}"
                if not os.path.exists(self._state_path) and not os.path.exists(os.path.join(NETNS_DIR, f"{self.id}-sw")):
                    break
            else:
                raise RuntimeError("netlab: no free lab id in this process")
            self.switch = f"{self.id}-sw"  # the namespace that holds the bridge
            self.bridge = BRIDGE
            self.uplink = f"{self.id}r"  # the root namespace's interface, with lab.address
            self._state = {"id": self.id, "pid": os.getpid(), "start": _start_time(os.getpid()),
                           "netns": [], "links": [], "etc": []}
            self.subnet = self._choose_subnet(subnet)
            self.address = str(self.subnet.network_address + 1)
            self._free = iter(self.subnet.hosts())
            next(self._free)  # .1 is the root namespace's
            _open_labs.add(self)
            try:
                self._build()
            except BaseException:
                self.close()
                raise

    @property
    def _state_path(self):
        return f"{STATE_PREFIX}{self.id}.json"

    def _record(self, kind, item):
        self._state[kind].append(item)
        tmp = self._state_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self._state, f)
        os.replace(tmp, self._state_path)

    def _choose_subnet(self, subnet):
        used = _networks_in_use()
        if subnet is not None:
            net = ipaddress.ip_network(subnet)
            if net.version != 4 or net.prefixlen > 30:
                raise ValueError(f"netlab: subnet {net} must be IPv4 with room for hosts")
            clash = [u for u in used if u.overlaps(net)]
            if clash:
                raise RuntimeError(f"netlab: subnet {net} overlaps {clash[0]}, already used in the root namespace")
            return net
        for net in DEFAULT_POOL.subnets(new_prefix=24):
            if not any(u.overlaps(net) for u in used):
                return net
        raise RuntimeError(f"netlab: no free /24 left in {DEFAULT_POOL}")

    def _build(self):
        self._record("netns", self.switch)
        _ip("netns", "add", self.switch)
        _sysctl_in(self.switch, [("/proc/sys/net/ipv6/conf/default/disable_ipv6", 1),
                                 ("/proc/sys/net/ipv6/conf/all/disable_ipv6", 1),
                                 ("/proc/sys/net/bridge/bridge-nf-call-iptables", 0),
                                 ("/proc/sys/net/bridge/bridge-nf-call-ip6tables", 0),
                                 ("/proc/sys/net/bridge/bridge-nf-call-arptables", 0)])
        _ip("link", "add", "name", self.bridge, "type", "bridge", "stp_state", "0", ns=self.switch)
        _ip("link", "set", "dev", self.bridge, "up", ns=self.switch)
        self._record("links", [None, self.uplink])
        _ip("link", "add", "name", self.uplink, "type", "veth", "peer", "name", UPLINK, "netns", self.switch)
        try:
            with open(f"/proc/sys/net/ipv6/conf/{self.uplink}/disable_ipv6", "w") as f:
                f.write("1")
        except OSError:
            pass
        _ip("link", "set", "dev", UPLINK, "master", self.bridge, "up", ns=self.switch)
        _ip("addr", "add", f"{self.address}/{self.subnet.prefixlen}", "dev", self.uplink)
        _ip("link", "set", "dev", self.uplink, "up")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"Lab({self.id}, {self.subnet}, hosts={list(self.hosts)})"

    def host(self, name, rate_mbit=None, delay_ms=None):
        """A new namespace `<id>-<name>` on the bridge with the next free address, lo and eth0
        up, default route via lab.address, the localhost-only hosts file; rate_mbit and
        delay_ms shape both directions of its link (see the module's docstring)."""
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}", name):
            raise ValueError(f"netlab: host name {name!r}: letters, digits, _ . - (up to 40)")
        if delay_ms is not None and not delay_supported():
            raise Unsupported("delay_ms needs netem, which this kernel lacks (CONFIG_NET_SCH_NETEM)")
        with self._lock:
            if self.closed:
                raise RuntimeError("netlab: the lab is closed")
            if name in self.hosts:
                raise ValueError(f"netlab: host {name!r} exists already")
            try:
                address = str(next(self._free))
            except StopIteration:
                raise RuntimeError(f"netlab: {self.subnet} is full") from None
            h = Host(self, name, address, f"{self.id}-{name}", f"p{int(ipaddress.ip_address(address)) & 0xffff}")
            self.hosts[name] = h
            with _Locked():
                self._record("netns", h.netns)
            _ip("netns", "add", h.netns)
            h.set_hosts({})
            _sysctl_in(h.netns, [("/proc/sys/net/ipv6/conf/default/disable_ipv6", 1)])
            with _Locked():
                self._record("links", [self.switch, h.port])
            _ip("link", "add", "name", h.port, "netns", self.switch, "type", "veth", "peer", "name", "eth0", "netns", h.netns)
            _ip("link", "set", "dev", h.port, "master", self.bridge, "up", ns=self.switch)
            _ip("addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", "eth0", ns=h.netns)
            _ip("link", "set", "dev", "lo", "up", ns=h.netns)
            _ip("link", "set", "dev", "eth0", "up", ns=h.netns)
            _ip("route", "add", "default", "via", self.address, ns=h.netns)
            if rate_mbit is not None or delay_ms is not None:
                _shape(h.netns, "eth0", rate_mbit, delay_ms)
                _shape(self.switch, h.port, rate_mbit, delay_ms)
            h.rate_mbit, h.delay_ms = rate_mbit, delay_ms
            return h

    def set_hosts(self, mapping):
        """host.set_hosts(mapping) on every host of the lab."""
        for h in list(self.hosts.values()):
            h.set_hosts(mapping)

    def _track(self, proc):
        with self._lock:
            self._procs = [p for p in self._procs if p.poll() is None]
            self._procs.append(proc)

    def close(self):
        """Kill the lab's processes, delete its veths, namespaces and /etc/netns dirs. Problems
        are printed, never raised (a test's own failure stays the one reported)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        for p in self._procs:
            if p.poll() is None:
                try:
                    if getattr(p, "_netlab_session", False):
                        os.killpg(p.pid, signal.SIGKILL)
                    else:
                        p.kill()
                except (ProcessLookupError, PermissionError):
                    pass
        with _Locked():
            problems = _teardown(self._state)
            for p in self._procs:
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    problems.append(f"process {p.pid} did not exit")
            if problems:
                print(f"netlab: closing {self.id}: {'; '.join(problems)} (left for sweep())", file=sys.stderr)
            else:
                try:
                    os.unlink(self._state_path)
                except FileNotFoundError:
                    pass
        _open_labs.discard(self)


class Host:
    """One namespace of a Lab: .name, .netns, .address, .port (the bridge's veth towards it, in
    lab.switch), .rate_mbit, .delay_ms."""

    def __init__(self, lab, name, address, netns, port):
        self.lab, self.name, self.address, self.netns, self.port = lab, name, address, netns, port
        self.rate_mbit = self.delay_ms = None
        self.is_cut = False

    def __repr__(self):
        return f"Host({self.name}, {self.address}, netns={self.netns})"

    def argv(self, argv):
        """argv prefixed to run inside this namespace (for code that spawns processes itself)."""
        return ["ip", "netns", "exec", self.netns, *argv]

    def popen(self, argv, **kw):
        """subprocess.Popen(argv) inside the namespace, in a new session (killed, with its
        process group, at lab.close()), stdin /dev/null unless given."""
        kw.setdefault("stdin", subprocess.DEVNULL)
        kw.setdefault("start_new_session", True)
        proc = subprocess.Popen(self.argv(argv), **kw)
        proc._netlab_session = bool(kw["start_new_session"])
        self.lab._track(proc)
        return proc

    def run(self, argv, **kw):
        """subprocess.run(argv) inside the namespace; timeout defaults to RUN_TIMEOUT seconds,
        stdin to /dev/null."""
        kw.setdefault("stdin", subprocess.DEVNULL)
        kw.setdefault("timeout", RUN_TIMEOUT)
        kw.setdefault("start_new_session", True)
        return subprocess.run(self.argv(argv), **kw)

    def pids(self):
        """Every process inside the namespace, however it was started."""
        return _netns_pids(self.netns)

    @property
    def etc_dir(self):
        return os.path.join(ETC_NETNS, self.netns)

    def set_hosts(self, mapping):
        """Write /etc/netns/<ns>/hosts with the localhost lines and mapping {name: address or
        Host}, and a resolv.conf that makes other names fail at once. Seen by processes started
        after this call only (they bind-mount the file when they start)."""
        lines = ["127.0.0.1\tlocalhost " + socket.gethostname(), "::1\tlocalhost ip6-localhost ip6-loopback"]
        for name, address in mapping.items():
            address = address.address if isinstance(address, Host) else address
            ipaddress.ip_address(address)  # ValueError when it is none
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
                raise ValueError(f"netlab: host name {name!r}")
            lines.append(f"{address}\t{name}")
        with _Locked():  # against another lab's close() removing an empty /etc/netns meanwhile
            if self.etc_dir not in self.lab._state["etc"]:
                self.lab._record("etc", self.etc_dir)
            os.makedirs(self.etc_dir, exist_ok=True)
            self._write("hosts", "\n".join(lines) + "\n")
            self._write("resolv.conf", "# netlab: nothing listens here, unknown names fail at once\n"
                                       "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")

    def _write(self, name, text):
        # The new file is made outside etc_dir: `ip netns exec` bind-mounts whatever it finds there.
        tmp = os.path.join(ETC_NETNS, f".{self.netns}.{name}.tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, os.path.join(self.etc_dir, name))

    def cut(self):
        """Partition the host: the bridge's port towards it goes down. Packets either way are
        dropped (peers see silence and time out, not refusals); eth0 keeps its address and
        routes; qdiscs stay."""
        _ip("link", "set", "dev", self.port, "down", ns=self.lab.switch)
        self.is_cut = True

    def restore(self):
        """Undo cut(): the port is up and forwarding again when this returns."""
        _ip("link", "set", "dev", self.port, "up", ns=self.lab.switch)
        self.is_cut = False

    def counters(self):
        """Bytes and packets received and sent by eth0 (Ethernet frames: headers included)."""
        out = _ip("-j", "-s", "link", "show", "dev", "eth0", ns=self.netns).stdout
        stats = json.loads(out)[0]["stats64"]
        return Counters(stats["rx"]["bytes"], stats["tx"]["bytes"], stats["rx"]["packets"], stats["tx"]["packets"])

