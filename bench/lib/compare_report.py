"""bench/compare's report: medians over rounds of each server's runs of a case, the markdown tables
(summary, TLS, per workload, the nginx reference) and the check of the performance goals."""

import json
import statistics

from benchtext import fmt, ratio
from compare_cases import STATIC_SIZE, berth_config, describe, is_reference


def median(values):
    values = [v for v in values if v is not None and v >= 0]
    return statistics.median(values) if values else None


def floor_cpu(limits, key):
    """CPU-s per GiB of a measured rate (MiB/s on one core), median over rounds, or None."""
    rate = median([l.get(key, -1) for l in limits])
    return 1024 / rate if rate else None


def render_floors(cases, summaries, limits):
    """berth against the machine rather than against Distribution: each push's server CPU per GiB
    over the hash's, each TLS case's over the cipher's, small pushes' CPU per push over hashing
    their blob, and pushes per second over what durable creates allow (a push commits two blobs)."""
    sha, aes = floor_cpu(limits, "sha256_mib_s"), floor_cpu(limits, "aes128gcm_mib_s")
    receive = median([l.get("receive_cpu_s_per_gib", -1) for l in limits])
    receive_hashing = median([l.get("receive_hashing_cpu_s_per_gib", -1) for l in limits])
    read = median([l.get("page_cache_read_cpu_s_per_gib", -1) for l in limits])
    send = median([l.get("send_cpu_s_per_gib", -1) for l in limits])
    creates = median([l.get("creates_per_s", -1) for l in limits])
    rows = []
    for case in cases:
        s = summaries.get(case["name"], {}).get("berth")
        if not s or s["cpu_per_gib"] is None:
            continue
        tls = bool(case.get("tls"))
        if case["workload"].startswith("push"):
            floor, what = (sha + aes if tls and sha and aes else sha), "SHA-256" + (" + AES-128-GCM" if tls else "")
        elif case["workload"] == "pull" and tls:
            floor, what = aes, "AES-128-GCM"
        else:
            continue
        if not floor:
            continue
        extra = ""
        if case["workload"].startswith("push") and case["size"] <= 1 << 20 and s["cpu_us_per_op"]:
            hash_ms = floor * case["size"] / (1 << 30) * 1000
            extra = f"{fmt(s['cpu_us_per_op'] / 1000, 2)} CPU-ms per push (hashing its blob: {fmt(hash_ms, 2)} ms)"
            if creates and s["ops_per_s"]:
                extra += f"; {fmt(s['ops_per_s'])} pushes/s: {fmt(2 * s['ops_per_s'] / creates, 2)}× the durable creates of one thread (2 per push)"
        with_receive = "–"
        if case["workload"] == "pull" and read and send:
            with_receive = (f"{fmt(s['cpu_per_gib'] / (floor + read + send), 2)}× (floor + page-cache read + loopback "
                            f"send {fmt(floor + read + send, 3)})")
        if case["workload"].startswith("push") and receive:
            with_receive = f"{fmt(s['cpu_per_gib'] / (floor + receive), 2)}× (floor + receive {fmt(floor + receive, 3)})"
            if receive_hashing:
                with_receive += (f"; {fmt(s['cpu_per_gib'] / (floor + receive_hashing), 2)}× (floor + receive while "
                                 f"hashing {fmt(floor + receive_hashing, 3)})")
        rows.append(f"| {case['name']} | {fmt(s['cpu_per_gib'], 3)} | {what} {fmt(floor, 3)} "
                    f"| {fmt(s['cpu_per_gib'] / floor, 2)}× | {with_receive} | {extra} |")
    if not rows:
        return []
    return ["", "### berth against the machine's floor", "",
            "Server CPU-s per GiB over the least the bytes must cost on this CPU, measured in the same run "
            "(Machine limits): hashing for pushes, the cipher for TLS reads (plus hashing for TLS pushes). "
            "1.00× would be the floor itself. The next column adds moving the bytes, which no server avoids: "
            "taking a push off the socket; for a TLS read without kTLS, reading the blob from the page cache "
            "and sending it.", "",
            "| case | berth CPU-s/GiB | floor CPU-s/GiB | berth ÷ floor | ÷ (floor + moving the bytes) "
            "| small pushes |",
            "|---|---|---|---|---|---|"] + rows


