#!/usr/bin/env python3
"""Measurements of berth's peer replication (not part of the test suite; prints results).

  lag       replication lag under a steady push load: pushes through replica A (write_quorum
            "local", so the PUT does not wait for peers), while a watcher polls B's tags/list
            (no read-through) and records when each tag first appears; lag = first seen on B
            minus the 201 on A. Reports p50/p90/p99/max.
  catchup   time for an empty replica to catch up: A (and B, following A) hold --catchup-mib of
            blobs in --catchup-manifests images; C starts empty; time from spawn to /readyz 200
            (plus a check that every blob is on C's disk then).
  rolling   failed pulls during a rolling restart: pullers hit the three replicas round-robin,
            retrying a failed pull once on the next replica, while each replica in turn is
            stopped (SIGTERM, or SIGKILL with --rolling-kill), left down --rolling-downtime
            seconds, restarted, and waited for (/readyz) before the next one; meanwhile a
            pusher adds images round-robin (quorum), which the pullers pull once acknowledged.

Usage: measure_ha.py [lag] [catchup] [rolling] [--lag-pushes 200] [--catchup-mib 200]
       [--catchup-manifests 2000] ...   (no phase named: all three)
"""

import argparse
import http.client
import json
import os
import random
import signal
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402

ACCEPT = bt.OCI_MANIFEST


def make_image(rng, layer_bytes, note):
    config = json.dumps({"architecture": "amd64", "os": "linux", "note": note, "nonce": rng.getrandbits(64),
                         "rootfs": {"type": "layers", "diff_ids": []}}).encode()
    layer = rng.randbytes(layer_bytes)
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": bt.OCI_MANIFEST,
        "config": {"mediaType": bt.OCI_CONFIG, "digest": bt.sha256_digest(config), "size": len(config)},
        "layers": [{"mediaType": bt.OCI_LAYER, "digest": bt.sha256_digest(layer), "size": len(layer)}],
    }).encode()
    return {"blobs": {bt.sha256_digest(config): config, bt.sha256_digest(layer): layer},
            "manifest": manifest, "digest": bt.sha256_digest(manifest)}


class Client:
    """A keep-alive HTTP client for one replica (one per thread)."""

    def __init__(self, replica, timeout=30):
        self.replica, self.timeout, self.conn = replica, timeout, None

    def request(self, method, path, body=None, headers=None):
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.replica.host, self.replica.port, timeout=self.timeout)
            try:
                self.conn.request(method, path, body=body, headers=headers or {})
                r = self.conn.getresponse()
                data = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    self.close()
                return bt.Resp(r.status, r.getheaders(), data)
            except (OSError, http.client.HTTPException):
                self.close()
                if attempt:
                    raise

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def push(self, repo, tag, img):
        for digest, data in img["blobs"].items():
            r = self.request("POST", f"/v2/{repo}/blobs/uploads/?digest={digest}", body=data,
                             headers={"Content-Type": "application/octet-stream"})
            if r.status != 201:  # monolithic POST not taken: POST + PUT
                loc = bt.location_path(r.header("Location"))
                r = self.request("PUT", bt.with_query(loc, digest=digest), body=data,
                                 headers={"Content-Type": "application/octet-stream"})
                if r.status != 201:
                    raise AssertionError(f"blob {digest}: {r}")
        r = self.request("PUT", f"/v2/{repo}/manifests/{tag}", body=img["manifest"],
                         headers={"Content-Type": bt.OCI_MANIFEST})
        if r.status != 201:
            raise AssertionError(f"manifest {repo}:{tag}: {r}")
        return r


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(p / 100 * len(s) + 0.5)) - 1))]


def ms(x):
    return f"{x * 1000:.1f} ms"


# --------------------------------------------------------------------------- lag


