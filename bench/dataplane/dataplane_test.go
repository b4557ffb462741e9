package dataplane

// Go benchmarks over the same harness as cmd/dpbench (which is what
// bench/run-all.sh runs: it interleaves all cells over rounds; these do one
// cell after the other). Each benchmark op is one BPF_PROG_TEST_RUN of one
// frame (repeat 1); the metric that matters is kernel-ns/pkt, the median of the
// kernel-reported durations. Rule counts: DP_BENCH_RULES (default
// "1,10000"); reply sizes: DP_BENCH_SIZES (default "64,512,1400"). Needs
// root; skipped otherwise.
//
//	go test -run '^$' -bench . ./bench/dataplane/
//	DP_BENCH_RULES=1,100000,1000000 DP_BENCH_SIZES=512 go test -run '^$' -bench . -timeout 30m ./bench/dataplane/

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

func envInts(b *testing.B, name, def string) []int {
	s := os.Getenv(name)
	if s == "" {
		s = def
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		out = append(out, n)
	}
	return out
}

func BenchmarkXDP(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root (BPF_PROG_TEST_RUN of an XDP program)")
	}
	rng := rand.New(rand.NewPCG(1, 42))
	empty, err := EmptyXDP()
	if err != nil {
		b.Fatal(err)
	}
	defer empty.Close()
	for _, size := range envInts(b, "DP_BENCH_SIZES", "64,512,1400") {
		for _, n := range envInts(b, "DP_BENCH_RULES", "1,10000") {
			s, err := OpenSet(SetOptions{Rules: n, Size: size})
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Check(); err != nil {
				s.Close()
				b.Fatal(err)
			}
			cells := s.Cells(rng)
			if n == 1 {
				f := s.Query(0, 1)
				cells = append(cells, &Cell{Name: fmt.Sprintf("empty_prog/reply=%d", size), Prog: empty, Want: XDPPass,
					Frames: func(_ *rand.Rand, k int) [][]byte {
						out := make([][]byte, k)
						for i := range out {
							out[i] = f
						}
						return out
					}})
			}
			for _, c := range cells {
				b.Run(c.Name, func(b *testing.B) {
					frames := c.Frames(rng, min(b.N, 1<<16))
					durs := make([]uint32, 0, b.N)
					b.ResetTimer()
					for i := 0; i < b.N; i += len(frames) {
						chunk := frames[:min(len(frames), b.N-i)]
						var wrong int
						if durs, wrong, err = RunFrames(c.Prog, chunk, c.Want, durs); err != nil {
							b.Fatal(err)
						}
						if wrong > 0 {
							b.Fatalf("%d runs with another verdict than %d", wrong, c.Want)
						}
					}
					b.StopTimer()
					med := Median(durs)
					b.ReportMetric(med, "kernel-ns/pkt")
					if b.N >= 1000 {
						fmt.Printf("RESULT name=gobench/dataplane/%s value=%.0f unit=ns/pkt samples=%d\n", c.Name, med, len(durs))
					}
				})
			}
			s.Close()
		}
	}
}
