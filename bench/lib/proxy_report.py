"""bench/proxy's report: the markdown tables of the cache-hit, cold-burst and node-agent phases and
the check of the goals (bench/README.md, "Registry proxying")."""

import os

import benchtext
from benchtext import ratio

MiB = 1 << 20


def fmt(v, digits=2):
    """A measurement with `digits` decimals below 100 (benchtext.fmt, no significant digits)."""
    return benchtext.fmt(v, digits, sig_below_one=False)


def render(args, hit, cold, agent, meta, failures):
    """The report; failures: every failed pull or check of the run."""
    out = []
    size = f"{args.size / MiB:g} MiB"
    out.append(f"bench/proxy — {meta['started']}, took {meta['elapsed']:.0f} s; {size} layers, "
               f"{args.pulls} pulls per server, bursts of {args.clients} clients.")
    out.append(f"Machine: {os.cpu_count()} CPUs; load average at start {meta['load_start']}, at end {meta['load_end']}. "
               f"berth: {args.berth}; Distribution: {meta['registry_version']}; upstream: Distribution on loopback.")
    out.append("CPU = server process CPU time (the threads' /proc schedstat run time, or utime+stime from /proc/PID/stat when a thread came and went); other = cores used meanwhile by anything "
               "but the servers and the curl clients. Clients: curl to /dev/null.")
    if hit:
        out.append("")
        out.append(f"### Cache hit: {args.pulls} sequential {size} blob GETs per server (after a warming pull)")
        out.append("")
        out.append("| server | MiB/s | p50 s | server CPU-s/GiB | upstream GETs (warming + first pull) | other cores |")
        out.append("|---|---|---|---|---|---|")
        for r in hit:
            out.append(f"| {r['name']} | {fmt(r['mib_s'], 1)} | {fmt(r['p50_s'], 3)} | {fmt(r['cpu_per_gib'], 3)} | "
                       f"{'–' if r['upstream_gets'] is None else r['upstream_gets']} | {fmt(r['other'])} |")
        by = {r["name"]: r for r in hit}
        b, loc, d = by["berth proxy"], by["berth local"], by["Distribution proxy"]
        out.append("")
        out.append(f"- berth proxy ÷ berth local: MiB/s {fmt(ratio(b['mib_s'], loc['mib_s']))}×, "
                   f"CPU-s/GiB {fmt(ratio(b['cpu_per_gib'], loc['cpu_per_gib']))}×")
        out.append(f"- berth proxy ÷ Distribution proxy: MiB/s {fmt(ratio(b['mib_s'], d['mib_s']))}×, "
                   f"CPU-s/GiB {fmt(ratio(b['cpu_per_gib'], d['cpu_per_gib']))}×")
    if cold:
        out.append("")
        out.append(f"### Cold: fresh proxies, a new {size} blob in the upstream for each pull")
        out.append("")
        out.append(f"| proxy | 1 client s | server CPU-s (1 client) | upstream GETs (1 client) | {args.clients} clients: median s | max s | "
                   "median ÷ 1 client | max ÷ 1 client | first-byte spread ms | upstream GETs (burst) | "
                   "burst MiB/s (all clients) | server CPU-s/GiB served (burst) | same burst warm: median s | "
                   "cold ÷ warm median | other cores (1 client / burst / warm) |")
        out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in cold:
            fails = "" if r["ok"] == r["clients"] else f" ({r['clients'] - r['ok']} failed)"
            out.append(f"| {r['name']} | {fmt(r['single_s'], 3)} | {fmt(r['single_cpu'], 3)} | {r['single_upstream_gets']} | "
                       f"{fmt(r.get('median_s'), 3)}{fails} | {fmt(r.get('max_s'), 3)} | "
                       f"{fmt(ratio(r.get('median_s'), r['single_s']))}× | {fmt(ratio(r.get('max_s'), r['single_s']))}× | "
                       f"{fmt(r.get('ttfb_spread_ms'), 1)} | {r['burst_upstream_gets']} | {fmt(r.get('mib_s_total'), 1)} | "
                       f"{fmt(ratio(r['burst_cpu'], r['burst_gib']), 3)} | {fmt(r.get('warm_median_s'), 3)} | "
                       f"{fmt(ratio(r.get('median_s'), r.get('warm_median_s')))}× | "
                       f"{fmt(r['single_other'])} / {fmt(r['burst_other'])} / {fmt(r.get('warm_other'))} |")
        heads = [f"{r['name']} {r['single_upstream_heads']} / {r['burst_upstream_heads']}" for r in cold
                 if r["single_upstream_heads"] or r["burst_upstream_heads"]]
        out.append("")
        out.append(f"- same burst warm = the {args.clients} clients again on the blob the burst left cached: the "
                   f"machine's limit for {args.clients} × {size} here (clients and server share the CPUs).")
        checks = [f"{r['name']} {r['single_check_gets']} / {r['burst_check_gets']}" for r in cold
                  if r["single_check_gets"] or r["burst_check_gets"]]
        if heads:
            out.append("- upstream HEADs of the blob (1 client / burst): " + "; ".join(heads))
        if checks:
            out.append("- further upstream GETs caused by the checking pull after the cold pulls (1 client / burst; "
                       "not counted above): " + "; ".join(checks))
    if agent:
        a = agent
        out.append("")
        out.append(f"### Node agent in front of a berth proxy (replica), {size} blob")
        out.append("")
        out.append("| pull | agent CPU-s | replica CPU-s | CPU-s/GiB (agent + replica) | ÷ direct | MiB/s or median s | other cores |")
        out.append("|---|---|---|---|---|---|---|")
        wd, wa = a["warm_direct"], a["warm_agent"]
        out.append(f"| direct from the replica, warm ({args.pulls} pulls) | – | {fmt(wd['replica'], 3)} | "
                   f"{fmt(a['direct_warm_per_gib'], 3)} | 1 | {fmt(wd['mib_s'], 1)} MiB/s | {fmt(wd['other'])} |")
        out.append(f"| through the agent, warm ({args.pulls} pulls, agent cached) | {fmt(wa['agent'], 3)} | "
                   f"{fmt(wa['replica'], 3)} | {fmt(a['agent_warm_per_gib'], 3)} | "
                   f"{fmt(ratio(a['agent_warm_per_gib'], a['direct_warm_per_gib']))}× | {fmt(wa['mib_s'], 1)} MiB/s | "
                   f"{fmt(wa['other'])} |")
        reps = a["agent_cold"]["pulls"]
        out.append(f"| through the agent, agent cold, replica warm ({reps} pull{'s' if reps != 1 else ''}) | {fmt(a['agent_cold']['agent'], 3)} | "
                   f"{fmt(a['agent_cold']['replica'], 3)} | {fmt(a['agent_cold']['per_gib'], 3)} | "
                   f"{fmt(ratio(a['agent_cold']['per_gib'], a['direct_warm_per_gib']))}× (of direct warm) | "
                   f"{fmt(a['agent_cold']['s'], 3)} s | {fmt(a['agent_cold']['other'])} |")
        out.append(f"| direct from the replica, replica cold ({reps} pull{'s' if reps != 1 else ''}) | – | {fmt(a['direct_cold']['replica'], 3)} | "
                   f"{fmt(a['direct_cold']['per_gib'], 3)} | 1 | {fmt(a['direct_cold']['s'], 3)} s | "
                   f"{fmt(a['direct_cold']['other'])} |")
        out.append(f"| through the agent, both cold ({reps} pull{'s' if reps != 1 else ''}) | {fmt(a['agent_cold_both']['agent'], 3)} | "
                   f"{fmt(a['agent_cold_both']['replica'], 3)} | {fmt(a['agent_cold_both']['per_gib'], 3)} | "
                   f"{fmt(ratio(a['agent_cold_both']['per_gib'], a['direct_cold']['per_gib']))}× (of direct cold) | "
                   f"{fmt(a['agent_cold_both']['s'], 3)} s | {fmt(a['agent_cold_both']['other'])} |")
    out.append("")
    out.append("### Goals")
    out.append("")
    out.extend(goals(hit, cold, agent))
    if failures:
        out.append("")
        out.append(f"### Failures ({len(failures)})")
        out.append("")
        out.extend(f"- {f}" for f in failures[:20])
    return "\n".join(out) + "\n"


