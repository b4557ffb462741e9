#!/usr/bin/env python3
"""Attribute perf cpu-clock samples taken during BPF_PROG_TEST_RUN to the
parts of santa_udp.

Usage: perfattr.py PERF_SCRIPT_TXT DUMP_DIR [NS_PER_PKT]

PERF_SCRIPT_TXT is `perf script -F comm,tid,ip,sym` of a `perf record -g`
run of dpbench; DUMP_DIR is the directory that the same dpbench run wrote
with -dump (jited_index.txt, lines.txt: JIT address -> source line). Only
samples whose stack holds bpf_test_run count (the timed window). With
NS_PER_PKT (e.g. the cell's median), shares are also shown as ns/packet.
"""
import bisect
import collections
import os
import re
import sys


def load_lines(d):
    addrs, texts = [], []
    for l in open(os.path.join(d, "lines.txt")):
        a, _, rest = l.rstrip("\n").split(" ", 2)
        addrs.append(int(a, 16))
        texts.append(rest)
    order = sorted(range(len(addrs)), key=lambda i: addrs[i])
    return [addrs[i] for i in order], [texts[i] for i in order]


def load_funcs(d):
    funcs = []
    for l in open(os.path.join(d, "jited_index.txt")):
        f = l.split()
        funcs.append((int(f[1].split("=")[1], 16), int(f[2].split("=")[1])))
    return funcs


def samples(path):
    cur = None
    for line in open(path):
        if not line.strip():
            if cur is not None:
                yield cur
            cur = None
            continue
        if line[0] in " \t":
            if cur is None:
                cur = []
            parts = line.split(None, 1)
            ip = int(parts[0], 16) if re.fullmatch(r"[0-9a-f]+", parts[0]) else 0
            sym = parts[1].strip() if len(parts) > 1 else "?"
            cur.append((ip, re.sub(r"\+0x[0-9a-f]+$", "", sym)))
        else:
            cur = []
    if cur:
        yield cur


# Source file -> phase of the program, for the summary.
def phase(src):
    f, _, rest = src.partition(":")
    text = rest.partition(" ")[2]
    if f == "parse.h":
        return "parse"
    if f == "match.h":
        return "match (hash, index, compare)"
    if f in ("csum.h",) or "csum" in text or "santa_reply_sum" in text:
        return "checksums"
    if f == "reply.h":
        return "reply headers / checksums"
    if f == "maps.h":
        return "counters / map lookups"
    return "santa_udp body: " + src


def main():
    path, d = sys.argv[1], sys.argv[2]
    ns = float(sys.argv[3]) if len(sys.argv) > 3 else None
    addrs, texts = load_lines(d)
    funcs = load_funcs(d)

    def in_prog(ip):
        return any(a <= ip < a + n for a, n in funcs)

    def line_of(ip):
        i = bisect.bisect_right(addrs, ip) - 1
        return texts[i] if i >= 0 else "?"

    total = 0
    by_cat = collections.Counter()
    by_phase = collections.Counter()
    by_line = collections.Counter()
    for st in samples(path):
        syms = [s for _, s in st]
        if "bpf_test_run" not in syms:
            continue
        total += 1
        j = next((i for i, (ip, _) in enumerate(st) if in_prog(ip)), None)
        if j is None:
            cat = "harness: " + syms[0]
            by_cat[cat] += 1
            by_phase["test-run harness (timer, dispatch)"] += 1
            continue
        src = line_of(st[j][0])
        if j == 0:
            by_cat["bpf code: " + src] += 1
            by_line[src] += 1
            by_phase[phase(src)] += 1
        else:
            helper = st[j - 1][1]
            by_cat["helper %s <- %s" % (helper, src)] += 1
            by_phase["helper " + helper] += 1

    if total == 0:
        print("no samples inside bpf_test_run")
        return

    def show(title, c, n):
        print("--", title)
        for k, v in c.most_common(n):
            extra = "  %6.1f ns" % (ns * v / total) if ns else ""
            print("%6.1f%%%s  %s" % (100.0 * v / total, extra, k))

    print("samples in the timed window:", total)
    show("by phase / helper", by_phase, 40)
    show("by call site and source line", by_cat, 45)


if __name__ == "__main__":
    main()
