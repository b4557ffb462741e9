// Command dpbench measures Santa's XDP program per packet through
// BPF_PROG_TEST_RUN (one run per call, kernel-reported duration) for rule
// sets of 1 to 1M DNS rules, replies of 64/512/1400 bytes and the hot,
// uniform, miss and no-socket request mixes, interleaved over rounds. It
// prints RESULT lines on stdout and a table on stderr. Needs root.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	dp "github.com/santa-offload/santa/bench/dataplane"
)

func main() {
	rulesFlag := flag.String("rules", "1,10000,100000,1000000", "rule counts (comma-separated)")
	sizesFlag := flag.String("sizes", "64,512,1400", "reply payload sizes in bytes")
	rounds := flag.Int("rounds", 7, "interleaved rounds")
	k := flag.Int("k", 5000, "packets per cell and round")
	batch := flag.Int("batch", 50000, "rules per AddRules call")
	cpu := flag.Int("cpu", 1, "CPU to run the measuring thread on (-1: no pinning)")
	names := flag.String("names", "short", "name scheme: short (www.example-<n>.com) or long (64-byte shared prefix)")
	stats := flag.Bool("stats", true, "also measure run_time_ns/run_cnt with BPF stats on (one pass)")
	seed := flag.Uint64("seed", 1, "random seed")
	dump := flag.String("dump", "", "write bpftool's xlated and jited dumps of santa_udp to this directory")
	mixes := flag.String("mixes", "empty,"+strings.Join(dp.Mixes, ","), "cells to measure: empty (the empty-program baseline) and mixes")
	flag.Parse()

	counts, err := dp.ParseInts(*rulesFlag)
	check(err)
	sizes, err := dp.ParseInts(*sizesFlag)
	check(err)
	scheme, ok := dp.Schemes[*names]
	if !ok {
		check(fmt.Errorf("unknown name scheme %q", *names))
	}
	tag := ""
	if *names != "short" {
		tag = "/names=" + *names
	}

	check(dp.PinThread(*cpu))
	rng := rand.New(rand.NewPCG(*seed, 42))
	empty, err := dp.EmptyXDP()
	check(err)
	defer empty.Close()

	type row struct {
		name             string
		med, lo, hi, p90 float64
		stats            float64
	}
	var table []row
	medians := map[string]float64{}

	for _, size := range sizes {
		var sets []*dp.Set
		for _, n := range counts {
			s, err := dp.OpenSet(dp.SetOptions{Rules: n, Size: size, Batch: *batch, Names: scheme,
				Progress: func(done int, took time.Duration) {
					if n >= 100000 {
						fmt.Fprintf(os.Stderr, "  installed %d/%d rules (%d-byte replies), last batch %v\n", done, n, size, took.Round(time.Millisecond))
					}
				}})
			check(err)
			check(s.Check())
			sets = append(sets, s)
			id := fmt.Sprintf("rules=%s/reply=%d%s", dp.Human(n), size, tag)
			result("dataplane/install/"+id, s.Install.Seconds(), "s")
			if s.Install > 0 {
				result("dataplane/install_rate/"+id, float64(n)/s.Install.Seconds(), "rules/s")
			}
			mem, err := s.KernelMemory()
			check(err)
			var total uint64
			for _, v := range mem {
				total += v
			}
			result("dataplane/kmem_maps/"+id, mb(total), "MiB")
			result("dataplane/kmem_rules_map/"+id, mb(mem["rules_small"]+mem["rules_medium"]+mem["rules_large"]+mem["rules_huge"]), "MiB")
			result("dataplane/kmem_rule_index_map/"+id, mb(mem["rule_index"]), "MiB")
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			result("dataplane/go_heap_after_install/"+id, mb(ms.HeapAlloc), "MiB")
		}

		if *dump != "" {
			check(dumpProg(sets[0], *dump))
			*dump = ""
		}
		cells := []*dp.Cell{{Name: fmt.Sprintf("empty_prog/reply=%d", size), Prog: empty, Want: dp.XDPPass,
			Frames: func(rng *rand.Rand, k int) [][]byte {
				f := sets[0].Query(0, 1)
				out := make([][]byte, k)
				for i := range out {
					out[i] = f
				}
				return out
			}}}
		for _, s := range sets {
			cells = append(cells, s.Cells(rng)...)
		}
		cells = slices.DeleteFunc(cells, func(c *dp.Cell) bool {
			mix := "empty"
			if i := strings.LastIndex(c.Name, "mix="); i >= 0 {
				mix = c.Name[i+4:]
			}
			return !slices.Contains(strings.Split(*mixes, ","), mix)
		})
		fmt.Fprintf(os.Stderr, "measuring %d cells x %d rounds x %d packets (%d-byte replies)\n", len(cells), *rounds, *k, size)
		check(dp.Interleave(rng, cells, *rounds, *k))
		var st map[string]float64
		if *stats {
			st, err = dp.StatsPass(rng, cells, *k)
			check(err)
		}
		for _, c := range cells {
			if c.Wrong > 0 {
				check(fmt.Errorf("%s: %d of %d runs had another verdict than %d", c.Name, c.Wrong, len(c.Samples), c.Want))
			}
			name := "dataplane/" + c.Name + tag
			r := row{name: name, med: dp.Median(c.Samples), p90: dp.Percentile(c.Samples, 90), stats: st[c.Name]}
			r.lo, r.hi = dp.Range(c.RoundMedians)
			medians[c.Name] = r.med
			table = append(table, r)
			fmt.Printf("RESULT name=%s value=%.0f unit=ns/pkt round_medians=%.0f..%.0f p90=%.0f samples=%d\n",
				name, r.med, r.lo, r.hi, r.p90, len(c.Samples))
			if st != nil {
				result(name+"/bpf_stats", st[c.Name], "ns/pkt")
			}
		}
		for _, s := range sets {
			s.Close()
		}
		sets = nil
		runtime.GC()
		debug.FreeOSMemory()
	}

	// Rate at the largest rule set relative to 1 rule (1/ns ratio).
	if len(counts) > 1 && counts[0] == 1 {
		big := counts[len(counts)-1]
		for _, size := range sizes {
			for _, mix := range []string{"hot", "uniform"} {
				one := medians[fmt.Sprintf("rules=1/reply=%d/mix=%s", size, mix)]
				many := medians[fmt.Sprintf("rules=%s/reply=%d/mix=%s", dp.Human(big), size, mix)]
				if one > 0 && many > 0 {
					result(fmt.Sprintf("dataplane/rate_ratio_%s_vs_1/reply=%d/mix=%s%s", dp.Human(big), size, mix, tag), one/many, "ratio")
				}
			}
		}
	}

	fmt.Fprintf(os.Stderr, "\n%-52s %8s %14s %8s %10s\n", "cell", "median", "round range", "p90", "bpf_stats")
	for _, r := range table {
		fmt.Fprintf(os.Stderr, "%-52s %8.0f %6.0f..%-6.0f %8.0f %10.1f\n", strings.TrimPrefix(r.name, "dataplane/"), r.med, r.lo, r.hi, r.p90, r.stats)
	}
}