def summarize(case, runs, max_other):
    """Medians over rounds for one server's runs of one case; runs during which other processes
    used more than max_other cores are listed as disturbed."""
    ok = [r for r in runs if "failed" not in r]
    s = {
        "ops_per_s": median([r.get("ops_per_s") for r in ok]),
        "mib_per_s": median([r.get("mib_per_s") for r in ok]),
        "p50_ms": median([r.get("p50_ms") for r in ok]),
        "p99_ms": median([r.get("p99_ms") for r in ok]),
        "cpu_per_gib": median([r.get("server_cpu_s_per_gib") for r in ok]),
        "cpu_us_per_op": median([r.get("server_cpu_us_per_op") for r in ok]),
        "rss_mib": median([r.get("server_max_rss_kib", 0) / 1024 for r in ok]),
        "ops": sum(r.get("ops", 0) for r in ok),
        "errors": sum(r.get("errors", 0) for r in runs),
        "failures": [r["failed"] for r in runs if "failed" in r],
        "samples": sorted({s for r in ok for s in r.get("error_samples", [])})[:3],
        "fallbacks": sum(r.get("post_fallbacks", 0) for r in ok),
        "disturbed": [r["other_cpu_cores"] for r in ok if r.get("other_cpu_cores", 0) > max_other],
        "resumed": sum(r.get("handshakes_resumed", 0) for r in ok),
        "full": sum(r.get("handshakes_full", 0) for r in ok),
        "negotiated": next((r["tls_negotiated"] for r in ok if r.get("tls_negotiated")), ""),
    }
    return s


def cpu_of(case, s):
    """Server CPU per unit of work: µs per op for manifest and tags cases, CPU-s per GiB for blobs."""
    return s["cpu_us_per_op"] if case["workload"].startswith(("manifest", "tags")) else s["cpu_per_gib"]


def render_tls(cases, summaries, servers, limits):
    """The --tls tables: the https cases side by side, and each against its plain http twin."""
    both = len(servers) == 2
    short = {"berth": "berth", "distribution": "dist"}
    by_name = {c["name"]: c for c in cases}
    tls = [c for c in cases if c.get("tls")]
    negotiated = {srv: next((summaries[c["name"]][srv]["negotiated"] for c in tls
                             if summaries[c["name"]][srv]["negotiated"]), "–") for srv in servers}
    aes = median([l.get("aes128gcm_mib_s", -1) for l in limits])
    out = ["", "### TLS", ""]
    out.append("Each server runs twice per round: with TLS, from one self-signed P-256 certificate made for the run "
               "(berth's `tls.cert`/`tls.key`, Distribution's `http.tls.certificate`/`key`), and without. Every case "
               "runs over plain http, then over https (`tls-*`), against both. berth-bench checks the certificate "
               "(`--cacert`) and offers the TLS 1.3 suites in Go's order, as docker and containerd do. Negotiated: "
               + "; ".join(f"{srv} {negotiated[srv]}" for srv in servers) + "."
               + (f" AES-128-GCM on one core (`openssl speed`, 16 KiB pieces): {fmt(aes)} MiB/s, so encrypting "
                  f"(or decrypting) a GiB costs at least {fmt(1024 / aes, 2)} CPU-s." if aes else ""))
    out.append("")
    out.append("CPU: server CPU-s per GiB for blob cases, µs per op for manifest cases. Handshakes: resumed/full "
               "during the timed runs, all rounds.")
    out.append("")
    out.append("| case |" + "".join(f" {short[srv]} ops/s | {short[srv]} MiB/s | {short[srv]} CPU |" for srv in servers)
               + (" ops/s berth ÷ dist | CPU berth ÷ dist |" if both else "")
               + "".join(f" {short[srv]} handshakes |" for srv in servers))
    out.append("|---" * (1 + 4 * len(servers) + (2 if both else 0)) + "|")
    for case in tls:
        s = summaries[case["name"]]
        row = f"| {case['name']} |" + "".join(
            f" {fmt(s[srv]['ops_per_s'])} | {fmt(s[srv]['mib_per_s'])} | {fmt(cpu_of(case, s[srv]), 2)} |" for srv in servers)
        if both:
            row += (f" {fmt(ratio(s['berth']['ops_per_s'], s['distribution']['ops_per_s']), 2)}× |"
                    f" {fmt(ratio(cpu_of(case, s['berth']), cpu_of(case, s['distribution'])), 2)}× |")
        out.append(row + "".join(f" {s[srv]['resumed']}/{s[srv]['full']} |" for srv in servers))
    rows = []
    for case in tls:
        plain = by_name.get(case["plain"])
        if not plain:  # left out by --workloads
            continue
        s, p = summaries[case["name"]], summaries[case["plain"]]
        rows.append(f"| {case['name']} | {case['plain']} |" + "".join(
            f" {fmt(ratio(s[srv]['ops_per_s'], p[srv]['ops_per_s']), 2)}× |"
            f" {fmt(ratio(cpu_of(case, s[srv]), cpu_of(plain, p[srv])), 2)}× |" for srv in servers))
    if rows:
        out.append("")
        out.append("TLS ÷ plain, per server (ops/s: ≥ 1 is as fast as plain; CPU: what TLS multiplies the work by):")
        out.append("")
        out.append("| case | plain case |" + "".join(f" {short[srv]} ops/s | {short[srv]} CPU |" for srv in servers))
        out.append("|---" * (2 + 2 * len(servers)) + "|")
        out.extend(rows)
    return out


