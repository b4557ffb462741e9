#!/usr/bin/env python3
"""bench/report: turns a run's RESULT lines into the generated part of
docs/benchmarks.md, tables and PNG plots (matplotlib, Debian's
python3-matplotlib).

    report.py RESULTS DOC IMGDIR

RESULTS holds `bench/run-all.sh`'s stdout and the header lines of its
stderr (`# ...`). The part of DOC between the markers
<!-- report:begin --> and <!-- report:end --> is replaced; the rest, the
hand-written analysis, stays. Plots go to IMGDIR, linked relative to DOC.
"""
import os
import re
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

BEGIN, END = "<!-- report:begin -->", "<!-- report:end -->"
RESULT = re.compile(r"^RESULT name=(\S+) value=(\S+) unit=(\S+)(.*)$")


def parse(path):
    """The RESULT lines as {name: (value, unit, extra)} and the # lines."""
    results, header = {}, []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            m = RESULT.match(line)
            if m:
                results[m.group(1)] = (float(m.group(2)), m.group(3), m.group(4).strip())
            elif line.startswith("# "):
                header.append(line[2:])
    return results, header


def fields(name):
    """dns/server=bind/names=1k/... -> {'server': 'bind', ...}."""
    return dict(p.split("=", 1) for p in name.split("/") if "=" in p)


def rate_key(r):
    return float("inf") if r == "open" else float(r)


def human(v):
    if v >= 1e6:
        return f"{v / 1e6:.2f} M"
    if v >= 1e3:
        return f"{v / 1e3:.0f} k"
    return f"{v:.0f}"