func result(name string, v float64, unit string) {
	fmt.Printf("RESULT name=%s value=%s unit=%s\n", name, strconv.FormatFloat(v, 'f', -1, 64), unit)
}

func mb(b uint64) float64 { return float64(b) / (1 << 20) }

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "dpbench:", err)
		os.Exit(1)
	}
}

// dumpProg saves bpftool's view of the program (show, xlated, jited with
// line info) for the notes on where the time goes.
func dumpProg(s *dp.Set, dir string) error {
	info, err := s.Prog().Info()
	if err != nil {
		return err
	}
	id, _ := info.ID()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, args := range map[string][]string{
		"show.txt":   {"prog", "show", "id", fmt.Sprint(id)},
		"xlated.txt": {"prog", "dump", "xlated", "id", fmt.Sprint(id), "linum"},
	} {
		out, err := exec.Command("bpftool", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("bpftool %v: %v: %s", args, err, out)
		}
		if err := os.WriteFile(filepath.Join(dir, name), out, 0o644); err != nil {
			return err
		}
	}
	// bpftool here has no libbfd: the JIT image is saved raw, one file per
	// function, with its kernel symbol address, for objdump -b binary.
	insns, ok := info.JitedInsns()
	lens, ok2 := info.JitedFuncLens()
	addrs, ok3 := info.JitedKsymAddrs()
	if !ok || !ok2 || !ok3 {
		return fmt.Errorf("no JIT image in the program info")
	}
	var index strings.Builder
	off := uint32(0)
	for i, l := range lens {
		name := fmt.Sprintf("jited_func%d.bin", i)
		if err := os.WriteFile(filepath.Join(dir, name), insns[off:off+l], 0o644); err != nil {
			return err
		}
		fmt.Fprintf(&index, "%s addr=%#x len=%d\n", name, addrs[i], l)
		off += l
	}
	if err := os.WriteFile(filepath.Join(dir, "jited_index.txt"), []byte(index.String()), 0o644); err != nil {
		return err
	}
	// Source lines by JIT address: the i-th jited line info is the address
	// of the i-th line info.
	lines, err := info.LineInfos()
	if err != nil {
		return err
	}
	jlines, ok := info.JitedLineInfos()
	if !ok || len(jlines) != len(lines) {
		return fmt.Errorf("jited line infos: %d for %d line infos", len(jlines), len(lines))
	}
	var li strings.Builder
	for i, l := range lines {
		fmt.Fprintf(&li, "%#x %d %s:%d %s\n", jlines[i], l.Offset, filepath.Base(l.Line.FileName()), l.Line.LineNumber(), strings.TrimSpace(l.Line.Line()))
	}
	return os.WriteFile(filepath.Join(dir, "lines.txt"), []byte(li.String()), 0o644)
}
