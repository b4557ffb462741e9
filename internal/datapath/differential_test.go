package datapath

import (
	"bytes"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/pkttest"
	"github.com/santa-offload/santa/internal/rules"
	"github.com/santa-offload/santa/rule"
)

// The kernel against the pure-Go reference matcher: random rule sets,
// changed between rounds (adds, replaces, deletes), and random requests,
// many of them built to match or nearly match a rule. Verdict and reply
// bytes must agree for every packet.
func TestDifferential(t *testing.T) { differential(t, false) }

// The same with the reclaimer held, as a grace period that outlasts every
// round would: what the changes retire stays in the index and the slots.
func TestDifferentialRetiredKept(t *testing.T) { differential(t, true) }

func differential(t *testing.T, holdRetired bool) {
	const rounds, packetsPerRound = 20, 5000 // 100k packets
	seed := uint64(7)                        // SANTA_DIFF_SEED explores others; a failure names its seed
	if v, err := strconv.ParseUint(os.Getenv("SANTA_DIFF_SEED"), 10, 64); err == nil {
		seed = v
	}
	rng := rand.New(rand.NewPCG(seed, 11))
	t.Logf("seed %d", seed)
	d := openTest(t)
	c := boundUDP(t, "127.0.0.1:0")
	svc := register(t, d, c)
	to := local(c)
	if holdRetired {
		holdReclaimer(t, d)
	}

	installed := map[model.RuleID]rule.Rule{}
	g := ruleGen{rng: rng}
	answered, ranged := 0, 0 // ranged: answered by a rule with a length range
	for round := range rounds {
		g.mutate(t, d, svc, installed)
		ref := make([]rules.RefRule, 0, len(installed))
		for id, r := range installed {
			ref = append(ref, rules.RefRule{ID: uint32(id), Rule: r})
		}
		slices.SortFunc(ref, func(a, b rules.RefRule) int { return int(a.ID) - int(b.ID) })

		for i := range packetsPerRound {
			payload := g.payload(ref)
			req := request(to, payload)
			verdict, out := run(t, d.XDPProgram(), req.Bytes())
			want, ok := rules.Match(ref, payload)
			if !ok {
				if verdict != xdpPass {
					t.Fatalf("round %d packet %d: payload %q matched nothing in the reference, kernel verdict %d",
						round, i, payload, verdict)
				}
				continue
			}
			if verdict != xdpTX {
				t.Fatalf("round %d packet %d: payload %q: reference rule %d (%q@%d), kernel verdict %d",
					round, i, payload, want.ID, want.Rule.Condition.Pattern, want.Rule.Condition.Offset, verdict)
			}
			answered++
			if want.Rule.Condition.HasLength() {
				ranged++
			}
			wantFrame := req.Reply(expectReply(want.Rule, payload)).Bytes()
			if !bytes.Equal(out, wantFrame) {
				t.Fatalf("round %d packet %d: payload %q: reply of rule %d differs\n got %x\nwant %x",
					round, i, payload, want.ID, out, wantFrame)
			}
		}
	}
	t.Logf("%d packets, %d answered (%d by a rule with a length range), %d rules at the end, %d batches refused",
		rounds*packetsPerRound, answered, ranged, len(installed), g.refused)
	if answered < rounds*packetsPerRound/4 || ranged < answered/10 {
		t.Errorf("only %d packets answered, %d by a length range: the generator no longer exercises matching", answered, ranged)
	}
}

// ruleGen makes rules whose conditions overlap a lot: few offsets, a small
// alphabet and shared prefixes, so regions, deep index nodes, tie-breaks and
// near misses all occur.
type ruleGen struct {
	rng      *rand.Rand
	prefixes [][]byte
	refused  int // batches the data plane refused
}

var offsets = []uint16{0, 0, 0, 2, 5, 12, 40}

func (g *ruleGen) bytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = "ab\x00."[g.rng.IntN(4)]
	}
	return b
}