def offload_section(results, prefix, title, figure, imgdir, rel):
    """Tables and plots of a bench/scenario command (bench/dns: the paper's
    Figure 6; bench/memcached: Figure 7b): peak replies/s by top-N offload,
    and the load curves behind it. A run is keyed by (server, items,
    popularity); items are names or keys."""
    peak = defaultdict(dict)     # key -> {offload: replies/s}
    curve = defaultdict(dict)    # key + (offload,) -> {rate: replies/s}
    cost = defaultdict(dict)     # key + (offload,) -> {rate: us/reply}
    for name, (v, _, _) in results.items():
        f = fields(name)
        # The oracle's sweep only: not the agent's runs (agent_section), nor
        # a second client's.
        if (not name.startswith(prefix + "/") or "popularity" not in f or "offload" not in f
                or "agent" in f or "client" in f):
            continue
        leaf = name.rsplit("/", 1)[1]
        key = (f.get("server", prefix), f.get("names") or f.get("keys"), f["popularity"])
        off = int(f["offload"])
        if leaf == "peak_replies_per_s":
            peak[key][off] = v
        elif leaf == "replies_per_s":
            curve[key + (off,)][f["rate"]] = v
        elif leaf == "server_us_per_reply":
            cost[key + (off,)][f["rate"]] = v
    if not peak:
        return []
    offs = sorted({n for d in peak.values() for n in d})
    out = ["Peak good replies/s over the offered loads (XDP generator), by top-N offload "
           "(0: the server alone, Santa detached), and the ratio to the server alone:", "",
           "| server | items | popularity | " + " | ".join(f"offload {n}" for n in offs) + " |",
           "|---|---|---|" + "---|" * len(offs)]
    for key in sorted(peak):
        d = peak[key]
        cells = []
        for n in offs:
            if n not in d:
                cells.append("")
            elif n == 0 or not d.get(0):
                cells.append(human(d[n]))
            else:
                cells.append(f"{human(d[n])} ({d[n] / d[0]:.1f}x)")
        out.append(f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(cells) + " |")
    out.append("")

    # Peak replies/s against the offload level, one line per server.
    pops = sorted({k[2] for k in peak})
    fig, axes = plt.subplots(1, len(pops), figsize=(5 * len(pops), 3.6), squeeze=False)
    for ax, pop in zip(axes[0], pops):
        for key in sorted(k for k in peak if k[2] == pop):
            xs = sorted(peak[key])
            ax.plot(xs, [peak[key][x] / 1e3 for x in xs], marker="o", label=f"{key[0]} ({key[1]} items)")
        # Offload levels differ between runs (top 100 of 1k, top 100k of
        # 1M): a numeric axis, logarithmic but with room for 0.
        ax.set_xscale("symlog", linthresh=10)
        ax.set_title(f"popularity {pop}")
        ax.set_xlabel("items offloaded to Santa (top N)")
        ax.set_ylabel("peak replies/s (thousands)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(imgdir, f"{prefix}-offload.png"), dpi=100)
    plt.close(fig)
    out += [f"![{title}: top-N offload ({figure})]({rel}/{prefix}-offload.png)", ""]

    # The load curves: good replies/s against the offered load.
    servers = sorted({k[0] for k in curve})
    fig, axes = plt.subplots(len(pops), len(servers), figsize=(4.2 * len(servers), 3.4 * len(pops)),
                             squeeze=False)
    for i, pop in enumerate(pops):
        for j, srv in enumerate(servers):
            ax = axes[i][j]
            for key in sorted(k for k in curve if k[0] == srv and k[2] == pop):
                rates = sorted(curve[key], key=rate_key)
                ax.plot(range(len(rates)), [curve[key][r] / 1e3 for r in rates], marker="o",
                        label=f"offload {key[3]}")
                ax.set_xticks(range(len(rates)), [human(rate_key(r)) if r != "open" else "open"
                                                  for r in rates], fontsize=7)
            ax.set_title(f"{srv}, {pop}", fontsize=9)
            ax.set_xlabel("offered load (requests/s)", fontsize=8)
            ax.set_ylabel("good replies/s (thousands)", fontsize=8)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(imgdir, f"{prefix}-load.png"), dpi=100)
    plt.close(fig)
    out += [f"![{title}: replies against offered load]({rel}/{prefix}-load.png)", "",
            "Server-core µs per good reply at each offered load:", ""]
    rates = sorted({r for d in cost.values() for r in d}, key=rate_key)
    out += ["| server | items | popularity | offload | " + " | ".join(rates) + " |",
            "|---|---|---|---|" + "---|" * len(rates)]
    for key in sorted(cost):
        out.append("| " + " | ".join(str(k) for k in key) + " | " +
                   " | ".join(f"{cost[key][r]:.2f}" if r in cost[key] else "" for r in rates) + " |")
    out.append("")
    return out


