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


def dns_section(results, imgdir, rel):
    """Tables and plots of bench/dns: the paper's Figure 6 (top-N offload)
    and the load curves behind it."""
    peak = defaultdict(dict)     # (server, names, pop) -> {offload: replies/s}
    curve = defaultdict(dict)    # (server, names, pop, offload) -> {rate: replies/s}
    cost = defaultdict(dict)     # (server, names, pop, offload) -> {rate: us/reply}
    dnsperf = {}
    for name, (v, _, _) in results.items():
        if not name.startswith("dns/server="):
            continue
        f = fields(name)
        leaf = name.rsplit("/", 1)[1]
        if f.get("client") == "dnsperf":
            dnsperf.setdefault(f["server"], {})[leaf] = v
            continue
        if "popularity" not in f:
            continue
        key = (f["server"], f["names"], f["popularity"])
        off = int(f["offload"])
        if leaf == "peak_replies_per_s":
            peak[key][off] = v
        elif leaf == "replies_per_s":
            curve[key + (off,)][f["rate"]] = v
        elif leaf == "server_us_per_reply":
            cost[key + (off,)][f["rate"]] = v
    if not peak:
        return []
    out = ["### DNS: BIND, Knot and NSD alone and with Santa (`bench/dns`)", ""]
    if dnsperf:
        out += ["dnsperf (one thread, client CPU) against each server alone:", "",
                "| server | queries/s | server-core µs per query |", "|---|---|---|"]
        for s, d in sorted(dnsperf.items()):
            out.append(f"| {s} | {human(d.get('queries_per_s', 0))} | {d.get('server_us_per_query', 0):.2f} |")
        out.append("")
    out += ["Peak good replies/s over the offered loads (XDP generator), by top-N offload "
            "(0: the server alone, Santa detached), and the ratio to the server alone:", "",
            "| server | names | popularity | " + " | ".join(
                f"offload {n}" for n in sorted({n for d in peak.values() for n in d})) + " |",
            "|---|---|---|" + "---|" * len({n for d in peak.values() for n in d})]
    offs = sorted({n for d in peak.values() for n in d})
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

    # Figure 6: peak replies/s against the offload level, one line per server.
    pops = sorted({k[2] for k in peak})
    fig, axes = plt.subplots(1, len(pops), figsize=(5 * len(pops), 3.6), squeeze=False)
    for ax, pop in zip(axes[0], pops):
        for key in sorted(k for k in peak if k[2] == pop):
            xs = sorted(peak[key])
            ax.plot([str(x) for x in xs], [peak[key][x] / 1e3 for x in xs], marker="o",
                    label=f"{key[0]} ({key[1]} names)")
        ax.set_title(f"popularity {pop}")
        ax.set_xlabel("names offloaded to Santa (top N)")
        ax.set_ylabel("peak replies/s (thousands)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(imgdir, "dns-offload.png"), dpi=100)
    plt.close(fig)
    out += [f"![DNS top-N offload]({rel}/dns-offload.png)", ""]

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
    fig.savefig(os.path.join(imgdir, "dns-load.png"), dpi=100)
    plt.close(fig)
    out += [f"![DNS replies against offered load]({rel}/dns-load.png)", "",
            "Server-core µs per good reply at each offered load:", ""]
    rates = sorted({r for d in cost.values() for r in d}, key=rate_key)
    out += ["| server | names | popularity | offload | " + " | ".join(rates) + " |",
            "|---|---|---|---|" + "---|" * len(rates)]
    for key in sorted(cost):
        out.append("| " + " | ".join(str(k) for k in key) + " | " +
                   " | ".join(f"{cost[key][r]:.2f}" if r in cost[key] else "" for r in rates) + " |")
    out.append("")
    return out


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
    out += dns_section(results, imgdir, rel)
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