def measure_lag(args, rng):
    c = bt.Cluster(3, write_quorum="local")
    try:
        c.start()
        a, b = c[0], c[1]
        repo = "lag/app"
        acked, seen = {}, {}
        done = threading.Event()

        def watcher():
            client = Client(b)
            while not done.is_set() or len(seen) < len(acked):
                r = client.request("GET", f"/v2/{repo}/tags/list?n=100000")
                now = time.monotonic()
                if r.status == 200:
                    for tag in r.json().get("tags") or []:
                        seen.setdefault(tag, now)
                if done.is_set() and time.monotonic() > done_at[0] + 30:
                    break
                time.sleep(args.watch_interval)

        done_at = [0.0]
        w = threading.Thread(target=watcher, daemon=True)
        w.start()
        client = Client(a)
        interval = 1.0 / args.lag_rate
        next_at = time.monotonic()
        imgs = [make_image(rng, args.lag_layer, f"lag{i}") for i in range(args.lag_pushes)]
        for i, img in enumerate(imgs):
            now = time.monotonic()
            if now < next_at:
                time.sleep(next_at - now)
            next_at += interval
            client.push(repo, f"t{i}", img)
            acked[f"t{i}"] = time.monotonic()
        done_at[0] = time.monotonic()
        done.set()
        w.join(60)
        lags = [seen[t] - acked[t] for t in acked if t in seen]
        missing = [t for t in acked if t not in seen]
        print(f"[lag] {len(acked)} pushes on A at {args.lag_rate}/s (layer {args.lag_layer} B, write_quorum local, "
              f"poll_interval_ms {c.poll_interval_ms}), B's tags/list polled every {args.watch_interval * 1000:.0f} ms")
        print(f"[lag]   p50 {ms(pct(lags, 50))}  p90 {ms(pct(lags, 90))}  p99 {ms(pct(lags, 99))}  "
              f"max {ms(max(lags))}  mean {ms(statistics.mean(lags))}  never seen: {len(missing)}")
        return {"p50": pct(lags, 50), "p99": pct(lags, 99), "max": max(lags), "missing": len(missing)}
    finally:
        c.cleanup()


# --------------------------------------------------------------------------- catch-up