def agent_section(results, imgdir, rel):
    """bench/dns -agent: the offload agent against the oracle's top N (the
    issue 22 targets), its first seconds, dnsperf in every configuration,
    Knot's own XDP mode."""
    agent = defaultdict(dict)    # (server, names, popularity) -> {N: {leaf: value}}
    series = defaultdict(dict)   # (server, names, popularity, N) -> {second: replies/s}
    steady = defaultdict(dict)   # (server, names, popularity, "agent=N" or "offload=N") -> {rate: (us, by santa %)}
    dnsperf = defaultdict(dict)  # (server, names, popularity) -> {"agent=N" / "offload=N": (replies/s, us)}
    for name, (v, _, _) in results.items():
        f = fields(name)
        if not name.startswith("dns/") or "popularity" not in f:
            continue
        key = (f["server"], f["names"], f["popularity"])
        leaf = name.rsplit("/", 1)[1]
        config = f"agent={f['agent']}" if "agent" in f else f"offload={f.get('offload')}"
        if f.get("client") == "dnsperf" and leaf == "replies_per_s":
            us = results.get(name.rsplit("/", 1)[0] + "/server_us_per_reply", (0,))[0]
            dnsperf[key][config] = (v, us)
        elif "client" in f:
            continue
        elif "rate" in f and leaf == "server_us_per_reply":
            by = results.get(name.rsplit("/", 1)[0] + "/answered_by_santa", (0,))[0]
            steady[key + (config,)][f["rate"]] = (v, by)
        elif "agent" in f and "second" in f and leaf == "replies_per_s":
            series[key + (int(f["agent"]),)][int(f["second"])] = v
        elif "agent" in f and "rate" not in f and "second" not in f:
            agent[key].setdefault(int(f["agent"]), {})[leaf] = v
    if not agent and not any(k[0] == "knot-xdp" for k in dnsperf):
        return []
    out = ["### DNS with the offload agent (`bench/dns -agent`)", "",
           "The agent chooses the rules from the traffic (santad and `santa-offload dns` on the server core); "
           "the oracle installs the true top N. Open loop unless the run said otherwise.", "",
           "| server | names | popularity | top N | oracle replies/s | agent peak replies/s | agent / oracle peak "
           "| s to 90 % of the oracle |", "|---|---|---|---|---|---|---|---|"]
    for key in sorted(agent):
        for n in sorted(agent[key]):
            d = agent[key][n]
            t90 = next((v for k, v in d.items() if k.startswith("seconds_to_")), float("inf"))
            out.append(f"| {key[0]} | {key[1]} | {key[2]} | {n} | {human(d.get('oracle_replies_per_s', 0))} | "
                       f"{human(d.get('peak_replies_per_s', 0))} | {d.get('peak_vs_oracle', 0):.2f} | "
                       f"{'not reached' if t90 == float('inf') else f'{t90:.1f}'} |")
    out.append("")
    if series:
        agent_plot(series, lambda key, n: agent[key].get(n, {}).get("oracle_replies_per_s"), lambda key: None,
                   lambda key: f"{key[0]}, {key[1]} names, {key[2]}", "seconds since the traffic and the agent started",
                   "top", os.path.join(imgdir, "dns-agent.png"))
        out += [f"![DNS: the agent's first seconds against the oracle]({rel}/dns-agent.png)", ""]
    if dnsperf:
        # The server alone, then by N the oracle's top N and the agent's.
        configs = sorted({c for d in dnsperf.values() for c in d},
                         key=lambda c: (int(c.split("=")[1]), c.startswith("agent")))
        out += ["dnsperf (a socket client, full UDP checksums) with the sweep's popularity: replies/s "
                "(server-core µs per reply):", "",
                "| server | names | popularity | " + " | ".join(configs) + " |",
                "|---|---|---|" + "---|" * len(configs)]
        for key in sorted(dnsperf):
            d = dnsperf[key]
            out.append(f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(
                f"{human(d[c][0])} ({d[c][1]:.2f})" if c in d else "" for c in configs) + " |")
        out.append("")
    out += targets(steady, agent)
    return out


