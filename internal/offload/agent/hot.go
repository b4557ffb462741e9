package agent

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/santa-offload/santa/internal/offload/batch"
	"github.com/santa-offload/santa/internal/rate"
)

// window chooses each group's offloaded forms: the top MaxRules by
// requests per second, read from the kernel (the rules' hits, and the
// passed requests the hot set counts). An offloaded form keeps its place
// unless a newcomer beats it by the hysteresis factor. Forms that fall
// out are deleted; newcomers are learned, for at most one window, and
// installed on every socket of the group.
func (a *agent) window(ctx context.Context) {
	a.mu.Lock()
	a.windows++
	groups := make([]*group, 0, len(a.groups))
	for _, g := range a.groups {
		groups = append(groups, g)
	}
	a.mu.Unlock()
	for _, g := range groups {
		start := time.Now()
		learnCtx, cancel := context.WithTimeout(ctx, time.Duration(a.cfg.Window))
		keys := a.choose(g)
		learned := a.learnAll(learnCtx, g, keys)
		cancel()
		learning := time.Since(start)
		a.install(g, learned)
		a.log.Debug("window", "group", g.local, "learn", len(keys), "learned", len(learned), "learning", learning, "took", time.Since(start))
		a.mu.Lock()
		for _, k := range keys {
			delete(g.learning, k)
		}
		a.mu.Unlock()
	}
}

// candidate is a form in the running for a group's top set.
type candidate struct {
	key   string
	f     *form // nil: not offloaded yet
	score float64
}

// choose reads the group's rates, deletes the forms that fell out of the
// top set and returns the keys to learn, best first.
func (a *agent) choose(g *group) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.groups[g.local] != g || a.sd == nil {
		return nil
	}
	now := a.now()
	elapsed := now.Sub(g.lastRead).Seconds()
	first := g.lastRead.IsZero()
	g.lastRead = now
	hits := map[*form]uint64{}
	passes := map[string]float64{}
	for _, sv := range g.services {
		for c, err := range a.sd.RuleStats(sv.id) {
			if err != nil {
				a.failed("reading rule stats", err)
				return nil
			}
			f := sv.byRule[c.RuleID]
			if f == nil {
				continue
			}
			last := sv.hits[c.RuleID]
			if c.Hits >= last {
				hits[f] += c.Hits - last
			} else {
				hits[f] += c.Hits // the counter restarted
			}
			sv.hits[c.RuleID] = c.Hits
		}
		hot, err := a.sd.Hot(sv.id, a.cfg.HotMax)
		if err != nil {
			a.failed("reading the hot set", err)
			return nil
		}
		window := hot.Window.Seconds()
		if window <= 0 {
			window = 1
		}
		for _, r := range hot.Requests {
			passes[string(r.Key)] += float64(r.Passes) / window
		}
	}
	var cands []candidate
	boost := 1 + a.cfg.Hysteresis
	for key, f := range g.forms {
		r := passes[key]
		if !first && elapsed > 0 {
			r += float64(hits[f]) / elapsed
		}
		// A form installed during the last window has not had a whole
		// window of hits: it keeps the rate that chose it. Others are
		// smoothed as santad smooths the passes.
		if now.Sub(f.installed) < time.Duration(a.cfg.Window)+time.Duration(a.cfg.Window)/2 {
			r = max(r, f.rate)
		} else {
			r = rate.Smooth(f.rate, r)
		}
		f.rate = r
		cands = append(cands, candidate{key: key, f: f, score: r * boost})
	}
	for key, rate := range passes {
		k := skipKey{g.local, key}
		if _, busy := g.learning[key]; busy || g.forms[key] != nil || now.Before(a.skipped[k]) ||
			a.retries[k] != nil && a.windows < a.retries[k].next {
			continue
		}
		cands = append(cands, candidate{key: key, score: rate})
	}
	slices.SortFunc(cands, func(x, y candidate) int {
		if c := cmp.Compare(y.score, x.score); c != 0 {
			return c
		}
		if (x.f != nil) != (y.f != nil) {
			if x.f != nil {
				return -1
			}
			return 1
		}
		return cmp.Compare(x.key, y.key)
	})
	a.log.Debug("hot set", "group", g.local, "passed", len(passes), "candidates", len(cands))
	var cold []*form
	var learn []string
	for i, c := range cands {
		switch {
		case c.f != nil && i >= a.cfg.MaxRules:
			cold = append(cold, c.f)
		case c.f == nil && i < a.cfg.MaxRules:
			learn = append(learn, c.key)
			g.learning[c.key] = c.score
		}
	}
	a.deleteForms(cold, "cold")
	a.expireSkips(now)
	return learn
}

