package dataplane

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// Cell is one measured configuration: a program, the frames it is fed in a
// round, and the verdict every frame must get.
type Cell struct {
	Name   string
	Prog   *ebpf.Program
	Want   uint32
	Frames func(rng *rand.Rand, k int) [][]byte

	Samples      []uint32  // kernel ns per run, all rounds
	RoundMedians []float64 // one per round
	Wrong        int       // runs with another verdict
}

// RunFrames runs each frame once (repeat 1: the kernel would otherwise re-run
// the rewritten packet) and returns the kernel-reported durations in ns.
func RunFrames(prog *ebpf.Program, frames [][]byte, want uint32, out []uint32) ([]uint32, int, error) {
	wrong := 0
	for _, f := range frames {
		ret, d, err := prog.Benchmark(f, 1, nil)
		if err != nil {
			return out, wrong, err
		}
		if ret != want {
			wrong++
		}
		out = append(out, uint32(d.Nanoseconds()))
	}
	return out, wrong, nil
}

// Interleave runs rounds; in each round every cell (in a new random order)
// runs k frames.
func Interleave(rng *rand.Rand, cells []*Cell, rounds, k int) error {
	for range rounds {
		for _, i := range rng.Perm(len(cells)) {
			c := cells[i]
			frames := c.Frames(rng, k)
			start := len(c.Samples)
			var wrong int
			var err error
			c.Samples, wrong, err = RunFrames(c.Prog, frames, c.Want, c.Samples)
			if err != nil {
				return fmt.Errorf("%s: %w", c.Name, err)
			}
			c.Wrong += wrong
			c.RoundMedians = append(c.RoundMedians, Median(c.Samples[start:]))
		}
	}
	return nil
}

// StatsPass runs k frames per cell with BPF run-time statistics on and
// returns the kernel's run_time_ns / run_cnt per cell (the program alone,
// without the test-run harness).
func StatsPass(rng *rand.Rand, cells []*Cell, k int) (map[string]float64, error) {
	closer, err := ebpf.EnableStats(0) // BPF_STATS_RUN_TIME
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	out := map[string]float64{}
	for _, c := range cells {
		frames := c.Frames(rng, k)
		before, err := c.Prog.Stats()
		if err != nil {
			return nil, err
		}
		if _, _, err := RunFrames(c.Prog, frames, c.Want, nil); err != nil {
			return nil, err
		}
		after, err := c.Prog.Stats()
		if err != nil {
			return nil, err
		}
		if n := after.RunCount - before.RunCount; n > 0 {
			out[c.Name] = float64(after.Runtime-before.Runtime) / float64(time.Duration(n))
		}
	}
	return out, nil
}

// EmptyXDP is a program that returns XDP_PASS at once: the test-run
// harness's own cost.
func EmptyXDP() (*ebpf.Program, error) {
	return ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "empty_xdp",
		Type: ebpf.XDP,
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R0, XDPPass),
			asm.Return(),
		},
		License: "GPL",
	})
}

// Range is the smallest and the largest of xs (not empty): the spread of
// round medians.
func Range(xs []float64) (lo, hi float64) { return slices.Min(xs), slices.Max(xs) }

// Median of a sample (not modified).
func Median(xs []uint32) float64 { return Percentile(xs, 50) }

// Percentile p (0..100) of a sample, nearest rank.
func Percentile(xs []uint32, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(p / 100 * float64(len(s)-1))
	return float64(s[i])
}

// MedianF is the median of floats (not modified).
func MedianF(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Human prints a rule count as 1, 10k, 100k, 1M.
func Human(n int) string {
	switch {
	case n >= 1000000 && n%1000000 == 0:
		return fmt.Sprintf("%dM", n/1000000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// Summary prints the RESULT line of a figure measured once per run: the
// median of f over the runs, with their range, and returns the median.
func Summary[S any](name string, runs []S, f func(S) float64, unit string) float64 {
	if len(runs) == 0 {
		return 0
	}
	xs := make([]float64, len(runs))
	for i, r := range runs {
		xs[i] = f(r)
	}
	med := MedianF(xs)
	fmt.Printf("RESULT name=%s value=%.3f unit=%s range=%.3f..%.3f runs=%d\n", name, med, unit,
		slices.Min(xs), slices.Max(xs), len(xs))
	return med
}

// PinThread keeps the calling goroutine on its thread, and the thread on
// cpu (unless cpu is negative), so that every run is measured on one CPU.
func PinThread(cpu int) error {
	runtime.LockOSThread()
	if cpu < 0 {
		return nil
	}
	var set unix.CPUSet
	set.Set(cpu)
	return unix.SchedSetaffinity(0, &set)
}
