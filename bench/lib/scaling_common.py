"""What bench/scaling's sections share: berth on a free loopback port with a temporary root (Server),
a keep-alive HTTP connection to it (Http), latency of GETs over one connection, the load gate each
measurement passes, and the formatting of sizes and counts in its tables.

Imported by bench/scaling, which puts tests/lib (berthtest) and bench/lib on sys.path first."""

import http.client
import json
import os
import shutil
import statistics
import tempfile
import time
import urllib.request

from benchproc import loadavg1, log, proc_status_kib
from benchserver import ServerProcess
from berthtest import free_port  # outside the ephemeral port range

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
HOST = "127.0.0.1"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"


def fmt_mib(kib):
    return f"{kib / 1024:.1f}"


def fmt_bytes(n):
    if n >= GiB:
        return f"{n / GiB:.2f} GiB"
    if n >= MiB:
        return f"{n / MiB:.1f} MiB"
    return f"{n / KiB:.0f} KiB"


def fmt_count(n):
    if n >= 1000000 and n % 1000000 == 0:
        return f"{n // 1000000}M"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return f"{n:,}"


def size_name(n):
    return f"{n // GiB} GiB" if n >= GiB else f"{n // MiB} MiB"


def percentile(sorted_values, p):
    if not sorted_values:
        return 0.0
    k = (len(sorted_values) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


class LoadGate:
    """Waits until the 1-minute load average is below a limit before a measurement
    (at most --load-wait s each, --load-wait-total s over the whole run)."""

    def __init__(self, args):
        self.max_load = args.max_load
        self.wait = args.load_wait
        self.total_left = args.load_wait_total
        self.gave_up = 0

    def before(self, label):
        start = time.time()
        load = loadavg1()
        if load >= self.max_load:
            log(f"  [{label}] waiting for load < {self.max_load} (now {load:.2f})")
        while load >= self.max_load and time.time() - start < min(self.wait, self.total_left):
            time.sleep(5)
            load = loadavg1()
        waited = time.time() - start
        self.total_left = max(0.0, self.total_left - waited)
        if load >= self.max_load:
            self.gave_up += 1
        if load >= self.max_load:
            log(f"  [{label}] load still {load:.2f} after {waited:.0f} s; measuring anyway")
        return load

    @staticmethod
    def span(l0):
        return f"{l0:.2f}→{loadavg1():.2f}"


class Server(ServerProcess):
    def __init__(self, args, workdir, name, config=None, port=None):
        self.args = args
        self.dir = tempfile.mkdtemp(prefix=f"berth-{name}-", dir=workdir)
        self.root = os.path.join(self.dir, "root")
        self.port = port or free_port()
        self.proc = None
        self.config = {"log": {"access": False}}
        if config:
            for k, v in config.items():
                self.config[k] = v

    def start(self):
        cfg = os.path.join(self.dir, "berth.json")
        with open(cfg, "w") as f:
            json.dump(self.config, f)
        cmd = [self.args.berth, "serve", "--config", cfg, "--listen", f"{HOST}:{self.port}", "--root", self.root]
        self.launch(cmd, os.path.join(self.dir, "server.log"), append=True)  # appended to across restarts
        self.wait_ready(f"http://{HOST}:{self.port}/v2/", "berth")
        time.sleep(0.5)
        return self

    @property
    def pid(self):
        return self.proc.pid

    @property
    def url(self):
        return f"http://{HOST}:{self.port}"

    def rss_kib(self):
        return proc_status_kib(self.pid, "VmRSS")

    def metric(self, name):
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
        return None

    def log_tail(self):
        try:
            with open(os.path.join(self.dir, "server.log"), "rb") as f:
                return f.read()[-2000:].decode(errors="replace")
        except OSError:
            return ""

    def stop(self, remove=True):
        """Stops the server; remove=False keeps its directory (root, config, log) for a restart."""
        self.terminate(20)
        self.proc = None
        if remove and not getattr(self.args, "keep", False):
            shutil.rmtree(self.dir, ignore_errors=True)


class Http:
    """One keep-alive connection to the server under test."""

    def __init__(self, port, timeout=60):
        self.port = port
        self.timeout = timeout
        self.conn = http.client.HTTPConnection(HOST, port, timeout=timeout)

    def request(self, method, path, body=None, headers=None):
        for attempt in (0, 1):
            try:
                self.conn.request(method, path, body=body, headers=headers or {})
                r = self.conn.getresponse()
                data = r.read()
                return r, data
            except (http.client.HTTPException, ConnectionError):
                self.conn.close()
                self.conn = http.client.HTTPConnection(HOST, self.port, timeout=self.timeout)
                if attempt:
                    raise

    def close(self):
        self.conn.close()


def measure_latency(h, paths_fn, n, check):
    for _ in range(min(50, n)):  # warm-up
        path = paths_fn()
        r, body = h.request("GET", path, headers={"Accept": MANIFEST_TYPE})
        check(path, r, body)
    lat = []
    for _ in range(n):
        path = paths_fn()
        t0 = time.perf_counter()
        r, body = h.request("GET", path, headers={"Accept": MANIFEST_TYPE})
        lat.append(time.perf_counter() - t0)
        check(path, r, body)
    lat.sort()
    return percentile(lat, 50) * 1000, percentile(lat, 99) * 1000


def check_tags(expect):
    def check(path, r, body):
        if r.status != 200:
            raise RuntimeError(f"GET {path}: {r.status} {body[:200]!r}")
        tags = json.loads(body)["tags"]
        if len(tags) != expect:
            raise RuntimeError(f"GET {path}: {len(tags)} tags, expected {expect}")
    return check


def check_manifest(path, r, body):
    if r.status != 200 or not body.startswith(b"{"):
        raise RuntimeError(f"GET {path}: {r.status} {body[:200]!r}")


def steady_rss(server, seconds=1.0):
    vals = []
    end = time.time() + seconds
    while time.time() < end:
        vals.append(server.rss_kib())
        time.sleep(0.1)
    return statistics.median(vals)
