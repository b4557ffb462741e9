package datapath

// The verifier's work on each program (needs root, like the fixtures).

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/santa-offload/santa/internal/model"
)

// verifierLimit is the most instructions the kernel's verifier processes
// for one program (BPF_COMPLEXITY_LIMIT_INSNS) before it refuses it.
const verifierLimit = 1_000_000

// Every program of santa_udp and santa_tcp, sized as santad sizes them by
// default, verifies in at most half of verifierLimit: another kernel's
// verifier (Santa runs on Linux 6.6 and later), which prunes otherwise, or
// another compiler's code must not push one over, or santad would not
// start there. santa_mc_udp_reply took 860,000 with a bounded loop of its
// own (mc_fill.h).
func TestVerifierHeadroom(t *testing.T) {
	opts := Options{MaxRules: model.DefaultMaxRules, MaxServices: model.DefaultMaxServices,
		MaxConnections: model.DefaultMaxConnections, ReplyTTL: 64}
	l := &loaded{index: newIndexTable(indexPositions(opts.MaxRules))}
	cache := btf.NewCache()
	udp, tcp, err := l.loadAllMaps(opts, nil, cache)
	if err != nil {
		t.Fatal(err)
	}
	defer udp.coll.Close()
	defer tcp.coll.Close()
	stats := ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats}
	udp.progs, tcp.progs = stats, stats
	if err := loadPrograms(cache, udp, tcp); err != nil {
		t.Fatal(err)
	}
	processed := regexp.MustCompile(`processed (\d+) insns`)
	for _, f := range []*objectFile{udp, tcp} {
		for name, p := range f.coll.Programs {
			m := processed.FindStringSubmatch(p.VerifierLog)
			if m == nil {
				t.Fatalf("%s: no count of processed instructions in the verifier's log:\n%s", name, p.VerifierLog)
			}
			n, _ := strconv.Atoi(m[1])
			t.Logf("%s: %d instructions processed", name, n)
			if n > verifierLimit/2 {
				t.Errorf("%s: the verifier processed %d instructions, more than half its limit of %d", name, n, verifierLimit)
			}
		}
	}
}