def agent_plot(series, oracle, alone, title, xlabel, bound, path, server="server"):
    """An offload agent's first seconds: for each run (a key and the agent's
    N: series maps it to {second: replies/s}), one panel per key with the
    agent's good replies/s, the oracle's top N (oracle(key, N)) dashed and
    the server alone (alone(key), if known) dotted, named server."""
    keys = sorted({k[:-1] for k in series})
    fig, axes = plt.subplots(1, len(keys), figsize=(5 * len(keys), 3.6), squeeze=False)
    for ax, key in zip(axes[0], keys):
        for skey in sorted(k for k in series if k[:-1] == key):
            secs = sorted(series[skey])
            line, = ax.plot(secs, [series[skey][x] / 1e3 for x in secs], marker=".", label=f"agent, {bound} {skey[-1]}")
            ref = oracle(key, skey[-1])
            if ref:
                ax.axhline(ref / 1e3, linestyle="--", color=line.get_color(), label=f"oracle, top {skey[-1]}")
        base = alone(key)
        if base:
            ax.axhline(base / 1e3, linestyle=":", color="grey", label=f"{server} alone")
        ax.set_title(title(key), fontsize=9)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("good replies/s (thousands)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def memcached_agent_section(results, imgdir, rel):
    """bench/memcached -agent (issue 23): memcached alone, the oracle's top
    N and the agent at max N, GETs only and with SETs, and the agent's
    first seconds against the oracle."""
    peaks = defaultdict(dict)   # (keys, set share, popularity) -> {config: {leaf: value}}
    series = defaultdict(dict)  # (keys, set share, popularity, N) -> {second: replies/s}
    for name, (v, _, _) in results.items():
        f = fields(name)
        if not name.startswith("memcached-agent/") or "popularity" not in f or "client" in f:
            continue
        key = (f["keys"], f.get("set_share", "0"), f["popularity"])
        leaf = name.rsplit("/", 1)[1]
        config = ("agent", int(f["agent"])) if "agent" in f else ("offload", int(f.get("offload", 0)))
        if "second" in f:
            if leaf == "replies_per_s":
                series[key + (config[1],)][int(f["second"])] = v
        elif "rate" in f:
            if f["rate"] == "open":
                peaks[key].setdefault(config, {})["open_" + leaf] = v
        else:
            peaks[key].setdefault(config, {})[leaf] = v
    if not peaks:
        return []
    out = ["### memcached with the offload agent (`bench/memcached -agent`)", "",
           "memcached alone, the oracle's top N (unguarded rules) and `santa-offload memcached` at max N; "
           "open loop; SETs over TCP beside the GETs when the set share is not 0.", "",
           "| keys | set share | popularity | configuration | peak replies/s | server µs/reply | by Santa % "
           "| × alone | agent / oracle | s to 90 % of the oracle |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for key in sorted(peaks):
        for config in sorted(peaks[key], key=lambda c: (c[1], c[0] == "agent")):
            d = peaks[key][config]
            what = "memcached alone" if config == ("offload", 0) else f"{'agent, max' if config[0] == 'agent' else 'oracle, top'} {config[1]}"
            t90 = d.get("seconds_to_90pct_of_oracle")
            out.append(f"| {key[0]} | {key[1]} | {key[2]} | {what} | {human(d.get('peak_replies_per_s', 0))} | "
                       f"{d.get('open_server_us_per_reply', 0):.2f} | {d.get('open_answered_by_santa', 0):.0f} | "
                       + (f"{d['peak_vs_server_alone']:.2f}x" if "peak_vs_server_alone" in d else "—") + " | "
                       + (f"{d['peak_vs_oracle']:.2f}" if "peak_vs_oracle" in d else "") + " | "
                       + ("" if t90 is None else "not reached" if t90 == float("inf") else f"{t90:.1f}") + " |")
    out.append("")
    if series:
        agent_plot(series, lambda key, n: peaks[key].get(("agent", n), {}).get("oracle_replies_per_s"),
                   lambda key: peaks[key].get(("offload", 0), {}).get("peak_replies_per_s"),
                   lambda key: f"{key[0]} keys, {key[2]}, set share {key[1]}", "seconds since the agent started",
                   "max", os.path.join(imgdir, "memcached-agent.png"), server="memcached")
        out += [f"![memcached: the agent's first seconds against the oracle]({rel}/memcached-agent.png)", ""]
    return out


def targets(steady, agent):
    """Issue 22's targets from the runs: Knot + Santa (the agent, at a load
    where it answers >= 95 % of the replies) at most 1/2 of Knot's XDP mode
    per reply; BIND + Santa >= 5.5x BIND alone in server-core capacity
    (10^6 / the lowest µs per reply over the offered loads); the agent at
    90 % of the oracle within 10 s."""
    out = ["Targets (issue 22):", "", "| target | run | measured | met |", "|---|---|---|---|"]
    for key in sorted(agent):
        for n in sorted(agent[key]):
            t90 = next((v for k, v in agent[key][n].items() if k.startswith("seconds_to_")), float("inf"))
            out.append(f"| agent at 90 % of the oracle within 10 s | {key[0]}, {key[1]}, {key[2]}, top {n} | "
                       f"{'never' if t90 == float('inf') else f'{t90:.1f} s'} | {'yes' if t90 <= 10 else 'no'} |")
    for (srv, names, pop, config), rates in sorted(steady.items()):
        if srv != "knot" or not config.startswith("agent="):
            continue
        xdp = steady.get(("knot-xdp", names, pop, "offload=0"), {})
        for rate, (us, by) in sorted(rates.items(), key=lambda r: rate_key(r[0])):
            if by >= 95 and rate in xdp and xdp[rate][0] > 0:
                ratio = us / xdp[rate][0]
                out.append(f"| Knot + Santa <= 1/2 of Knot XDP per reply | {names}, {pop}, {config}, rate {rate}, "
                           f"{by:.0f} % by Santa | {us:.2f} vs {xdp[rate][0]:.2f} µs ({ratio:.2f}) | "
                           f"{'yes' if ratio <= 0.5 else 'no'} |")
    for (srv, names, pop, config), rates in sorted(steady.items()):
        alone = steady.get((srv, names, pop, "offload=0"), {})
        if srv != "bind" or not config.startswith("agent=") or not alone or not rates:
            continue
        best = min(us for us, _ in rates.values() if us > 0)
        by = max(b for _, b in rates.values())
        base = min(us for us, _ in alone.values() if us > 0)
        ratio = base / best
        out.append(f"| BIND + Santa >= 5.5x BIND alone, server-core capacity | {names}, {pop}, {config}, "
                   f"up to {by:.0f} % by Santa | {1e6 / best / 1e3:.0f} k vs {1e6 / base / 1e3:.0f} k replies/s "
                   f"({ratio:.1f}x) | {'yes' if ratio >= 5.5 else 'no'} |")
    return out + [""]


def dnsperf_table(results):
    """dnsperf against each DNS server alone (bench/dns)."""
    dnsperf = defaultdict(dict)
    for name, (v, _, _) in results.items():
        f = fields(name)
        if name.startswith("dns/") and f.get("client") == "dnsperf" and "popularity" not in f:
            dnsperf[(f["server"], f["names"])][name.rsplit("/", 1)[1]] = v
    if not dnsperf:
        return []
    out = ["dnsperf (one thread, client CPU) against each server alone:", "",
           "| server | names | queries/s | server-core µs per query |", "|---|---|---|---|"]
    for (s, n), d in sorted(dnsperf.items()):
        out.append(f"| {s} | {n} | {human(d.get('queries_per_s', 0))} | {d.get('server_us_per_query', 0):.2f} |")
    return out + [""]


def learn_section(results):
    """-learn-cost: what counting every passed request (learning) costs a
    server when nothing is offloaded, against the server alone and Santa
    attached with no rule, open loop (issue 22's target: at most 5 %)."""
    runs = defaultdict(dict)   # (prefix, server, items, popularity) -> {config: (replies/s, us/reply)}
    ratio = {}
    for name, (v, _, extra) in results.items():
        f = fields(name)
        if f.get("rate") != "open" or ("learn" not in f and "learning_vs_alone" not in name):
            continue
        key = (name.split("/", 1)[0], f.get("server", ""), f.get("names") or f.get("keys"), f["popularity"])
        leaf = name.rsplit("/", 1)[1]
        if "learning_vs_alone" in name:
            ratio[key] = v
        elif leaf in ("replies_per_s", "server_us_per_reply"):
            runs[key].setdefault(f["learn"], {})[leaf] = (v, extra)
    if not runs:
        return []
    out = ["### What learning costs a server with nothing offloaded (`-learn-cost`)", "",
           "Open loop, the three configurations interleaved; medians (ranges). Target: learning at least "
           "95 % of the server alone's replies/s.", "",
           "| bench | server | items | popularity | alone replies/s | attached, no rule | learning | "
           "learning / alone | server µs per reply: alone, attached, learning |", "|---|---|---|---|---|---|---|---|---|"]
    for key in sorted(runs):
        d = runs[key]

        def rps(c):
            v, extra = d.get(c, {}).get("replies_per_s", (0, ""))
            rng = re.search(r"range=(\S+)\.\.(\S+)", extra)
            return f"{human(v)} ({human(float(rng.group(1)))}–{human(float(rng.group(2)))})" if rng else human(v)

        us = ", ".join(f"{d.get(c, {}).get('server_us_per_reply', (0, ''))[0]:.2f}" for c in ("alone", "attached", "learning"))
        out.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {rps('alone')} | {rps('attached')} | "
                   f"{rps('learning')} | {ratio.get(key, 0):.3f} | {us} |")
    return out + [""]


def rules_section(results, imgdir, rel):
    """The paper's Figure 4: Santa answering every request from k rules
    (-rule-counts), against the server's own peak in the same run."""
    runs = defaultdict(dict)   # (prefix, server, items) -> {k: (replies/s, us/reply)}
    alone = {}                 # (prefix, server, items) -> best peak of the server alone
    for name, (v, _, _) in results.items():
        f = fields(name)
        prefix = name.split("/", 1)[0]
        if prefix not in ("dns", "memcached"):  # bench/scenario's commands; e2e names rules=100k too
            continue
        key = (prefix, f.get("server", prefix), f.get("names") or f.get("keys"))
        if "rules" in f and name.endswith("/replies_per_s"):
            us = results.get(name.rsplit("/", 1)[0] + "/server_us_per_reply", (0,))[0]
            runs[key][int(f["rules"])] = (v, us)
        elif f.get("offload") == "0" and name.endswith("/peak_replies_per_s"):
            alone[key] = max(alone.get(key, 0), v)
    if not runs:
        return []
    out = ["### Santa answering every request from k rules (paper's Figure 4)", "",
           "Uniform requests over the first k items, all answered by Santa, open loop; "
           "\"server alone\" is the server's best peak in the same run.", "",
           "| scenario | server | items | rules | replies/s | server-core µs per reply | vs server alone |",
           "|---|---|---|---|---|---|---|"]
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for key in sorted(runs):
        ks = sorted(runs[key])
        for k in ks:
            v, us = runs[key][k]
            ratio = f"{v / alone[key]:.1f}x" if alone.get(key) else ""
            out.append(f"| {key[0]} | {key[1]} | {key[2]} | {k} | {human(v)} | {us:.2f} | {ratio} |")
        line, = ax.plot(ks, [runs[key][k][0] / 1e3 for k in ks], marker="o", label=f"Santa, {key[1]} ({key[2]})")
        if alone.get(key):
            ax.axhline(alone[key] / 1e3, linestyle="--", color=line.get_color(), label=f"{key[1]} alone")
    ax.set_xscale("log")
    save_plot(fig, ax, "rules installed (all requests answered by Santa)", "replies/s (thousands)",
              os.path.join(imgdir, "rules.png"))
    return out + ["", f"![replies/s against rules installed]({rel}/rules.png)", ""]


def save_plot(fig, ax, xlabel, ylabel, path):
    """Labels a one-plot figure (y from 0), writes it to path and closes it."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def http_section(results, imgdir, rel):
    """The paper's Figure 8 (bench/http): requests/s by reply size."""
    runs = defaultdict(dict)   # variant -> {size: (req/s, us/request, server busy, client busy)}
    for name, (v, _, _) in results.items():
        if not (name.startswith("http/") and name.endswith("/requests_per_s")):
            continue
        f = fields(name)
        base = name.rsplit("/", 1)[0]
        variant = f["server"] + (", sendfile" if f.get("sendfile") == "on" else "")
        runs[variant][int(f["size"])] = (v,) + tuple(
            results.get(f"{base}/{leaf}", (0,))[0] for leaf in ("server_us_per_request", "server_cpu_busy",
                                                                 "client_cpu_busy"))
    if not runs:
        return []
    out = ["### HTTP: nginx and wrk (`bench/http`, the paper's Figure 8)", "",
           "| server | reply body B | requests/s | server-core µs per request | server busy | client busy |",
           "|---|---|---|---|---|---|"]
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for variant in sorted(runs):
        sizes = sorted(runs[variant])
        for size in sizes:
            v, us, sb, cb = runs[variant][size]
            out.append(f"| {variant} | {size} | {human(v)} | {us:.2f} | {sb:.0f} % | {cb:.0f} % |")
        ax.plot([str(x) for x in sizes], [runs[variant][x][0] / 1e3 for x in sizes], marker="o", label=variant)
    save_plot(fig, ax, "reply body (bytes)", "requests/s (thousands)", os.path.join(imgdir, "http.png"))
    return out + ["", f"![HTTP requests/s by reply size]({rel}/http.png)", ""]


def gen_section(results):
    """The generator's own rate (bench/genrate)."""
    rows = []
    for name, (v, _, extra) in sorted(results.items()):
        if name.startswith("gen/requests=") and name.endswith("/sent_per_s"):
            base = name.rsplit("/", 1)[0]
            f = fields(base)
            arrived = results.get(base + "/arrived_per_s", (0,))[0]
            us = results.get(base + "/client_thread_us_per_request", (0,))[0]
            rng = re.search(r"range=(\S+)\.\.(\S+)", extra)
            spread = f" ({human(float(rng.group(1)))}–{human(float(rng.group(2)))})" if rng else ""
            rows.append(f"| {f['rate']} | {f['requests']} | {f['popularity']} | {human(v)}{spread} | "
                        f"{human(arrived)} | {us:.3f} |")
    if not rows:
        return []
    return ["### The load generator (`bench/genrate`)", "",
            "| offered | requests | popularity | sent/s (range) | arrived at the server veth/s | "
            "client thread µs per request |", "|---|---|---|---|---|---|"] + rows + [
            "", "Paced runs spin on the client CPU between requests, so their µs per request is "
            "not a cost.", ""]


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    results_path, doc_path, imgdir = sys.argv[1:]
    results, header = parse(results_path)
    os.makedirs(imgdir, exist_ok=True)
    rel = os.path.relpath(imgdir, os.path.dirname(doc_path))
    out = [BEGIN, "", "## Generated by bench/report from the last `make bench`", ""]
    out += ["Machine and run (from bench/run-all.sh):", "", "```"] + header + ["```", ""]
    out += gen_section(results)
    dns = offload_section(results, "dns", "DNS", "Figure 6", imgdir, rel)
    if dns:
        out += ["### DNS: BIND, Knot and NSD alone and with Santa (`bench/dns`, the paper's Figure 6)", ""]
        out += dnsperf_table(results) + dns
    out += agent_section(results, imgdir, rel)
    out += learn_section(results)
    memcached = offload_section(results, "memcached", "memcached", "Figure 7b", imgdir, rel)
    if memcached:
        out += ["### memcached UDP GETs alone and with Santa (`bench/memcached`, the paper's Figure 7b)", ""]
        out += memcached
    out += memcached_agent_section(results, imgdir, rel)
    out += rules_section(results, imgdir, rel)
    out += http_section(results, imgdir, rel)
    out.append(END)
    with open(doc_path) as f:
        doc = f.read()
    if BEGIN in doc and END in doc:
        head, rest = doc.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        doc = head + "\n".join(out) + tail
    else:
        doc = doc.rstrip("\n") + "\n\n" + "\n".join(out) + "\n"
    with open(doc_path, "w") as f:
        f.write(doc)


if __name__ == "__main__":
    main()