def measure_catchup(args, rng):
    c = bt.Cluster(3, write_quorum="local")
    try:
        a, b, empty = c[0], c[1], c[2]
        c.assign_ports()
        for r in (a, b):
            r.start()
        for r in (a, b):
            r.wait_readyz()
        total = args.catchup_mib << 20
        per_layer = max(1, total // args.catchup_manifests)
        t0 = time.monotonic()
        lock = threading.Lock()
        counter = iter(range(args.catchup_manifests))
        digests = set()
        errors = []

        def pusher(seed):
            prng = random.Random(seed)
            client = Client(a)
            while True:
                with lock:
                    i = next(counter, None)
                if i is None:
                    return
                img = make_image(prng, per_layer, f"cu{i}")
                try:
                    client.push(f"catchup/r{i % 16}", f"t{i}", img)
                except Exception as err:  # noqa: BLE001
                    errors.append(repr(err))
                    return
                with lock:
                    digests.update(img["blobs"])

        threads = [threading.Thread(target=pusher, args=(rng.getrandbits(64),)) for _ in range(args.push_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise AssertionError(errors[:3])
        populate = time.monotonic() - t0
        c.wait_caught_up(timeout=600, replicas=[a, b])
        print(f"[catchup] populated A with {args.catchup_manifests} manifests, {len(digests)} blobs, "
              f"{args.catchup_mib} MiB of layers ({per_layer} B each) in {populate:.1f}s; B caught up "
              f"{time.monotonic() - t0 - populate:.1f}s later")
        t0 = time.monotonic()
        empty.spawn()
        seen503 = 0
        while True:
            s = empty.readyz()
            if s == 200:
                break
            seen503 += s == 503
            if not empty.alive():
                raise AssertionError(empty.stderr()[-2000:])
            if time.monotonic() - t0 > 1800:
                raise AssertionError("catch-up took over 30 minutes")
            time.sleep(0.05)
        took = time.monotonic() - t0
        files = bt.blob_files(empty.root)
        missing = sum(1 for d in digests if d.split(":")[1] not in files)
        fetched = empty.metrics().get("berth_replication_fetched_bytes_total", 0)
        print(f"[catchup] empty replica C: /readyz 200 after {took:.1f}s ({seen503} polls answered 503); "
              f"blobs missing on its disk then: {missing}; fetched {fetched / (1 << 20):.0f} MiB "
              f"({fetched / (1 << 20) / took:.0f} MiB/s, {args.catchup_manifests / took:.0f} manifests/s)")
        return {"seconds": took, "missing": missing}
    finally:
        c.cleanup()


# --------------------------------------------------------------------------- rolling restart


def measure_rolling(args, rng):
    c = bt.Cluster(3, write_quorum="quorum")
    try:
        c.start()
        imgs = {f"t{i}": make_image(rng, 16 << 10, f"roll{i}") for i in range(args.rolling_images)}
        client = Client(c[0])
        for tag, img in imgs.items():
            client.push("roll/app", tag, img)
        c.wait_caught_up()
        stop = threading.Event()
        pushed_by, timeline, odd = {}, [], []  # odd: failures that are not connection errors
        stats = {"pulls": 0, "first_failed": 0, "failed": 0, "errors": {}, "pushed": 0, "push_failed": 0}
        lock = threading.Lock()

        def pusher():
            # New images keep arriving (round-robin, quorum), so each restarted replica has
            # something to catch up with; pullers pull them once acknowledged.
            prng = random.Random(7)
            n = 0
            while not stop.is_set():
                replica = c[n % 3]
                img = make_image(prng, 16 << 10, f"roll-new{n}")
                try:
                    ok = Client(replica, timeout=15).push("roll/app", f"new{n}", img).status == 201
                except (OSError, http.client.HTTPException, AssertionError):
                    ok = False
                with lock:
                    if ok:
                        imgs[f"new{n}"] = img
                        pushed_by[f"new{n}"] = (replica.replica_id, time.monotonic())
                        stats["pushed"] += 1
                    else:
                        stats["push_failed"] += 1
                n += 1
                time.sleep(0.05)

        def pull_once(replica, tag):
            img = imgs[tag]
            try:
                r = replica.get(f"/v2/roll/app/manifests/{tag}", headers={"Accept": ACCEPT}, timeout=10)
                if r.status != 200 or r.body != img["manifest"]:
                    return f"manifest {r.status}"
                for digest, data in img["blobs"].items():
                    r = replica.get(f"/v2/roll/app/blobs/{digest}", timeout=10)
                    if r.status != 200 or r.body != data:
                        return f"blob {r.status}"
                return None
            except (OSError, http.client.HTTPException) as err:
                return type(err).__name__

        def puller(index):
            prng = random.Random(index)
            n = index
            while not stop.is_set():
                with lock:
                    tag = prng.choice(list(imgs))
                err = pull_once(c[n % 3], tag)
                n += 1
                first = err
                if err and not err[0].isupper():  # an HTTP answer, not a connection error
                    with lock:
                        odd.append((time.monotonic(), c[(n - 1) % 3].replica_id, tag, err, pushed_by.get(tag)))
                if err:
                    err = pull_once(c[n % 3], tag)  # retry once, on the next replica
                    if err and not err[0].isupper():
                        with lock:
                            odd.append((time.monotonic(), c[n % 3].replica_id, tag, "retry: " + err,
                                        pushed_by.get(tag)))
                    n += 1
                with lock:
                    stats["pulls"] += 1
                    if first:
                        stats["first_failed"] += 1
                        stats["errors"][first] = stats["errors"].get(first, 0) + 1
                    if err:
                        stats["failed"] += 1
                        stats["errors"]["after retry: " + err] = stats["errors"].get("after retry: " + err, 0) + 1

        threads = [threading.Thread(target=puller, args=(i,), daemon=True) for i in range(args.pullers)]
        threads.append(threading.Thread(target=pusher, daemon=True))
        for t in threads:
            t.start()

        def pulls_and_pushes():
            with lock:
                return stats["pulls"], stats["pushed"] + stats["push_failed"]

        def load_ran(pulls, pushes):
            """Since (pulls, pushes): as many pulls as one round of every puller over the three
            replicas, and another push attempt."""
            now_pulls, now_pushes = pulls_and_pushes()
            return now_pulls >= pulls + 3 * args.pullers and now_pushes >= pushes + 1

        bt.poll(lambda: load_ran(0, 0), 60, 0.05, "the pullers and the pusher under way")
        t0 = time.monotonic()
        sig = signal.SIGKILL if args.rolling_kill else signal.SIGTERM
        timings = []
        for r in c:
            s0 = time.monotonic()
            timeline.append((time.monotonic(), f"{r.replica_id} stopping"))
            r.stop(sig, timeout=30) if sig == signal.SIGTERM else (r.send_signal(sig), r.wait(10))
            timeline.append((time.monotonic(), f"{r.replica_id} exited"))
            time.sleep(args.rolling_downtime)  # the replica stays down a while (a slow pod start)
            r.restart()
            timeline.append((time.monotonic(), f"{r.replica_id} answering"))
            r.wait_readyz(120)
            timeline.append((time.monotonic(), f"{r.replica_id} ready"))
            timings.append(time.monotonic() - s0)
        after_last = pulls_and_pushes()
        bt.poll(lambda: load_ran(*after_last), 60, 0.05, "the load to go on past the last restart")
        stop.set()
        for t in threads:
            t.join(30)
        print(f"[rolling] {args.pullers} pullers round-robin over 3 replicas (retry once on the next), "
              f"{'SIGKILL' if args.rolling_kill else 'SIGTERM'} + restart + /readyz of each replica in turn "
              f"({', '.join(f'{x:.2f}s' for x in timings)}; {time.monotonic() - t0:.1f}s in all)")
        print(f"[rolling]   pulls {stats['pulls']}, first attempt failed {stats['first_failed']}, "
              f"failed after the retry {stats['failed']}; {stats['errors']}")
        if odd:
            print("[rolling]   failures that were HTTP answers (t, replica, tag, error, (pushed via, t)) "
                  "and the restart timeline (t relative to the first stop):")
            for t, rid, tag, err, by in odd:
                by = by and (by[0], f"{by[1] - t0:.3f}")
                print(f"[rolling]     {t - t0:7.3f} {rid} {tag} {err} pushed {by}")
            for t, what in timeline:
                print(f"[rolling]     {t - t0:7.3f} {what}")
        print(f"[rolling]   meanwhile {stats['pushed']} pushes acknowledged, {stats['push_failed']} failed "
              f"(round-robin, write_quorum quorum, no retry)")
        return stats
    finally:
        c.cleanup()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("phases", nargs="*", choices=["lag", "catchup", "rolling", []], default=[])
    p.add_argument("--lag-pushes", type=int, default=200)
    p.add_argument("--lag-rate", type=float, default=20.0, help="pushes per second")
    p.add_argument("--lag-layer", type=int, default=8192, help="layer bytes per push")
    p.add_argument("--watch-interval", type=float, default=0.002, help="seconds between polls of B")
    p.add_argument("--catchup-mib", type=int, default=200)
    p.add_argument("--catchup-manifests", type=int, default=2000)
    p.add_argument("--push-threads", type=int, default=4)
    p.add_argument("--rolling-images", type=int, default=20)
    p.add_argument("--pullers", type=int, default=4)
    p.add_argument("--rolling-downtime", type=float, default=2.0, help="seconds each replica stays down")
    p.add_argument("--rolling-kill", action="store_true", help="SIGKILL instead of SIGTERM")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    phases = args.phases or ["lag", "catchup", "rolling"]
    rng = random.Random(args.seed)
    bt.wait_for_binary()
    print(f"berth {bt.BIN}, {os.cpu_count()} CPUs")
    for phase in phases:
        {"lag": measure_lag, "catchup": measure_catchup, "rolling": measure_rolling}[phase](args, rng)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