// expireSkips forgets skips whose time is up, and retries not taken up
// for long (the form is no longer hot). Called with a.mu held.
func (a *agent) expireSkips(now time.Time) {
	for k, until := range a.skipped {
		if now.After(until) {
			delete(a.skipped, k)
		}
	}
	for k, r := range a.retries {
		if a.windows > r.next+4*maxRetryWait {
			delete(a.retries, k)
		}
	}
}

// install offloads learned forms on every socket of the group, unless a
// change of one of their zones was seen after they were asked, within the
// group's byte budget. Called without a.mu.
func (a *agent) install(g *group, ls []*learned) {
	if len(ls) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.groups[g.local] != g || a.sd == nil {
		return
	}
	used := 0
	for _, f := range g.forms {
		used += f.size()
	}
	// Best first, for the budget.
	slices.SortFunc(ls, func(x, y *learned) int {
		return cmp.Or(cmp.Compare(g.learning[y.f.key], g.learning[x.f.key]), cmp.Compare(x.f.key, y.f.key))
	})
	var forms []*form
	for _, l := range ls {
		f := l.f
		if g.forms[f.key] != nil || a.cfg.MaxBytes > 0 && used+f.size() > a.cfg.MaxBytes {
			continue
		}
		zones, ok := a.zonesFor(g.dst, l.zones, f.seq)
		if !ok {
			a.stats.superseded++
			continue
		}
		used += f.size()
		f.group, f.zones = g, zones
		forms = append(forms, f)
	}
	installed := map[*form]bool{}
	for _, sv := range g.services {
		for _, f := range a.addRules(a.sd, sv, forms) {
			installed[f] = true
		}
		if a.sd == nil {
			break
		}
	}
	now := a.now()
	for _, f := range forms {
		if !installed[f] {
			continue
		}
		f.installed = now
		f.rate = g.learning[f.key]
		g.forms[f.key] = f
		delete(a.retries, skipKey{g.local, f.key})
		for _, z := range f.zones {
			a.watch(z, f)
		}
		a.stats.installed++
	}
}

// size is what a form costs in the budget: its pattern and reply bytes.
func (f *form) size() int { return len(f.query) - 2 + len(f.reply) }

// deleteForms deletes forms' rules from every socket of their group and
// forgets them. Called with a.mu held.
func (a *agent) deleteForms(forms []*form, cause string) {
	byService := map[*service][]uint32{}
	for _, f := range forms {
		for _, sv := range f.group.services {
			if id, ok := sv.unnote(f); ok {
				byService[sv] = append(byService[sv], id)
			}
		}
		a.dropForm(f, cause)
	}
	for sv, ids := range byService {
		if a.sd == nil {
			return // the next connection's resync deletes what is left
		}
		a.deleteRules(sv, ids)
	}
}

// deleteRules deletes rules of a service (deleteIDs), failing the
// connection if santad refuses. Called with a.mu held.
func (a *agent) deleteRules(sv *service, ids []uint32) {
	if err := a.deleteIDs(a.sd, sv.id, ids); err != nil {
		a.failed("deleting rules", err)
	}
}

// deleteIDs deletes rules of a service (batch.Delete), warning of any
// santad does not have (none should be missing; if one is, santad's word
// is the truth).
func (a *agent) deleteIDs(sd Santad, service uint32, ids []uint32) error {
	return batch.Delete(ids, func(b []uint32) error { return sd.DeleteRules(service, b) }, func(id uint32) {
		a.log.Warn("santad has no such rule", "service", service, "rule", id)
	})
}

// dropForm forgets a form whose rules are gone, counting it under cause:
// its group no longer has it and its zones no longer follow it. Called
// with a.mu held.
func (a *agent) dropForm(f *form, cause string) {
	if f.group.forms[f.key] != f {
		return // dropped already
	}
	delete(f.group.forms, f.key)
	for _, z := range f.zones {
		delete(z.forms, f)
	}
	if cause != "" {
		a.stats.deleted[cause]++
	}
}
