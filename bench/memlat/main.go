package main

import (
	"flag"
	"fmt"
	"log"
	"math/rand/v2"

	"github.com/cilium/ebpf"

	"github.com/santa-offload/santa/bench/dataplane"
)

// steps is MEMLAT_STEPS of bench/bpf/memlat.bpf.c: accesses per run.
const steps = 1000

// lineBytes is the size of struct memlat_line: one cache line.
const lineBytes = 64

// layout is a set of lines to chase: count lines, stride lines apart.
type layout struct {
	name          string
	count, stride uint32
}

// The first two read the same 16k lines (1 MiB, inside this machine's L2
// and L3): packed, then one per 4-KiB page. The third reads 4M lines of a
// 256-MiB array, as a million rules spread theirs.
var layouts = []layout{
	{"packed_16k_lines", 1 << 14, 1},
	{"page_per_line_16k_lines", 1 << 14, 4096 / lineBytes},
	{"random_256MiB", 1 << 22, 1},
}

func main() {
	rounds := flag.Int("rounds", 5, "runs per layout, each of -repeat runs of the program")
	repeat := flag.Int("repeat", 200, "program runs per round (BPF_PROG_TEST_RUN repeat)")
	flag.Parse()

	var size uint32
	for _, l := range layouts {
		size = max(size, l.count*l.stride)
	}
	spec, err := loadMemlat()
	if err != nil {
		log.Fatal(err)
	}
	spec.Maps["lines"].MaxEntries = size
	var objs memlatObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		log.Fatalf("loading: %v", err)
	}
	defer objs.Close()

	for _, l := range layouts {
		start, err := layCycle(objs.Lines, l)
		if err != nil {
			log.Fatal(err)
		}
		if err := objs.MemlatAt.Set(start); err != nil {
			log.Fatal(err)
		}
		// One round untimed: the first pass over the cycle starts cold.
		perStep := make([]float64, *rounds+1)
		for i := range perStep {
			_, d, err := objs.MemlatChase.Benchmark(make([]byte, 64), *repeat, nil)
			if err != nil {
				log.Fatalf("running: %v", err)
			}
			perStep[i] = float64(d.Nanoseconds()) / steps
		}
		dataplane.Summary(fmt.Sprintf("memlat/%s", l.name), perStep[1:], func(x float64) float64 { return x }, "ns/access")
	}
}

// layCycle links l's lines into one random cycle and returns a line of it.
func layCycle(m *ebpf.Map, l layout) (uint32, error) {
	order := rand.Perm(int(l.count))
	keys := make([]uint32, l.count)
	values := make([]memlatMemlatLine, l.count)
	for i, at := range order {
		keys[i] = uint32(at) * l.stride
		values[i].Next = uint32(order[(i+1)%len(order)]) * l.stride
	}
	const batch = 1 << 16
	for lo := 0; lo < len(keys); lo += batch {
		hi := min(lo+batch, len(keys))
		if _, err := m.BatchUpdate(keys[lo:hi], values[lo:hi], nil); err != nil {
			return 0, fmt.Errorf("writing lines: %w", err)
		}
	}
	return keys[0], nil
}