def render(args, cases, results, idle, servers, started, elapsed):
    out = []
    both = len(servers) == 2
    tls = any(c.get("tls") for c in cases)
    refs = [c for c in cases if is_reference(c)]
    cases = [c for c in cases if not is_reference(c)]
    out.append(f"Rounds: {args.rounds}; medians over rounds; errors summed over rounds. "
               f"CPU = server utime+stime during the run; peak RSS = max VmRSS sampled every 20 ms during the run. "
               f"A case during which other processes (or the hypervisor, as steal time) used more than {args.max_other} cores is repeated "
               f"(up to {args.retries} times) and flagged if it stays disturbed.")
    out.append("")
    out.append("### Idle RSS (VmRSS 1 s after start, median over rounds)")
    out.append("")
    out.append("| server | idle RSS MiB |")
    out.append("|---|---|")
    for label in [label for label in idle if label.split("+")[0] in servers]:  # berth, berth+tls, …
        out.append(f"| {label} | {fmt(median([k / 1024 for k in idle[label]]))} |")
    limits = getattr(args, "limits", [])
    if limits:
        out.append("")
        out.append("### Machine limits (measured at the start of each round, median)")
        out.append("")
        out.append("OpenSSL SHA-256 on one core (`openssl speed -evp sha256 -bytes 262144`) and AES-128-GCM "
                   "(`-bytes 16384`, a TLS record), as CPU-s per GiB: what hashing a pushed GiB, or encrypting a GiB "
                   "sent over TLS, costs at least. Disk: 512 MiB written in 1 MiB pieces and fdatasync'd in the "
                   "servers' filesystem; loopback receive: a process reading 1 GiB from a loopback TCP connection "
                   "in 1 MiB reads (another sends it), its CPU per GiB, alone and while a third process hashes "
                   "(a push's three busy threads: client, receiver, hasher), and the sender's CPU per GiB; page-cache read: "
                   "the disk probe's file read back in 256 KiB pieces (a TLS read without kTLS reads each byte so); durable creates: 1 MiB files written, fsync'd, renamed into one of 16 "
                   "directories and that directory fsync'd, as a blob is committed. In series = hashing then "
                   "writing on one thread, 1 / (1/hash + 1/disk).")
        out.append("")
        out.append("| SHA-256 MiB/s | SHA-256 CPU-s/GiB | AES-128-GCM MiB/s | AES-128-GCM CPU-s/GiB "
                   "| loopback receive CPU-s/GiB | receive while hashing CPU-s/GiB | loopback send CPU-s/GiB "
                   "| page-cache read CPU-s/GiB | disk write MiB/s "
                   "| durable 1 MiB creates/s | hashing + disk in series MiB/s |")
        out.append("|---|---|---|---|---|---|---|---|---|---|---|")
        sha, aes = floor_cpu(limits, "sha256_mib_s"), floor_cpu(limits, "aes128gcm_mib_s")
        out.append(f"| {fmt(median([l.get('sha256_mib_s', -1) for l in limits]))} | {fmt(sha, 3)} "
                   f"| {fmt(median([l.get('aes128gcm_mib_s', -1) for l in limits]))} | {fmt(aes, 3)} "
                   f"| {fmt(median([l.get('receive_cpu_s_per_gib', -1) for l in limits]), 3)} "
                   f"| {fmt(median([l.get('receive_hashing_cpu_s_per_gib', -1) for l in limits]), 3)} "
                   f"| {fmt(median([l.get('send_cpu_s_per_gib', -1) for l in limits]), 3)} "
                   f"| {fmt(median([l.get('page_cache_read_cpu_s_per_gib', -1) for l in limits]), 3)} "
                   f"| {fmt(median([l.get('disk_mib_s', -1) for l in limits]))} "
                   f"| {fmt(median([l.get('creates_per_s', -1) for l in limits]))} "
                   f"| {fmt(median([l.get('series_mib_s', -1) for l in limits]))} |")
        congestion = sorted({l["tcp_congestion"] for l in limits if "tcp_congestion" in l})
        if congestion:
            same_host = berth_config(args).get("tcp", {}).get("same_host_congestion_control", "reno")
            out.append("")
            out.append(f"The system's TCP congestion control (`net.ipv4.tcp_congestion_control`): {', '.join(congestion)}, "
                       "which Distribution's connections use. Every client here is on the same host, so berth's use "
                       + (f"`tcp.same_host_congestion_control`: {same_host}." if same_host else "the system's too "
                          "(`tcp.same_host_congestion_control` turned off)."))
    if getattr(args, "berth_config", "{}") != "{}":
        out.append("")
        out.append(f"berth's configuration file: `{json.dumps(berth_config(args), separators=(',', ':'))}`")
    out.append("")
    out.append("### Summary" + (" (berth ÷ Distribution)" if both else ""))
    out.append("")
    if both:
        out.append("| case | berth ops/s | dist ops/s | ops/s ratio | berth MiB/s | dist MiB/s | berth CPU-s/GiB | dist CPU-s/GiB | CPU ratio | errors b/d |")
        out.append("|---|---|---|---|---|---|---|---|---|---|")
    else:
        out.append(f"| case | {servers[0]} ops/s | MiB/s | p50 ms | p99 ms | CPU-s/GiB (blobs) or µs/op | errors |")
        out.append("|---|---|---|---|---|---|---|")
    summaries = {}
    for case in cases:
        summaries[case["name"]] = {srv: summarize(case, results[case["name"]][srv], args.max_other) for srv in servers}
        s = summaries[case["name"]]
        if both:
            b, d = s["berth"], s["distribution"]
            cpu_b = b["cpu_per_gib"] if not case["workload"].startswith(("manifest", "tags")) else None
            cpu_d = d["cpu_per_gib"] if not case["workload"].startswith(("manifest", "tags")) else None
            out.append(f"| {case['name']} | {fmt(b['ops_per_s'])} | {fmt(d['ops_per_s'])} | "
                       f"{fmt(ratio(b['ops_per_s'], d['ops_per_s']), 2)}× | {fmt(b['mib_per_s'])} | {fmt(d['mib_per_s'])} | "
                       f"{fmt(cpu_b, 2)} | {fmt(cpu_d, 2)} | {fmt(ratio(cpu_b, cpu_d), 2)} | {b['errors']}/{d['errors']} |")
        else:
            x = s[servers[0]]
            out.append(f"| {case['name']} | {fmt(x['ops_per_s'])} | {fmt(x['mib_per_s'])} | {fmt(x['p50_ms'], 2)} | "
                       f"{fmt(x['p99_ms'], 2)} | "
                       + (f"{fmt(x['cpu_us_per_op'], 1)} µs/op" if case["workload"].startswith(("manifest", "tags"))
                          else f"{fmt(x['cpu_per_gib'], 2)}") + f" | {x['errors']} |")
    if tls:
        out.extend(render_tls(cases, summaries, servers, getattr(args, "limits", [])))
    if "berth" in servers:
        out.extend(render_floors(cases, summaries, getattr(args, "limits", [])))
    out.append("")
    out.append("### Per workload")
    for case in cases:
        s = summaries[case["name"]]
        out.append("")
        out.append(f"#### {case['name']} — {describe(case)}")
        out.append("")
        header = "| metric | " + " | ".join(servers) + (" | berth ÷ dist |" if both else " |")
        out.append(header)
        out.append("|---" * (len(servers) + 1 + (1 if both else 0)) + "|")
        metrics = [("ops/s", "ops_per_s", 1), ("MiB/s", "mib_per_s", 1), ("p50 ms", "p50_ms", 2),
                   ("p99 ms", "p99_ms", 2)]
        if case["workload"].startswith(("manifest", "tags")):
            metrics.append(("server CPU µs/op", "cpu_us_per_op", 1))
        else:
            metrics.append(("server CPU-s/GiB", "cpu_per_gib", 2))
        metrics.append(("peak RSS MiB", "rss_mib", 1))
        for label, key, digits in metrics:
            row = f"| {label} | " + " | ".join(fmt(s[srv][key], digits) for srv in servers)
            if both:
                row += f" | {fmt(ratio(s['berth'][key], s['distribution'][key]), 2)}"
            out.append(row + " |")
        out.append("| ops (all rounds) | " + " | ".join(str(s[srv]["ops"]) for srv in servers) + (" | |" if both else " |"))
        out.append("| errors (all rounds) | " + " | ".join(str(s[srv]["errors"]) for srv in servers) + (" | |" if both else " |"))
        for srv in servers:
            notes = s[srv]["failures"][:2] + s[srv]["samples"]
            if s[srv]["disturbed"]:
                notes.insert(0, "measured while other processes or steal used " + ", ".join(f"{x:.2f}" for x in s[srv]["disturbed"])
                             + " cores (after retries); treat with care")
            if s[srv]["fallbacks"]:
                notes.insert(0, f"{s[srv]['fallbacks']} single-POST requests answered 202 (no single-POST support); "
                                "the client fell back to PUT with the body")
            for n in notes:
                out.append(f"\n- {srv}: {n}")
    if refs:
        out.append("")
        out.append("### Reference: nginx static 1 KiB file, wrk")
        out.append("")
        version = getattr(args, "nginx_version", "") or "nginx"
        out.append(f"{version} on the same machine (master + workers, `worker_processes auto`, access log off, "
                   f"keep-alive), GET of a {STATIC_SIZE}-byte file with the same wrk settings as the `*-wrk` cases. "
                   "CPU and RSS are summed over master and workers (shared pages count once per process). "
                   f"Idle RSS: {fmt(median([k / 1024 for k in idle.get('nginx', [])]))} MiB.")
        out.append("")
        out.append("| case | nginx req/s | MiB/s | p50 ms | p99 ms | server CPU µs/op | peak RSS MiB | errors |")
        out.append("|---|---|---|---|---|---|---|---|")
        for case in refs:
            x = summarize(case, results[case["name"]]["nginx"], args.max_other)
            summaries[case["name"]] = {"nginx": x}
            out.append(f"| {case['name']} | {fmt(x['ops_per_s'])} | {fmt(x['mib_per_s'])} | {fmt(x['p50_ms'], 2)} | "
                       f"{fmt(x['p99_ms'], 2)} | {fmt(x['cpu_us_per_op'], 1)} | {fmt(x['rss_mib'])} | {x['errors']} |")
            for n in x["failures"][:2] + x["samples"]:
                out.append(f"\n- nginx: {n}")
            if x["disturbed"]:
                out.append("\n- nginx: measured while other processes used "
                           + ", ".join(f"{v:.2f}" for v in x["disturbed"]) + " cores (after retries); treat with care")
    if "berth" in servers:
        out.append("")
        out.append("### Goals" + (" (berth ÷ Distribution; berth against nginx)" if both else ""))
        out.append("")
        out.extend(goals(summaries, idle, getattr(args, "limits", []), both, tls))
    out.append("")
    out.append(f"Run started {started}, took {elapsed:.0f} s.")
    return "\n".join(out) + "\n"


