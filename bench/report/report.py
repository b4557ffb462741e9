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
        if not name.startswith(prefix + "/") or "popularity" not in f:
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


def dnsperf_table(results):
    """dnsperf against each DNS server alone (bench/dns)."""
    dnsperf = defaultdict(dict)
    for name, (v, _, _) in results.items():
        f = fields(name)
        if name.startswith("dns/") and f.get("client") == "dnsperf":
            dnsperf[(f["server"], f["names"])][name.rsplit("/", 1)[1]] = v
    if not dnsperf:
        return []
    out = ["dnsperf (one thread, client CPU) against each server alone:", "",
           "| server | names | queries/s | server-core µs per query |", "|---|---|---|---|"]
    for (s, n), d in sorted(dnsperf.items()):
        out.append(f"| {s} | {n} | {human(d.get('queries_per_s', 0))} | {d.get('server_us_per_query', 0):.2f} |")
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
    memcached = offload_section(results, "memcached", "memcached", "Figure 7b", imgdir, rel)
    if memcached:
        out += ["### memcached UDP GETs alone and with Santa (`bench/memcached`, the paper's Figure 7b)", ""]
        out += memcached
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