func (g *ruleGen) rule() rule.Rule {
	if len(g.prefixes) == 0 || g.rng.IntN(8) == 0 {
		g.prefixes = append(g.prefixes, g.bytes(1+g.rng.IntN(90)))
	}
	pat := slices.Clone(g.prefixes[g.rng.IntN(len(g.prefixes))])
	pat = append(pat, g.bytes(g.rng.IntN(12))...)
	pat = pat[:min(len(pat), 1+g.rng.IntN(120))]
	replyLen := 1 + g.rng.IntN(700)
	var procs []rule.Processor
	for range g.rng.IntN(4) {
		dst := g.rng.IntN(replyLen)
		n := 1 + g.rng.IntN(min(replyLen-dst, 40))
		if g.rng.IntN(2) == 0 {
			procs = append(procs, rule.Put(uint16(dst), g.bytes(n)))
		} else {
			procs = append(procs, rule.Copy(uint16(g.rng.IntN(60)), uint16(n), uint16(dst)))
		}
	}
	return pkttest.RandomLength(g.rng, rule.Rule{
		Condition:  rule.Condition{Offset: offsets[g.rng.IntN(len(offsets))], Pattern: pat},
		Processors: procs,
		ReplyLen:   uint16(replyLen),
	})
}

// sibling is a rule with prev's offset and pattern and another length,
// which may sit beside it; false if prev leaves no length free.
func (g *ruleGen) sibling(prev rule.Rule) (rule.Rule, bool) {
	r := prev
	var ok bool
	r.Condition, ok = pkttest.OtherLength(g.rng, prev.Condition, []rule.Condition{prev.Condition})
	r.Processors = []rule.Processor{rule.Put(0, g.bytes(int(r.ReplyLen)))}
	return r, ok
}

// mutate adds, replaces and deletes rules, each as one batch. Batches the
// data plane refuses (a duplicate condition, say) must leave it unchanged.
func (g *ruleGen) mutate(t *testing.T, d *Datapath, svc model.ServiceID, installed map[model.RuleID]rule.Rule) {
	t.Helper()
	adds := make([]rule.Rule, 10+g.rng.IntN(40))
	for i := range adds {
		adds[i] = g.rule()
		if i > 0 && adds[i-1].Condition.HasLength() && g.rng.IntN(4) == 0 {
			if r, ok := g.sibling(adds[i-1]); ok {
				adds[i] = r
			}
		}
	}
	if ids, err := d.AddRules(svc, adds); err == nil {
		for i, id := range ids {
			installed[id] = adds[i]
		}
	} else {
		g.refused++
	}
	var updates []model.RuleUpdate
	var deletes []model.RuleID
	// In ID order: a seed replays the same run (map order is random).
	for _, id := range slices.Sorted(maps.Keys(installed)) {
		switch g.rng.IntN(6) {
		case 0:
			updates = append(updates, model.RuleUpdate{ID: id, Rule: g.rule()})
		case 1:
			deletes = append(deletes, id)
		case 2: // a new reply under the same condition: the index keeps its place
			r := g.rule()
			r.Condition = installed[id].Condition
			updates = append(updates, model.RuleUpdate{ID: id, Rule: r})
		}
	}
	if len(updates) > 0 {
		if err := d.ReplaceRules(updates); err == nil {
			for _, u := range updates {
				installed[u.ID] = u.Rule
			}
		} else {
			g.refused++
		}
	}
	if len(deletes) > 0 {
		if err := d.DeleteRules(deletes); err != nil {
			t.Fatal(err)
		}
		for _, id := range deletes {
			delete(installed, id)
		}
	}
	got, err := d.Rules(svc)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(installed) {
		t.Fatalf("data plane holds %d rules, test expects %d", len(got), len(installed))
	}
}

// payload builds a request: often a rule's condition (possibly mutated or
// cut short) over random bytes, sometimes just random bytes.
func (g *ruleGen) payload(ref []rules.RefRule) []byte {
	p := g.bytes(1 + g.rng.IntN(200))
	if len(ref) == 0 || g.rng.IntN(5) == 0 {
		return p
	}
	c := ref[g.rng.IntN(len(ref))].Rule.Condition
	if need := c.End(); len(p) < need {
		p = append(p, g.bytes(need-len(p)+g.rng.IntN(3))...)
	}
	if n := pkttest.LengthNear(g.rng, c, len(p)); n < len(p) {
		p = p[:n]
	} else {
		p = append(p, g.bytes(n-len(p))...)
	}
	copy(p[c.Offset:], c.Pattern)
	switch g.rng.IntN(6) {
	case 0: // flip a byte of the condition
		p[int(c.Offset)+g.rng.IntN(len(c.Pattern))] ^= 1
	case 1: // cut inside the condition
		p = p[:int(c.Offset)+g.rng.IntN(len(c.Pattern))]
	}
	if len(p) == 0 {
		p = []byte{0}
	}
	return p
}
