package agent

import "github.com/santa-offload/santa/internal/protocol"

// Learning the passed queries costs the server's core: the data plane's
// counting of each (two hash lookups of large tables, ~0.7 µs on this
// VM), santad's window and the agent's newcomers. At 1M names with a
// top 10,000 learned, that was 15 % of the core in steady state, 7 % the
// counting alone (docs/benchmarks.md (h), "Learning less once settled").
// Once a group's top set is full and the newcomers that beat its edge
// bring less than rankWorth of its rate for settleWindows windows in a
// row, the agent asks santad to count SettledCounts passed queries a CPU
// and window instead of its most (maxLearnCounts); the first window
// whose newcomers bring more asks for the most again. A popularity that
// shifts still shows: a name turned hot is counted in proportion, and
// the newcomers' least rates rest on the counts (rate.Scaled).
const (
	settleWindows  = 3
	maxLearnCounts = 100000 // santad's most and default (model.MaxLearnCounts)
)

// settle follows whether the group's top set is settled, and asks santad
// for the counts that go with it when that changes. Called with a.mu
// held.
func (a *agent) settle(g *group, newcomers []candidate) {
	if g.full && g.worth(newcomers) <= rankWorth*g.rate {
		g.calm = min(g.calm+1, settleWindows)
	} else {
		g.calm = 0
	}
	counts := uint32(0)
	if g.calm == settleWindows {
		counts = uint32(a.cfg.SettledCounts)
	}
	if counts == g.counts || a.sd.Session().Version < protocol.Version6 {
		return
	}
	g.counts = counts
	for _, sv := range g.services {
		if err := a.sd.SetLearning(sv.id, a.learning(a.sd, g)); err != nil {
			a.failed("changing the learning's counts", err)
			return
		}
	}
	a.log.Info("learning counts", "group", g.local, "counts", counts, "settled", counts != 0)
}

// learning is how the services of group g learn: by everything after the
// transaction id, not the agent's own asks, g's counts (which santad
// before protocol version 6 does not take: its most).
func (a *agent) learning(sd Santad, g *group) Learning {
	l := Learning{KeyOffset: 2, ProbePort: a.probe.Port(), Enabled: true}
	if sd.Session().Version >= protocol.Version6 {
		l.Counts = g.counts
	}
	return l
}

// worth is what the newcomers that beat the group's edge (its least score
// at the last ranking) bring, by how much they beat it.
func (g *group) worth(newcomers []candidate) float64 {
	var worth float64
	for _, c := range newcomers {
		worth += max(0, c.score-g.edge)
	}
	return worth
}
