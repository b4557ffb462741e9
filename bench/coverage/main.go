// Command coverage tells how much of a DNS bench run's traffic an agent's
// rules cover: the share of the queries the XDP generator sends (its cycled
// sequence of -sequence draws from -popularity over -names names, seed
// -seed, as bench/scenario's generator draws them) that the names of each
// rule dump answer, beside the same number of the most sent names (the
// best any choice of that many could do) and of the first names by index
// (the oracle's top N). Unlike replies/s, coverage is free of a run's
// noise: it tells a learner that chooses badly from one that chooses well
// but costs the server's core too much (docs/benchmarks.md (h), "What the
// agent has learned at 10 s").
//
// Each argument is a dump of `santactl --json rules list SERVICE` taken
// during the run.
package main

import (
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/santa-offload/santa/internal/dnstest"
	"github.com/santa-offload/santa/internal/offload/dnsmsg"
	"github.com/santa-offload/santa/internal/popularity"
)

func main() {
	names := flag.Int("names", 1000000, "the zone's names (bench/dns -names)")
	pop := flag.String("popularity", "zipf:1", "the generator's popularity (bench/dns -popularity)")
	seqLen := flag.Int("sequence", 1<<20, "the generator's sequence length (bench/gen's default)")
	seed := flag.Uint64("seed", 1, "the generator's seed (bench/scenario's)")
	flag.Parse()
	p, err := popularity.Parse(*pop)
	if err != nil {
		fail(err)
	}
	sent := sentCounts(p.Sequence(*names, *seqLen, *seed), *names)
	for _, path := range flag.Args() {
		picked, err := readDump(path)
		if err != nil {
			fail(err)
		}
		report(os.Stdout, path, sent, picked)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "coverage:", err)
	os.Exit(1)
}

// sentCounts is how often the sequence sends each of n names.
func sentCounts(seq []uint32, n int) []int {
	count := make([]int, n)
	for _, i := range seq {
		count[i]++
	}
	return count
}

// readDump reads the bench's name indices from the query patterns of a
// santactl rule dump; a rule at another offset than the query's after its
// transaction id, or for any other name, is left out.
func readDump(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var dump struct {
		Rules []struct {
			Condition struct {
				Offset int    `json:"offset"`
				Hex    string `json:"hex"`
			} `json:"condition"`
		} `json:"rules"`
	}
	if err := json.Unmarshal(b, &dump); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []int
	seen := map[int]bool{} // a name's forms count once
	for _, r := range dump.Rules {
		if r.Condition.Offset != 2 { // not a query after its transaction id
			continue
		}
		if i, ok := nameIndex(r.Condition.Hex); ok && !seen[i] {
			seen[i] = true
			out = append(out, i)
		}
	}
	return out, nil
}

// nameIndex reads i from a query pattern (the query after its transaction
// id, in hex) for the name dnstest.Name(i).
func nameIndex(pattern string) (int, bool) {
	q, err := hex.DecodeString(pattern)
	if err != nil {
		return 0, false
	}
	m, err := dnsmsg.Parse(append([]byte{0, 0}, q...))
	if err != nil || len(m.Question) != 1 {
		return 0, false
	}
	name := m.Question[0].Name.String()
	var i int
	if _, err := fmt.Sscanf(name, "n%d.example.", &i); err != nil || i < 0 || dnstest.Name(i)+"." != name {
		return 0, false
	}
	return i, true
}

// report writes what the picked names (indices of sent) cover of the
// queries sent.
func report(w io.Writer, what string, sent []int, picked []int) {
	total := 0
	for _, c := range sent {
		total += c
	}
	var got []int
	for _, i := range picked {
		if i < len(sent) { // a name past the zone's is not sent
			got = append(got, sent[i])
		}
	}
	k := len(got)
	if total == 0 || k == 0 {
		fmt.Fprintf(w, "%s: %d names of the zone, %d queries sent: nothing to weigh\n", what, k, total)
		return
	}
	share := func(counts []int) float64 {
		s := 0
		for _, c := range counts {
			s += c
		}
		return float64(s) / float64(total)
	}
	most := slices.Clone(sent)
	slices.SortFunc(most, func(a, b int) int { return b - a })
	cov, best := share(got), share(most[:k])
	fmt.Fprintf(w, "%s: %d names cover %.3f of the queries sent; the %d most sent %.3f (%.3f of that); the first %d by index %.3f\n",
		what, len(picked), cov, k, best, cov/best, k, share(sent[:k]))
}