def goals(hit, cold, agent):
    lines = []

    def check(label, value, ok, shown):
        if value is None:
            lines.append(f"- {label}: not measured")
        else:
            lines.append(f"- {label}: {shown} — {'met' if ok(value) else 'NOT met'}")

    if hit:
        by = {r["name"]: r for r in hit}
        b, loc = by["berth proxy"], by["berth local"]
        v = ratio(b["mib_s"], loc["mib_s"])
        check("cache hit: berth proxy MiB/s within 10% of berth local", v, lambda x: x >= 0.9, f"{fmt(v)}×")
        v = ratio(b["cpu_per_gib"], loc["cpu_per_gib"])
        check("cache hit: berth proxy CPU-s/GiB within 10% of berth local", v, lambda x: x <= 1.1, f"{fmt(v)}×")
    for r in cold or []:
        if r["name"] != "berth proxy":
            continue
        n = r["burst_upstream_gets"]
        check(f"cold burst: {r['clients']} clients = 1 upstream GET", n, lambda x: x == 1, f"{n}")
        n = r["single_upstream_gets"]
        check("cold single pull: 1 upstream GET", n, lambda x: x == 1, f"{n}")
        v = ratio(r.get("median_s"), r["single_s"])
        check("cold burst: median client time ≤ 1.5× the lone client's", v, lambda x: x <= 1.5, f"{fmt(v)}×")
        v = r.get("ttfb_spread_ms")
        check("cold burst: first-byte spread ≤ 100 ms", v, lambda x: x <= 100, f"{fmt(v, 1)} ms")
    if agent:
        v = ratio(agent["agent_warm_per_gib"], agent["direct_warm_per_gib"])
        check("agent warm: CPU-s/GiB ≤ 1.3× direct from the replica", v, lambda x: x <= 1.3, f"{fmt(v)}×")
        v = ratio(agent["agent_cold_both"]["per_gib"], agent["direct_cold"]["per_gib"])
        check("agent cold (replica cold too): agent + replica CPU ≤ 1.3× the same cold pull made directly", v,
              lambda x: x <= 1.3, f"{fmt(v)}×")
        v = ratio(agent["agent_cold"]["per_gib"], agent["direct_warm_per_gib"])
        lines.append(f"- agent cold, replica warm (no goal: an agent miss against a replica hit): {fmt(v)}× the "
                     "direct warm pull")
    return lines