def goals(summaries, idle, limits, both=True, tls=False):
    """The goals, met or not; a --tls run (tls) leaves out those of cases it does not run and adds its own."""
    lines = []

    def get(case, srv, key):
        s = summaries.get(case)
        return s[srv][key] if s and srv in s else None

    def check(label, value, target, fmt_value, present=True):
        if tls and not present:
            return
        if not present or value is None:
            lines.append(f"- {label}: not measured")
            return
        ok = value >= target if target >= 0 else value <= -target
        lines.append(f"- {label}: {fmt_value} — {'met' if ok else 'NOT met'}")

    for name in ("push-monolithic-100m-c1", "push-post-100m-c1", "push-chunked-100m-c1",
                 "push-monolithic-100m-c8", "push-chunked-100m-c8") if both else ():
        r = ratio(get(name, "berth", "mib_per_s"), get(name, "distribution", "mib_per_s"))
        check(f"{name} MiB/s ≥ 3×", r, 3, f"{fmt(r, 2)}×", name in summaries)
    series = median([l.get("series_mib_s", -1) for l in limits])
    hash_rate = median([l.get("sha256_mib_s", -1) for l in limits])
    for name in ("push-monolithic-100m-c1", "push-post-100m-c1", "push-chunked-100m-c1",
                 "push-monolithic-100m-c8", "push-chunked-100m-c8"):
        v = get(name, "berth", "mib_per_s")
        r = ratio(v, series)
        check(f"{name} berth ≥ 0.8 of hashing + disk in series", r, 0.8,
              f"{fmt(v)} of {fmt(series)} MiB/s ({fmt(r, 2)}; {fmt(ratio(v, hash_rate), 2)} of SHA-256 alone)",
              name in summaries and series is not None)
    for name, target in (("push-monolithic-1m-c8", 4), ("push-post-1m-c8", 4), ("pull-1m-c8", 4)) if both else ():
        r = ratio(get(name, "berth", "ops_per_s"), get(name, "distribution", "ops_per_s"))
        check(f"{name} ops/s ≥ {target}×", r, target, f"{fmt(r, 2)}×", name in summaries)
    for name in ("pull-100m-c1", "pull-100m-c8", "pull-100m-c32") if both else ():
        r = ratio(get(name, "berth", "mib_per_s"), get(name, "distribution", "mib_per_s"))
        check(f"{name} MiB/s ≥ 1×", r, 1, f"{fmt(r, 2)}×", name in summaries)
        c = ratio(get(name, "berth", "cpu_per_gib"), get(name, "distribution", "cpu_per_gib"))
        check(f"{name} CPU-s/GiB ≤ 0.5×", c, -0.5, f"{fmt(c, 2)}×", name in summaries)
    for name in ("manifest-get-c8", "manifest-get-c32", "manifest-head-c8", "manifest-head-c32",
                 "manifest-get-wrk-c8", "manifest-get-wrk-c32", "tags-list-c8", "tags-list-c32",
                 "tags-list-wrk-c8", "tags-list-wrk-c32") if both else ():
        r = ratio(get(name, "berth", "ops_per_s"), get(name, "distribution", "ops_per_s"))
        check(f"{name} req/s ≥ 20×", r, 20, f"{fmt(r, 2)}×", name in summaries)
    for name in ("manifest-get-wrk-c8", "manifest-get-wrk-c32"):
        v = get(name, "berth", "ops_per_s")
        check(f"{name} berth ≥ 30k req/s", v, 30000, f"{fmt(v)} req/s", name in summaries)
    for c in (8, 32):
        name, ref = f"manifest-get-wrk-c{c}", f"nginx-static-wrk-c{c}"
        if name not in summaries and ref not in summaries:
            continue
        v, n = get(name, "berth", "ops_per_s"), get(ref, "nginx", "ops_per_s")
        r = ratio(v, n)
        check(f"{name} berth ≥ half of nginx static (c{c})", r, 0.5,
              f"{fmt(v)} vs {fmt(n)} req/s ({fmt(r, 2)}×)", name in summaries and ref in summaries)
    rss = median([k / 1024 for k in idle.get("berth", [])])
    check("berth idle RSS ≤ 16 MiB", rss, -16, f"{fmt(rss)} MiB", "berth" in idle)
    if tls:
        name = "tls-pull-100m-c1"
        v = get(name, "berth", "cpu_per_gib")
        check(f"{name} berth server CPU-s/GiB ≤ 0.40", v, -0.40, f"{fmt(v, 2)}", name in summaries)
        for name, key, target, what in (("push-monolithic-100m-c8", "cpu_per_gib", -1.3, "CPU-s/GiB ≤ 1.3× plain"),
                                        ("manifest-get-c8", "ops_per_s", 0.8, "req/s ≥ 0.8× plain (keep-alive)")):
            t, p = get("tls-" + name, "berth", key), get(name, "berth", key)
            r = ratio(t, p)
            check(f"tls-{name} berth {what}", r, target, f"{fmt(t, 2)} vs {fmt(p, 2)} ({fmt(r, 2)}×)",
                  "tls-" + name in summaries and name in summaries)
    return lines
