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
// and window instead of its most (model.MaxLearnCounts); the first window
// whose newcomers bring more asks for the most again. A popularity that
// shifts still shows: a name turned hot is counted in proportion, and
// the newcomers' least rates rest on the counts (rate.Scaled).
const settleWindows = 3

// settle follows whether the group's top set is settled, by the worth of
// this window's newcomers, and asks santad for the counts that go with it
// when that changes: on every socket of the group, or again the next
// window if santad refused one. It returns false if the connection to
// santad failed (the group's services are gone with it). Called with a.mu
// held.
func (a *agent) settle(g *group, worth float64) bool {
	if g.full && worth <= rankWorth*g.rate {
		g.calm = min(g.calm+1, settleWindows)
	} else {
		g.calm = 0
	}
	counts := uint32(0)
	if g.calm == settleWindows {
		counts = uint32(a.cfg.SettledCounts)
	}
	if counts == g.counts || a.sd.Session().Version < protocol.Version6 {
		return true
	}
	all := true
	for _, sv := range g.services {
		if err := a.sd.SetLearning(sv.id, a.learning(a.sd, counts)); err != nil {
			a.failed("changing the learning's counts", err)
			if a.sd == nil {
				return false
			}
			all = false
		}
	}
	if all {
		g.counts = counts
		a.log.Info("learning counts", "group", g.local, "counts", counts, "settled", counts != 0)
	}
	return true
}

// learning is how the agent's services learn: by everything after the
// transaction id, not the agent's own asks, counts a CPU and window (0:
// santad's most; santad before protocol version 6 takes only that).
func (a *agent) learning(sd Santad, counts uint32) Learning {
	l := Learning{KeyOffset: 2, ProbePort: a.probe.Port(), Enabled: true}
	if sd.Session().Version >= protocol.Version6 {
		l.Counts = counts
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
