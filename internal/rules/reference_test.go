package rules

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/santa-offload/santa/internal/pkttest"
	"github.com/santa-offload/santa/rule"
)

// indexed is a rule set as the data plane would hold it.
type indexed struct {
	rules    []RefRule
	prefixes []RefRule // the rules without their length ranges
	regions  []Region
	index    map[IndexKey]IndexNode
	bySlot   map[uint32]RefRule
}

func buildIndexed(t *testing.T, rules []RefRule) indexed {
	t.Helper()
	x := indexed{rules: rules, bySlot: map[uint32]RefRule{}}
	var cs []rule.Condition
	var es []Entry
	for i, rr := range rules {
		slot := uint32(i + 1)
		x.bySlot[slot] = rr
		prefix := rr
		prefix.Rule.Condition.MinLen, prefix.Rule.Condition.MaxLen = 0, 0
		x.prefixes = append(x.prefixes, prefix)
		cs = append(cs, rr.Rule.Condition)
		es = append(es, Entry{Slot: slot, ID: rr.ID, Cond: rr.Rule.Condition})
	}
	var err error
	if x.regions, err = Regions(cs, rule.MaxRegions); err != nil {
		t.Fatal(err)
	}
	if err := CheckDuplicates(es); err != nil {
		t.Fatal(err)
	}
	if x.index, err = BuildIndex(x.regions, es); err != nil {
		t.Fatal(err)
	}
	checkIndex(t, x.regions, es, x.index)
	return x
}

func TestMatchTieBreak(t *testing.T) {
	ref := func(id uint32, off int, pattern string, procs ...rule.Processor) RefRule {
		return RefRule{ID: id, Rule: rule.Rule{
			Condition:  rule.Condition{Offset: uint16(off), Pattern: []byte(pattern)},
			Processors: procs,
			ReplyLen:   8,
		}}
	}
	x := buildIndexed(t, []RefRule{
		ref(5, 0, "COMSYS"),
		ref(1, 0, "COM"),
		ref(2, 3, "SYS"),
		ref(4, 0, "COMSYSX", rule.Copy(20, 2, 0)),
		ref(9, 10, "AB"),
		ref(3, 12, "CD"),
	})
	tests := []struct {
		name    string
		payload string
		want    uint32 // 0: no match
	}{
		{"longer wins", "COMSYS", 5},
		{"prefix only", "COMSYX", 1},
		{"other region", "zzzSYS", 2},
		{"copy source beyond the payload", "COMSYSX", 5},
		{"copy source inside the payload", "COMSYSX" + strings.Repeat(".", 15), 4},
		{"equal length: lower id", "zzzzzz....ABCD", 3},
		{"longest across regions", "COMSYS....ABCD", 5},
		{"too short", "CO", 0},
		{"empty", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := []byte(tt.payload)
			got, ok := Match(x.rules, p)
			gotIdx, okIdx := MatchIndexed(x.regions, x.index, x.bySlot, p)
			if tt.want == 0 {
				if ok || okIdx {
					t.Fatalf("Match = %d %v, MatchIndexed = %d %v; want no match", got.ID, ok, gotIdx.ID, okIdx)
				}
				return
			}
			if !ok || got.ID != tt.want {
				t.Errorf("Match = %d %v; want %d", got.ID, ok, tt.want)
			}
			if !okIdx || gotIdx.ID != tt.want {
				t.Errorf("MatchIndexed = %d %v; want %d", gotIdx.ID, okIdx, tt.want)
			}
		})
	}
}

