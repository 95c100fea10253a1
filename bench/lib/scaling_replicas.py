"""bench/scaling's replicas section: two peered replicas, A filled with millions of manifests by
berth-bench's fill-manifests workload, then B bootstrapping from it empty; latency at 10k and at the
full size, RSS, the change log with and without compaction, a retention round (bench/scaling's
docstring and bench/README.md, "Scaling")."""

import argparse
import datetime
import json
import os
import random
import shutil
import statistics
import subprocess
import threading
import time
import urllib.error
import urllib.request

from benchproc import disk_bytes, loadavg1, log, proc_cpu_seconds, proc_status_kib
from benchtext import last_json, table
from berthtest import free_port  # outside the ephemeral port range
from scaling_common import (HOST, MANIFEST_TYPE, Http, Server, check_manifest, check_tags, fmt_bytes, fmt_count,
                            fmt_mib, measure_latency, steady_rss)


class FillLayout:
    """Where berth-bench's fill-manifests workload puts manifest i (see its --help): repository
    <prefix>/r<i // per_repo>, tag t<i>, with per_repo = ceil(total / repos)."""

    def __init__(self, total, repos, prefix="fill"):
        self.total, self.repos, self.prefix = total, repos, prefix
        self.per_repo = max(1, -(-total // repos))

    def repo_of_index(self, r):
        return f"{self.prefix}/r{r:05d}"

    def repo(self, i):
        return self.repo_of_index(i // self.per_repo)

    @staticmethod
    def tag(i):
        return f"t{i:07d}"

    def repos_filled(self, n):
        """Repositories holding at least one of manifests 0..n-1."""
        return -(-n // self.per_repo)

    def tags_in(self, r, n):
        """Tags of repository r once manifests 0..n-1 are in."""
        return max(0, min(self.per_repo, n - r * self.per_repo))


def run_fill(args, server, layout, first, ops, seconds=0):
    """berth-bench --workload fill-manifests for manifests first..first+ops-1 (stopping after
    `seconds` if given); returns its JSON. Its progress lines go to our stderr."""
    cmd = [args.bench, "--url", server.url, "--workload", "fill-manifests", "--repos", str(layout.repos),
           "--total", str(layout.total), "--repo-prefix", layout.prefix, "--first", str(first), "--ops", str(ops),
           "--concurrency", str(args.fill_concurrency), "--server-pid", str(server.pid), "--timeout", "60",
           "--progress", "30", "--json", "--quiet"]
    if seconds:
        cmd += ["--seconds", f"{seconds:.0f}"]
    # Even at 100 manifests/s it finishes (or its --seconds stop it).
    limit = 300 + (seconds if seconds else ops / 100)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, timeout=limit)
    r = last_json(p.stdout)
    if r is None:
        raise RuntimeError(f"berth-bench fill-manifests printed no JSON (exit {p.returncode})")
    if "setup_error" in r or r.get("errors"):
        raise RuntimeError(f"berth-bench fill-manifests: {r}\nserver log: {server.log_tail()}")
    return r


def fill_latency(server, gate, label, layout, filled, samples, rounds=3):
    """p50/p99 (ms) over a store holding manifests 0..filled-1, the same requests at every size:
    manifest GET by a random tag, tags/list?n=100 of a random full repository, and the catalog's
    first page and a page from its middle (?n=100&last=). Each column is measured in `rounds`
    rounds of `samples` requests, the columns taking turns, and the medians over the rounds are
    returned: a burst of other work on a shared machine then moves one round, not the result."""
    rng = random.Random(2)
    n_repos = layout.repos_filled(filled)
    full = max(1, filled // layout.per_repo)  # repositories holding all their tags (or the one that exists)
    mid = n_repos // 2
    expect = {}

    def manifest_path():
        i = rng.randrange(filled)
        return f"/v2/{layout.repo(i)}/manifests/{layout.tag(i)}"

    def tags_path():
        r = rng.randrange(full)
        expect["tags"] = min(100, layout.tags_in(r, filled))
        return f"/v2/{layout.repo_of_index(r)}/tags/list?n=100"

    def check_tag_page(path, r, body):
        check_tags(expect["tags"])(path, r, body)

    def check_catalog(count):
        def check(path, r, body):
            if r.status != 200:
                raise RuntimeError(f"GET {path}: {r.status} {body[:200]!r}")
            got = len(json.loads(body)["repositories"])
            if got != count:
                raise RuntimeError(f"GET {path}: {got} repositories, expected {count}")
        return check

    columns = {
        "manifest": (manifest_path, check_manifest),
        "tags": (tags_path, check_tag_page),
        "catalog_first": (lambda: "/v2/_catalog?n=100", check_catalog(min(100, n_repos))),
        "catalog_middle": (lambda: f"/v2/_catalog?n=100&last={layout.repo_of_index(mid)}",
                           check_catalog(min(100, n_repos - mid - 1))),
    }
    h = Http(server.port)
    try:
        l0 = gate.before(label)
        log(f"  {label}: measuring latency (load {l0:.2f})")
        got = {k: [] for k in columns}
        for _ in range(rounds):
            for k, (path_fn, check) in columns.items():
                got[k].append(measure_latency(h, path_fn, samples, check))
        out = {k: (statistics.median(p50 for p50, _ in v), statistics.median(p99 for _, p99 in v))
               for k, v in got.items()}
        out["p99_rounds"] = {k: [p99 for _, p99 in v] for k, v in got.items()}
        log("    p99 ms per round: " + "; ".join(f"{k} " + ", ".join(f"{x:.2f}" for x in v)
                                               for k, v in out["p99_rounds"].items()))
        out["load"] = gate.span(l0)
        return out
    finally:
        h.close()


class RssSampler:
    """The largest VmRSS of each of some processes, sampled every `interval` s on a thread."""

    def __init__(self, pids, interval=0.05):
        self.peak = {pid: proc_status_kib(pid, "VmRSS") for pid in pids}
        self.interval = interval
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def add(self, pid):
        self.peak.setdefault(pid, proc_status_kib(pid, "VmRSS"))

    def run(self):
        while not self.stopped.wait(self.interval):
            for pid in list(self.peak):
                self.peak[pid] = max(self.peak[pid], proc_status_kib(pid, "VmRSS"))

    def stop(self):
        self.stopped.set()
        self.thread.join()
        for pid in self.peak:
            self.peak[pid] = max(self.peak[pid], proc_status_kib(pid, "VmRSS"))
        return self.peak


def peer_status(server, secret):
    """GET /_berth/v1/status with the peers' secret, as JSON (None when it cannot be had)."""
    try:
        req = urllib.request.Request(f"{server.url}/_berth/v1/status", headers={"Berth-Peer-Secret": secret})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())
    except Exception:  # noqa: BLE001 - a status we cannot read is reported as such
        return None


def readyz(server):
    try:
        with urllib.request.urlopen(f"{server.url}/readyz", timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except Exception:  # noqa: BLE001 - not answering
        return None


def changelog(server):
    """(entries, bytes, oldest entry age s) from /metrics."""
    return (server.metric("berth_changelog_entries") or 0, server.metric("berth_changelog_bytes") or 0,
            server.metric("berth_changelog_oldest_entry_age_seconds") or 0)


def log_problems(server, limit=8):
    """Lines of the server's log at level warn or error (JSON lines), the first few of them."""
    out = []
    try:
        with open(os.path.join(server.dir, "server.log"), errors="replace") as f:
            for line in f:
                if '"level":"error"' in line or '"level":"warn' in line:
                    out.append(line.strip()[:400])
    except OSError:
        pass
    return out[:limit], len(out)


def log_events(server, messages):
    """{message: unix time of its first line} for the given log messages of the server (JSON lines)."""
    found = {}
    try:
        with open(os.path.join(server.dir, "server.log"), errors="replace") as f:
            for line in f:
                if not line.startswith("{"):
                    continue
                try:
                    doc = json.loads(line)
                except ValueError:
                    continue
                if doc.get("msg") in messages and doc["msg"] not in found:
                    when = datetime.datetime.strptime(doc["time"], "%Y-%m-%dT%H:%M:%S.%fZ")
                    found[doc["msg"]] = when.replace(tzinfo=datetime.timezone.utc).timestamp()
    except OSError:
        pass
    return found


def retention_support(args, workdir):
    """Whether this binary takes a `retention` section (retention.policies); (bool, why)."""
    probe = Server(args, workdir, "retention-probe", {"retention": {"policies": []}})
    try:
        probe.start()
        return True, "the binary accepts a retention section"
    except RuntimeError as e:
        lines = [l for l in str(e).splitlines() if l.strip()]
        # "berth exited with 2: berth: /tmp/.../berth.json: unknown key retention" → "unknown key retention"
        return False, (lines[-1] if lines else str(e)).rsplit(": ", 1)[-1][:200]
    finally:
        probe.stop()


def verify_served(a, b, layout, filled, n, rng):
    """n random manifests by tag and n // 10 tags lists: B answers what A answers, byte for byte.
    Returns a list of mismatches (empty when all agree)."""
    ha, hb = Http(a.port), Http(b.port)
    bad = []
    try:
        for _ in range(n):
            i = rng.randrange(filled)
            path = f"/v2/{layout.repo(i)}/manifests/{layout.tag(i)}"
            ra, body_a = ha.request("GET", path, headers={"Accept": MANIFEST_TYPE})
            rb, body_b = hb.request("GET", path, headers={"Accept": MANIFEST_TYPE})
            if rb.status != 200 or body_b != body_a or rb.getheader("Docker-Content-Digest") != ra.getheader(
                    "Docker-Content-Digest"):
                bad.append(f"{path}: A {ra.status}, B {rb.status} {body_b[:120]!r}")
            elif json.loads(body_b)["annotations"]["org.example.fill"] != str(i):
                bad.append(f"{path}: annotation {json.loads(body_b)['annotations']}")
        for _ in range(max(1, n // 10)):
            r = rng.randrange(layout.repos_filled(filled))
            path = f"/v2/{layout.repo_of_index(r)}/tags/list?n=1000"
            ra, body_a = ha.request("GET", path)
            rb, body_b = hb.request("GET", path)
            if rb.status != 200 or json.loads(body_b) != json.loads(body_a):
                bad.append(f"{path}: A {ra.status}, B {rb.status} {body_b[:120]!r}")
    finally:
        ha.close()
        hb.close()
    return bad


def snapshot_binary(src, dst, timeout=300):
    """A copy of src at dst that runs (`version`): a copy taken during a relink is taken again."""
    deadline = time.time() + timeout
    while True:
        try:
            shutil.copy2(src, dst)
            if subprocess.run([dst, "version"], capture_output=True, timeout=30).returncode == 0:
                return dst
        except (OSError, subprocess.SubprocessError):
            pass
        if time.time() > deadline:
            raise RuntimeError(f"could not take a working copy of {src}")
        time.sleep(5)


def section_replicas(args, workdir, gate, notes):
    """One replica filled with N manifests and N tags over R repositories, then a second, empty one
    bootstrapping from it. See the module docstring."""
    n_target = 20000 if args.quick else args.manifests
    n_repos = 200 if args.quick else args.repos
    samples = 300 if args.quick else args.samples
    idle_s = 20 if args.quick else args.idle_seconds
    budget = 300 if args.quick else args.fill_budget
    small = min(10000, n_target)
    layout = FillLayout(n_target, n_repos)
    cache = args.cache_bytes

    free = shutil.disk_usage(workdir).free
    if free < n_target * 6000:  # meta/ of both replicas (0.5-2 KB per manifest each), logs, room for compaction
        raise RuntimeError(f"{fmt_bytes(free)} free under {workdir}: not enough for {n_target} manifests")

    # Both replicas run one copy of the binary, taken now: the build may change during the run
    # and A is restarted at the end.
    binary = snapshot_binary(args.berth, os.path.join(workdir, "berth"))
    rargs = argparse.Namespace(**{**vars(args), "berth": binary})
    secret_file = os.path.join(workdir, "peer-secret")
    secret = os.urandom(16).hex()
    with open(secret_file, "w") as f:
        f.write(secret + "\n")
    port_a = free_port()
    port_b = free_port()
    while port_b == port_a:
        port_b = free_port()

    def replica_config(name, peer_port, **replication):
        return {"replica_id": name, "cache": {"memory_bytes": cache},
                "replication": {"peers": [f"{HOST}:{peer_port}"], "secret_file": secret_file,
                                "write_quorum": "local", **replication}}

    supported, why = retention_support(rargs, workdir)
    log(f"  retention config: {'supported' if supported else 'not supported'} ({why})")

    # A: its peer B is configured from the start but not started yet (writes are local). The log's
    # entry cap is raised so that nothing is compacted during the population (the default cap,
    # 1,000,000 entries, would cut it at about 500k manifests).
    a_config = replica_config("replica-a", port_b, log_max_entries=10 ** 12)
    a = Server(rargs, workdir, "replica-a", a_config, port=port_a).start()
    b = None
    rows = []  # (what, value, goal)
    lat_rows = []
    try:
        # Population, in two steps: the first `small` manifests, measured, then the rest.
        l0 = loadavg1()
        t0 = time.time()
        log(f"  filling A: {small} manifests over {layout.repos_filled(small)} repositories")
        r1 = run_fill(rargs, a, layout, 0, small)
        pop_s = r1["seconds"]
        filled = r1["next"]
        lat = fill_latency(a, gate, f"{fmt_count(filled)} manifests", layout, filled, samples)
        lat_rows.append((filled, lat))
        r2 = None
        if n_target > small:
            left = max(30.0, budget - (time.time() - t0))
            log(f"  filling A: {small} → {n_target} manifests (at most {left:.0f} s)")
            r2 = run_fill(rargs, a, layout, small, n_target - small, seconds=left)
            pop_s += r2["seconds"]
            filled = r2["next"]
        pop_load = f"{l0:.2f}→{loadavg1():.2f}"
        n = filled
        if n < n_target:
            notes.append(f"replicas: the population stopped at its {budget:.0f} s budget with {n:,} of "
                         f"{n_target:,} manifests; every row below is for {n:,} (repositories "
                         f"{layout.repos_filled(n):,} of {n_repos:,}, {layout.per_repo} tags each)")
        cpu_us = sum(r["server_cpu_s"] for r in (r1, r2) if r) * 1e6 / n
        fill_peak = max(r["server_max_rss_kib"] for r in (r1, r2) if r)
        blob_s = sum(r["blob_seconds"] for r in (r1, r2) if r)
        log(f"    {n} manifests in {pop_s:.1f} s ({n / pop_s:,.0f}/s), load {pop_load}")
        rss_burst = a.rss_kib()
        time.sleep(2)  # let the last memtable writes settle before sizing meta/
        meta_after = disk_bytes(os.path.join(a.root, "meta"))[0]
        log_entries, log_bytes, log_age = changelog(a)
        rows.append(["population (A, write_quorum local)",
                     f"{n:,} manifests + {n:,} tags in {layout.repos_filled(n):,} repositories: {pop_s:.0f} s, "
                     f"**{n / pop_s:,.0f} manifests/s** ({args.fill_concurrency} connections; blobs pushed once, "
                     f"mounted into each repository: {blob_s:.1f} s of it); server {cpu_us:.0f} CPU-µs per "
                     f"manifest, peak RSS {fmt_mib(fill_peak)} MiB; load {pop_load}", ""])
        rows.append(["change log after population (no compaction)",
                     f"{log_entries:,.0f} entries, {fmt_bytes(log_bytes)} ({log_bytes / max(1, log_entries):.0f} "
                     f"B/entry); oldest entry {log_age:.0f} s", ""])

        # Idle: what is left of the population burst after malloc_trim (every 60 s with the
        # default window) and the cache's byte budget.
        log(f"  A idle for {idle_s:.0f} s")
        time.sleep(idle_s)
        rss_idle = steady_rss(a)
        meta_idle = disk_bytes(os.path.join(a.root, "meta"))[0]
        rows.append(["meta/ on disk (A)",
                     f"{fmt_bytes(meta_after)} after population = **{meta_after / n:,.0f} B per manifest**; "
                     f"{fmt_bytes(meta_idle)} ({meta_idle / n:,.0f} B) after {idle_s:.0f} s idle", ""])

        if n > small:
            lat = fill_latency(a, gate, f"{fmt_count(n)} manifests", layout, n, samples)
            lat_rows.append((n, lat))
        # The latency runs fill the record cache (up to cache.memory_bytes): the bootstrap's
        # baseline is A as it is right before B starts.
        time.sleep(2)
        rss_idle_a = steady_rss(a)
        rows.append(["A RSS after the burst",
                     f"{fmt_mib(rss_burst)} MiB right after the population, **{fmt_mib(rss_idle)} MiB after "
                     f"{idle_s:.0f} s idle**, {fmt_mib(rss_idle_a)} MiB after the latency runs that followed; "
                     f"cache.memory_bytes {fmt_bytes(cache)}", ""])

        # Bootstrap: an empty B with A as its peer. B's idle RSS is that of an empty berth with the
        # same configuration, no peers (B itself starts bootstrapping as soon as it runs).
        empty = Server(rargs, workdir, "empty", {"cache": {"memory_bytes": cache}}).start()
        try:
            rss_idle_b = steady_rss(empty)
        finally:
            empty.stop()
        l0 = gate.before("bootstrap")
        log(f"  bootstrap: B from A ({n:,} manifests; load {l0:.2f})")
        cpu_a0 = proc_cpu_seconds(a.pid)
        sampler = RssSampler([a.pid])
        b = Server(rargs, workdir, "replica-b", replica_config("replica-b", port_a), port=port_b)
        t0 = time.time()
        b.start()
        sampler.add(b.pid)
        deadline = t0 + max(120.0, n / 1000.0)  # even at 1,000 manifests/s it finishes
        last_report = 0.0
        ready_s = None
        progress = []
        while time.time() < deadline and b.alive():
            if readyz(b) == 200:
                ready_s = time.time() - t0
                break
            if time.time() - last_report >= 10:
                last_report = time.time()
                st = peer_status(b, secret)
                peers = (st or {}).get("peers") or [{}]
                boot = peers[0].get("bootstrap")
                progress.append((round(time.time() - t0), boot))
                log(f"    {time.time() - t0:.0f} s: B {'bootstrap ' + json.dumps(boot) if boot else 'following the log'}"
                    f", cursor {peers[0].get('cursor')}/{peers[0].get('head')}, RSS A {fmt_mib(a.rss_kib())} "
                    f"B {fmt_mib(b.rss_kib())} MiB")
            time.sleep(0.1)
        if ready_s is None:
            sampler.stop()
            st = peer_status(b, secret)
            raise RuntimeError(f"B not ready after {time.time() - t0:.0f} s (alive: {b.alive()}); status "
                               f"{json.dumps(st)[:600]}; progress {progress[-5:]}\nB log: {b.log_tail()}")
        bad = verify_served(a, b, layout, n, 200, random.Random(3))
        served_s = time.time() - t0
        peaks = dict(sampler.peak)
        boot_load = gate.span(l0)
        cpu_a = proc_cpu_seconds(a.pid) - cpu_a0
        cpu_b = proc_cpu_seconds(b.pid)
        hwm_b = proc_status_kib(b.pid, "VmHWM")
        st = peer_status(b, secret) or {}
        peer = (st.get("peers") or [{}])[0]

        # The other direction: A's cursor on B starts at 0 too, and B's log holds every record B
        # applied (A's own events, relayed). How long until A's cursor reaches B's head, and how
        # many events A applied on the way.
        b_head = st.get("log_head", 0)
        t1 = time.time()
        a_caught_s = None
        a_peer = {}
        while time.time() - t1 < max(60.0, n / 2000.0):
            a_peer = ((peer_status(a, secret) or {}).get("peers") or [{}])[0]
            if a_peer.get("cursor", 0) >= b_head:
                a_caught_s = time.time() - t0
                break
            time.sleep(0.5)
        relay_peaks = sampler.stop()
        b_entries, b_log_bytes, _ = changelog(b)
        rate = n / ready_s
        # Where the time went, from B's log: start of the bootstrap proper, its end.
        events = log_events(b, {"bootstrapping from peer", "bootstrap finished"})
        phases = ", ".join(f"{what} at {events[msg] - t0:.1f} s" for msg, what in
                           (("bootstrapping from peer", "bootstrap started"), ("bootstrap finished", "finished"))
                           if msg in events)
        log(f"    B ready after {ready_s:.1f} s ({rate:,.0f} manifests/s); sample checked at {served_s:.1f} s, "
            f"{len(bad)} mismatches")
        rows.append(["bootstrap: empty B from A, until B's /readyz is 200",
                     f"{ready_s:.1f} s = **{rate:,.0f} manifests/s** (B's log: {phases or 'no bootstrap lines'}); "
                     f"200 manifests by tag and 20 tags lists "
                     f"read from both: {'identical' if not bad else f'{len(bad)} differ'} "
                     f"(checked {served_s:.1f} s after B's start); B caught_up {peer.get('caught_up')}, "
                     f"cursor {peer.get('cursor')}/{peer.get('head')}; CPU A {cpu_a:.1f} s, B {cpu_b:.1f} s; "
                     f"load {boot_load}",
                     f"≥ 10,000 manifests/s: {'met' if rate >= 10000 else 'not met'}"])
        for name, pid, idle in (("A", a.pid, rss_idle_a), ("B", b.pid, rss_idle_b)):
            peak = peaks[pid]
            extra = f"; VmHWM {fmt_mib(hwm_b)}" if name == "B" else ""
            rows.append([f"bootstrap peak RSS, {name}",
                         f"idle {fmt_mib(idle)} MiB ({'right before B started' if name == 'A' else 'empty berth'}), "
                         f"peak {fmt_mib(peak)} MiB (+{(peak - idle) / 1024:.1f}){extra}",
                         f"≤ idle + 128 MiB: {'met' if peak - idle <= 128 * 1024 else 'not met'}"])
        rows.append(["A catching up with B (whose log holds every record B applied)",
                     f"B's change log after the bootstrap: {b_entries:,.0f} entries, {fmt_bytes(b_log_bytes)}; A "
                     f"applied {a_peer.get('applied', 0):,} events from it, its cursor reached B's head {b_head:,} "
                     + (f"{a_caught_s:.1f} s after B's start" if a_caught_s is not None else
                        f"not within {time.time() - t1:.0f} s (cursor {a_peer.get('cursor')})")
                     + f"; peak RSS until then A {fmt_mib(relay_peaks[a.pid])}, B {fmt_mib(relay_peaks[b.pid])} MiB",
                     ""])
        if bad:
            notes.append("replicas: B served differently from A after it was ready: " + "; ".join(bad[:5]))

        # Compaction: A restarted with a 5 s window now that B has read everything. Compaction
        # then runs every second (a quarter of the window, clamped to 1..60 s). Where the binary
        # has retention policies, A also gets one that judges every tag and deletes none (each
        # repository keeps its newest half; the rest were pushed minutes ago, well within the
        # unpulled rule's 30 days, which asks B for its pulls), its first round 10 s after the start.
        b_meta = disk_bytes(os.path.join(b.root, "meta"))[0]
        a.stop(remove=False)
        a.config["replication"]["log_retention_seconds"] = 5
        policy = {"name": "bench", "repositories": [f"{layout.prefix}/**"],
                  "keep_last": max(1, layout.per_repo // 2), "expire_unpulled_days": 30}
        if supported:
            a.config["retention"] = {"interval_seconds": 10, "policies": [policy]}
        t0 = time.time()
        a.start()
        restart_s = time.time() - t0
        log(f"  A restarted with log_retention_seconds 5 in {restart_s:.1f} s; waiting for compaction and readiness")
        # A restarted replica whose peers all hold what it holds should be ready at once; one that
        # re-bootstraps instead shows it here (and in the warnings of its log, see the notes).
        compacted_s = a_ready_s = None
        while time.time() - t0 < max(120.0, n / 5000.0) and (compacted_s is None or a_ready_s is None):
            if compacted_s is None and changelog(a)[0] < max(1000, log_entries / 100):
                compacted_s = time.time() - t0
            if a_ready_s is None and readyz(a) == 200:
                a_ready_s = time.time() - t0
            time.sleep(0.5)
        time.sleep(5)  # RocksDB's estimate may trail the DeleteRange
        c_entries, c_bytes, c_age = changelog(a)
        rows.append(["change log with compaction (A restarted with log_retention_seconds 5, B caught up)",
                     f"{c_entries:,.0f} entries, {fmt_bytes(c_bytes)}; oldest entry {c_age:.0f} s "
                     + (f"(compacted {compacted_s:.0f} s after the restart)" if compacted_s is not None
                        else "(not compacted within 120 s)"), ""])
        rows.append(["A restart", f"{restart_s:.1f} s from start to GET /v2/ 200 with {n:,} manifests; /readyz 200 "
                     + (f"after {a_ready_s:.1f} s" if a_ready_s is not None else f"not within {time.time() - t0:.0f} s"),
                     ""])
        if supported:
            # A replica judges nothing until it is ready: wait for a round that judged something.
            while time.time() - t0 < max(180.0, n / 2000.0) and not a.metric("berth_retention_last_run_repositories"):
                time.sleep(1)
            runs = a.metric("berth_retention_runs_total") or 0
            r_s = a.metric("berth_retention_last_run_seconds") or 0
            r_tags = a.metric("berth_retention_last_run_tags_evaluated") or 0
            r_repos = a.metric("berth_retention_last_run_repositories") or 0
            r_skipped = a.metric("berth_retention_unpulled_skipped_total") or 0
            deleted = a.metric('berth_retention_deleted_total{kind="tag"}') or 0
            what = (f"{r_tags:,.0f} tags of {r_repos:,.0f} repositories (those A owns; B has no policy) in "
                    f"**{r_s:.2f} s** = {r_tags / r_s if r_s else 0:,.0f} tags/s; {deleted:.0f} tags deleted, "
                    f"unpulled rule skipped in {r_skipped:.0f} repositories" if runs and r_repos else
                    f"{runs:.0f} rounds within {time.time() - t0:.0f} s of A's restart, none judged a repository "
                    "(a replica judges nothing before it is ready)")
            rows.append([f"retention round (A: `{json.dumps(policy)}`)", what, ""])

        rows.append(["B after the bootstrap",
                     f"meta/ {fmt_bytes(b_meta)} ({b_meta / n:,.0f} B per manifest); RSS "
                     f"{fmt_mib(b.rss_kib())} MiB, {time.time() - t0:.0f} s after A's restart", ""])
        if not supported:
            rows.append(["retention evaluation", f"retention: see docs (this binary rejects a `retention` "
                         f"section: {why})", ""])
        for server, name in ((a, "A"), (b, "B")):
            problems, count = log_problems(server)
            if count:
                notes.append(f"replicas: {count} warn/error lines in {name}'s log, e.g. " +
                             " / ".join(f"`{p}`" for p in problems[:3]))
    finally:
        if b:
            b.stop()
        a.stop()

    # Latency: the same requests at both sizes.
    lat_table_rows = []
    base = lat_rows[0][1]
    keys = ("manifest", "tags", "catalog_first", "catalog_middle")
    for filled, lat in lat_rows:
        row = [f"{fmt_count(filled)} manifests, {layout.repos_filled(filled):,} repos"]
        for k in keys:
            row += [f"{lat[k][0]:.2f}", f"{lat[k][1]:.2f}"]
        if filled == lat_rows[0][0]:
            row.append("")
        else:
            ratios = [lat[k][1] / base[k][1] for k in keys]
            row.append(", ".join(f"{x:.2f}×" for x in ratios) +
                       (" (all ≤ 1.5×)" if max(ratios) <= 1.5 else " (goal ≤ 1.5×: not met)"))
        row.append(lat["load"])
        lat_table_rows.append(row)
    lat_headers = ["store (A)", "manifest GET by tag p50 ms", "p99 ms", "tags/list?n=100 p50 ms", "p99 ms",
                   "_catalog?n=100 first page p50 ms", "p99 ms", "_catalog middle page (last=) p50 ms", "p99 ms",
                   "p99 ÷ first row (manifest, tags, catalog, middle)", "load 1m (start→end)"]
    notes.append(f"replicas: A and B are two berth processes on loopback, both with the other as their peer, "
                 f"a shared secret and write_quorum local, cache.memory_bytes {fmt_bytes(cache)}; manifests "
                 f"come from `berth-bench --workload fill-manifests` (distinct manifests sharing one config blob "
                 f"and one 1 KiB layer, {layout.per_repo} per repository, each PUT by its own tag); latency: "
                 f"3 rounds of {samples} sequential requests per column (the columns taking turns; medians of the "
                 f"rounds' p50 and p99) on one keep-alive connection after 50 warm-up requests per round (Python "
                 f"http.client), random tags and full repositories; A's idle time after the "
                 f"population was {idle_s:.0f} s; peak RSS = largest VmRSS sampled every 50 ms from B's start "
                 "until the sample check ended.")
    md = (table(lat_headers, lat_table_rows) + "\n\n" + table(["what", "measured", "goal"], rows))
    return md, rows
