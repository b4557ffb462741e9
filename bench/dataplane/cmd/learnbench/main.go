// Command learnbench measures what learning costs an unmatched request on
// the fast path: Santa's XDP program, through BPF_PROG_TEST_RUN, on two
// identical rule sets, one of whose service learns (santactl learn), fed
// the same requests that no rule answers, interleaved over rounds. The
// difference of the medians is the cost per passed request. Requests are
// either all different (every one a new key: an insert into the LRU table
// of counts, which evicts the oldest once it is full) or one name over and
// over (a hot key: one lookup and an atomic add, its samples taken at the
// doublings of its count). It prints RESULT lines on stdout and a
// table on stderr. Needs root.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"

	dp "github.com/santa-offload/santa/bench/dataplane"
	"github.com/santa-offload/santa/internal/model"
)

func main() {
	rules := flag.Int("rules", 10000, "rules installed in each set (none of them answers)")
	rounds := flag.Int("rounds", 9, "interleaved rounds")
	k := flag.Int("k", 20000, "packets per cell and round")
	cpu := flag.Int("cpu", 1, "CPU to run the measuring thread on (-1: no pinning)")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Parse()

	check(dp.PinThread(*cpu))
	rng := rand.New(rand.NewPCG(*seed, 42))
	var sets [2]*dp.Set
	for i := range sets {
		s, err := dp.OpenSet(dp.SetOptions{Rules: *rules, Size: 64})
		check(err)
		defer s.Close()
		check(s.Check())
		sets[i] = s
	}
	check(sets[1].D.SetLearning(sets[1].Svc, model.Learning{KeyOffset: 2, Enabled: true}))
	mem, err := sets[1].KernelMemory()
	check(err)
	for _, m := range []string{"learn_counts", "learn_watch", "learn_passes", "learn_samples", "learn_cpu", "learn_config"} {
		fmt.Printf("RESULT name=dataplane/learn/kmem/%s value=%d unit=bytes cpus=%d\n", m, mem[m], runtime.NumCPU())
	}

	var cells []*dp.Cell
	for i, learn := range []string{"off", "on"} {
		s := sets[i]
		cells = append(cells,
			&dp.Cell{Name: "distinct/learn=" + learn, Prog: s.Prog(), Want: dp.XDPPass,
				Frames: func(rng *rand.Rand, n int) [][]byte {
					out := make([][]byte, n)
					for j := range out {
						out[j] = s.Query(*rules+rng.IntN(1<<20), uint16(rng.Uint32()))
					}
					return out
				}},
			&dp.Cell{Name: "one_key/learn=" + learn, Prog: s.Prog(), Want: dp.XDPPass,
				Frames: func(rng *rand.Rand, n int) [][]byte {
					out := make([][]byte, n)
					for j := range out {
						out[j] = s.Query(*rules+1, uint16(rng.Uint32()))
					}
					return out
				}})
	}
	fmt.Fprintf(os.Stderr, "measuring %d cells x %d rounds x %d packets, %d rules\n", len(cells), *rounds, *k, *rules)
	check(dp.Interleave(rng, cells, *rounds, *k))

	medians := map[string]float64{}
	for _, c := range cells {
		if c.Wrong > 0 {
			check(fmt.Errorf("%s: %d of %d runs had another verdict than %d", c.Name, c.Wrong, len(c.Samples), c.Want))
		}
		med := dp.Median(c.Samples)
		medians[c.Name] = med
		lo, hi := dp.Range(c.RoundMedians)
		fmt.Printf("RESULT name=dataplane/learn/%s value=%.0f unit=ns/pkt round_medians=%.0f..%.0f p90=%.0f samples=%d\n",
			c.Name, med, lo, hi, dp.Percentile(c.Samples, 90), len(c.Samples))
		fmt.Fprintf(os.Stderr, "%-24s %6.0f ns/pkt (round medians %.0f..%.0f)\n", c.Name, med, lo, hi)
	}
	for _, mix := range []string{"distinct", "one_key"} {
		cost := medians[mix+"/learn=on"] - medians[mix+"/learn=off"]
		fmt.Printf("RESULT name=dataplane/learn/cost_per_passed/%s value=%.0f unit=ns\n", mix, cost)
		fmt.Fprintf(os.Stderr, "learning costs a passed request %.0f ns (%s)\n", cost, mix)
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "learnbench:", err)
		os.Exit(1)
	}
}