// randomRules makes a rule set that stresses the index: up to MaxRegions
// offsets, each with many conditions sharing a long prefix of one base
// string, short tails over a two-letter alphabet (so conditions are often
// prefixes of one another), and at some offsets a leading FNV-1a collision
// pair so that different bytes share nodes at every depth.
func randomRules(rng *rand.Rand, base []byte) []RefRule {
	var rules []RefRule
	seen := map[string]bool{}
	offsets := rng.Perm(61)[:1+rng.IntN(rule.MaxRegions)]
	for _, o := range offsets {
		shared := rng.IntN(41)
		collide := rng.IntN(3) == 0
		for range 1 + rng.IntN(60) {
			var p []byte
			if collide {
				p = append(p, []string{collideA, collideB}[rng.IntN(2)]...)
			}
			p = append(p, base[o+len(p):o+len(p)+shared]...)
			for range rng.IntN(26) {
				p = append(p, "ab"[rng.IntN(2)])
			}
			k := string(rune(o)) + string(p)
			if len(p) == 0 || seen[k] {
				continue
			}
			seen[k] = true
			r := pkttest.RandomRule(rng, 100)
			r.Condition = rule.Condition{Offset: uint16(o), Pattern: p}
			r = pkttest.RandomLength(rng, r)
			cond := r.Condition
			conds := []rule.Condition{cond}
			// Now and then rules of the same pattern with other lengths: at
			// most two, so that a colliding pair of patterns fits one node.
			for cond.HasLength() && rng.IntN(3) == 0 && len(conds) < NodeSlots/2 {
				c, ok := pkttest.OtherLength(rng, cond, conds)
				if !ok {
					break
				}
				conds = append(conds, c)
			}
			for _, c := range conds {
				r.Condition = c
				if _, err := rule.Compile(r); err != nil {
					continue // too many copy pieces, or copies beyond the max length: it could not be installed
				}
				rules = append(rules, RefRule{ID: rng.Uint32N(1 << 20), Rule: r})
			}
		}
	}
	// Rule ids are unique in a service.
	ids := map[uint32]bool{}
	out := rules[:0]
	for _, rr := range rules {
		if !ids[rr.ID] {
			ids[rr.ID] = true
			out = append(out, rr)
		}
	}
	return out
}

// randomPayload is mostly a request one rule matches, then perhaps broken by
// a changed byte or cut short, and sometimes plain noise.
func randomPayload(rng *rand.Rand, base []byte, rules []RefRule) []byte {
	if rng.IntN(10) == 0 {
		p := make([]byte, rng.IntN(150))
		for i := range p {
			p[i] = "abc"[rng.IntN(3)]
		}
		return p
	}
	c := rules[rng.IntN(len(rules))].Rule.Condition
	n := pkttest.LengthNear(rng, c, max(c.End(), rng.IntN(len(base))))
	p := append([]byte(nil), base[:min(n, len(base))]...)
	p = append(p, make([]byte, n-len(p))...)
	copy(p[c.Offset:], c.Pattern)
	if rng.IntN(3) == 0 {
		p[rng.IntN(len(p))] = "abc"[rng.IntN(3)]
	}
	if rng.IntN(4) == 0 {
		p = p[:rng.IntN(len(p)+1)]
	}
	return p
}

// TestMatchIndexedAgreesWithMatch checks the index walk, the one the kernel
// does, against the exhaustive reference matcher.
func TestMatchIndexedAgreesWithMatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const sets, payloads = 250, 100
	matched, deepNodes, lengthDecided := 0, 0, 0
	for range sets {
		base := make([]byte, 200)
		for i := range base {
			base[i] = "abc"[rng.IntN(3)]
		}
		rules := randomRules(rng, base)
		if len(rules) == 0 {
			continue
		}
		x := buildIndexed(t, rules)
		for _, n := range x.index {
			if n.NextEnd != 0 {
				deepNodes++
			}
		}
		for range payloads {
			p := randomPayload(rng, base, rules)
			want, ok := Match(x.rules, p)
			got, okIdx := MatchIndexed(x.regions, x.index, x.bySlot, p)
			if ok != okIdx || got.ID != want.ID {
				t.Fatalf("payload %q: Match = %d %v (%d@%d), MatchIndexed = %d %v (%d@%d)",
					p, want.ID, ok, len(want.Rule.Condition.Pattern), want.Rule.Condition.Offset,
					got.ID, okIdx, len(got.Rule.Condition.Pattern), got.Rule.Condition.Offset)
			}
			if ok {
				matched++
			}
			if prefixes, ok := Match(x.prefixes, p); ok && prefixes.ID != want.ID {
				lengthDecided++
			}
		}
	}
	t.Logf("%d of %d payloads matched; %d inner index nodes; %d answered otherwise, or not at all, for their length",
		matched, sets*payloads, deepNodes, lengthDecided)
	if matched < sets*payloads/2 || deepNodes == 0 || lengthDecided < sets {
		t.Fatalf("the random cases are too easy: %d matches, %d inner nodes, %d decided by length", matched, deepNodes, lengthDecided)
	}
}
