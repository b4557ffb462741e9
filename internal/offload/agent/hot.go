package agent

import (
	"cmp"
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/santa-offload/santa/internal/offload/batch"
	"github.com/santa-offload/santa/internal/offload/dnsmsg"
	"github.com/santa-offload/santa/internal/offload/santadconn"
	"github.com/santa-offload/santa/internal/rate"
	"github.com/santa-offload/santa/rule"
)

// window chooses each group's offloaded forms: the top MaxRules by
// requests per second, read from the kernel (the rules' hits, and the
// passed requests the hot set counts). An offloaded form keeps its place
// unless a newcomer's least rate beats it by the hysteresis factor. Forms
// that fall out are deleted; newcomers are learned, for at most one
// window, and installed on every socket of the group.
func (a *agent) window(ctx context.Context) {
	a.mu.Lock()
	a.windows++
	groups := make([]*group, 0, len(a.groups))
	for _, g := range a.groups {
		groups = append(groups, g)
	}
	a.mu.Unlock()
	a.sighted.expire(a.now())
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

// candidate is a form in the running for a group's top set: score ranks
// it; rate is its queries a second (a newcomer's: its passed ones).
type candidate struct {
	key   string
	f     *form // nil: not offloaded yet
	score float64
	rate  float64
}

// evidenceSpan is how many windows a generation of the newcomers'
// evidence spans: a form's least rate rests on up to twice as many.
const evidenceSpan = 8

// choose reads the group's rates, deletes the forms that fell out of the
// top set and returns the keys to learn, best first. With more than
// rankForms forms it ranks them every few windows only (rankEvery),
// admitting newcomers into free room in between; with its top set full,
// only when the newcomers beat the last ranking's edge by enough, or
// every rankIdle rankings' spans (rankDue).
func (a *agent) choose(g *group) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.groups[g.local] != g || a.sd == nil {
		return nil
	}
	now := a.now()
	passes, hotWindow, share, ok := a.readHot(g)
	if !ok {
		return nil
	}
	newcomers := a.newcomers(g, passes, hotWindow, share, now)
	g.windows++
	worth := g.worth(newcomers)
	if !a.settle(g, worth) {
		return nil
	}
	var learn []string
	if !a.rankDue(g, newcomers, worth) {
		// Admitted: the best newcomers, into the room below MaxRules.
		admitted := selectBest(newcomers, max(0, a.cfg.MaxRules-len(g.forms)), byScore)
		slices.SortFunc(admitted, byScore)
		for _, c := range admitted {
			learn = append(learn, c.key)
			g.learning[c.key] = c.rate
		}
		a.expireSkips(now)
		return learn
	}
	if !a.readHits(g) {
		return nil
	}
	elapsed := now.Sub(g.ranked)
	if g.hitsSince.After(g.ranked) {
		elapsed = now.Sub(g.hitsSince) // the hits read are since then
	}
	every := time.Duration(a.rankEvery(len(g.forms))) * time.Duration(a.cfg.Window)
	first := g.ranked.IsZero()
	g.ranked, g.rankedAt = now, g.windows
	// The passes of offloaded forms (those whose rules came during the
	// hot set's window), found from the passes, a fifth as many as the
	// forms at 1M names: looking each form's key up in the passes instead
	// (100,000 strings hashed) was most of the time a ranking spent in
	// choose itself.
	passed := map[*form]float64{}
	for key, r := range passes {
		if f := g.forms[key]; f != nil {
			passed[f] = r
		}
	}
	cands := append(make([]candidate, 0, len(newcomers)+len(g.forms)), newcomers...)
	boost := 1 + a.cfg.Hysteresis
	for key, f := range g.forms {
		r := passed[f]
		// Hits since the last ranking, over the part of that time the
		// form had its rule if it had it for a window at least (a form
		// installed between rankings); a form younger than that keeps the
		// rate that chose it, below, and a few hits over a few
		// milliseconds must not read as thousands a second.
		span := elapsed
		if since := now.Sub(f.installed); since >= time.Duration(a.cfg.Window) && since < span {
			span = since
		}
		spans := 1.0 // the first ranking read no hits: one window's passes
		if !first && span > 0 {
			r += float64(f.hits) / span.Seconds()
			spans = float64(span) / float64(every)
		}
		f.hits = 0
		// A form installed during the last window has not had a whole
		// window of hits: it keeps the rate that chose it. Others are
		// smoothed as santad smooths the passes, a ranking's usual span
		// (rankEvery windows) weighing as one window: a longer span
		// (rankIdle) weighs as that many. (Each window of the span weighing
		// as one made the rates noisy at the edge: at 100,000 forms, 2.5
		// times as many were displaced, each learned anew.)
		if now.Sub(f.installed) < time.Duration(a.cfg.Window)+time.Duration(a.cfg.Window)/2 {
			r = max(r, f.rate)
		} else {
			r = rate.SmoothOver(f.rate, r, spans)
		}
		f.rate = r
		cands = append(cands, candidate{key: key, f: f, score: r * boost, rate: r})
	}
	top := selectBest(cands, a.cfg.MaxRules, byScore)
	g.full, g.edge, g.rate = len(top) == a.cfg.MaxRules, 0, 0
	if g.full {
		g.edge = slices.MinFunc(top, func(x, y candidate) int { return cmp.Compare(x.score, y.score) }).score
		for _, c := range top {
			g.rate += c.rate
		}
	}
	a.log.Debug("hot set", "group", g.local, "passed", len(passes), "candidates", len(cands))
	var cold []*form
	for _, c := range cands[len(top):] {
		if c.f != nil {
			cold = append(cold, c.f)
		}
	}
	top = slices.DeleteFunc(top, func(c candidate) bool { return c.f != nil })
	slices.SortFunc(top, byScore)
	for _, c := range top {
		learn = append(learn, c.key)
		g.learning[c.key] = c.rate
	}
	a.deleteForms(cold, "cold")
	a.expireSkips(now)
	return learn
}

// selectBest reorders s so that its first k elements are the best k by
// cmp (least first), in no particular order, and returns them: a ranking
// needs which candidates are in the top set, not the order of all of
// them, and sorting 120,000 candidates every ranking was 1.5 % of the
// server's core at 1M names (docs/benchmarks.md (h)). Quickselect with a
// three-way partition (many candidates share a score): expected time
// linear in len(s).
func selectBest[E any](s []E, k int, cmp func(x, y E) int) []E {
	k = min(max(k, 0), len(s))
	lo, hi := 0, len(s) // the k-th least lies in s[lo:hi]
	for lo < k && k < hi {
		p := s[lo+rand.IntN(hi-lo)]
		// s[lo:lt] is less than p, s[lt:i] the same, s[gt:hi] more.
		lt, i, gt := lo, lo, hi
		for i < gt {
			switch c := cmp(s[i], p); {
			case c < 0:
				s[lt], s[i] = s[i], s[lt]
				lt++
				i++
			case c > 0:
				gt--
				s[i], s[gt] = s[gt], s[i]
			default:
				i++
			}
		}
		switch {
		case k < lt:
			hi = lt
		case k > gt:
			lo = gt
		default:
			return s[:k]
		}
	}
	return s[:k]
}

// rankForms is how many offloaded forms of a group one window ranks: with
// more, they are ranked every rankEvery windows. Each ranking weighs every
// form (its hits read through santad, its rate, a selection): at 1M names the
// ranking was a fifth of the agent's time, and santad's reading of the
// counters grew with the forms (docs/benchmarks.md (h)).
const rankForms = 25000

// rankEvery is how many windows go from one ranking of n forms to the
// next, at least.
func (a *agent) rankEvery(n int) uint64 { return uint64(max(1, (n+a.rankForms-1)/a.rankForms)) }

// rankIdle is how many rankEvery spans a full top set goes unranked
// while the newcomers that beat its edge bring little (rankWorth): a
// ranking would displace only forms that serve about as many queries
// as their newcomers, each learned anew, and the offloaded forms that
// cooled since the last, which the ranking after rankIdle spans finds.
// Every 4 windows at 100,000 forms, reading the rules' hits was 1.4 % of
// the server's core in santad and 1.0 % in the agent (docs/benchmarks.md
// (h)).
const rankIdle = 4

// rankWorth is the share of the top set's queries a second that the
// newcomers beating its edge must bring for a ranking before rankIdle
// spans: at 1M names and 100,000 forms, a hundred newcomers or so beat
// the edge at every ranking by a fraction of a query a second each, and
// a popularity that shifts, or a single name that turns hot, brings
// thousands of queries a second.
const rankWorth = 0.001

// rankDue is whether this window ranks the group's forms: the first
// window, then at most every rankEvery windows, and at those only when
// the newcomers outnumber the room left below MaxRules (under a MaxBytes
// budget, always: the room in bytes is known only to install), and then
// while the top set has room, or after rankIdle spans, or when the
// newcomers whose score beats the least score in the top set at the last
// ranking (its edge) bring, by how much they beat it (worth), rankWorth
// of the set's rate. Called with a.mu held.
func (a *agent) rankDue(g *group, newcomers []candidate, worth float64) bool {
	if g.ranked.IsZero() {
		return true
	}
	every := a.rankEvery(len(g.forms))
	since := g.windows - g.rankedAt
	room := a.cfg.MaxBytes == 0 && len(g.forms)+len(newcomers) <= a.cfg.MaxRules
	switch {
	case since < every || room:
		return false // too soon, or every newcomer fits: none displaces a form
	case !g.full || since >= rankIdle*every:
		return true
	}
	return worth > rankWorth*g.rate
}

// readHot reads the hot sets of the group's sockets, merged
// (santadconn.HotRates): each passed form's queries a second, the longest
// of their windows, in seconds, and the least share of passed queries
// they counted. Called with a.mu held.
func (a *agent) readHot(g *group) (passes map[string]float64, window, share float64, ok bool) {
	passes, w, share, err := santadconn.HotRates(a.sd.Hot, maps.Keys(g.services), a.cfg.HotMax)
	if err != nil {
		a.failed("reading the hot set", err)
		return nil, 0, 0, false
	}
	return passes, w.Seconds(), share, true
}

// readHits adds to each form's hits those of its rules since they were
// last read, over the group's sockets. Called with a.mu held.
func (a *agent) readHits(g *group) bool {
	for _, sv := range g.services {
		err := santadconn.HitDeltas(a.sd.RuleStats(sv.id), sv.hits, func(rule uint32, n uint64) bool {
			f := sv.byRule[rule]
			if f != nil {
				f.hits += n
			}
			return f != nil
		})
		if err != nil {
			a.failed("reading rule stats", err)
			for _, f := range g.forms {
				f.hits = 0 // a ranking's hits are all its span's, or none
			}
			return false
		}
	}
	return true
}

// newcomers are the passed forms not offloaded, being learned or skipped
// for now, each scored by the least rate its passed queries show, over
// this window and the last ones (rate.Evidence), not its count of the
// last window: at the edge of a top 100,000 of 1M Zipf names, rates are
// a fraction of a query a second, and the tail's chance pairs displaced
// 2,200 forms a second, each asked three times and installed, for no gain
// (docs/benchmarks.md (h)). The least rate rests on the queries the data
// plane counted, share of those passed. Called with a.mu held.
func (a *agent) newcomers(g *group, passes map[string]float64, window, share float64, now time.Time) []candidate {
	g.evidence.Window()
	var out []candidate
	for key, r := range passes {
		k := skipKey{g.local, key}
		if _, busy := g.learning[key]; busy || g.forms[key] != nil || now.Before(a.skipped[k]) ||
			a.retries[k] != nil && a.windows < a.retries[k].next {
			continue
		}
		seen := rate.Scaled(r*window, share)
		g.evidence.Add(key, seen)
		out = append(out, candidate{key: key, score: g.evidence.Least(key, seen, window), rate: r})
	}
	return out
}

// byScore orders candidates best first: by score, an offloaded form before
// a newcomer of the same score, then by key.
func byScore(x, y candidate) int {
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
// group's byte budget. Called without a.mu. santad rebuilds a service's
// index at every batch of rules (a window's newcomers took up to 170 ms
// with 70,000 rules installed, at 1M names): they are added without a.mu,
// so that the zone pollers, their re-checks and commits never wait behind
// an install (docs/offload-dns.md, "Bound"). Meanwhile the forms are
// watched by their zones: a batch's forms whose zone changed are not
// added to the next socket, and their rules, of answers that may be old,
// are deleted as soon as the add that carried them returns.
func (a *agent) install(g *group, ls []*learned) {
	if len(ls) == 0 {
		return
	}
	a.mu.Lock()
	a.bestFirst(g, ls)
	a.mu.Unlock()
	fresh := a.serialsNow(g, ls)
	a.mu.Lock()
	if a.groups[g.local] != g || a.sd == nil {
		a.mu.Unlock()
		return
	}
	forms := a.installable(g, ls, fresh)
	rules := rulesOf(forms)
	sd, services := a.sd, slices.Collect(maps.Values(g.services))
	a.mu.Unlock()
	for len(forms) > 0 {
		n := batch.Fitting(rules, ruleSize)
		added := make([]map[*form]uint32, len(services))
		for i, sv := range services {
			a.mu.Lock()
			liveForms, liveRules := unchanged(forms[:n], rules[:n])
			dropped := a.sd != sd
			a.mu.Unlock()
			if dropped {
				break // the rest are not added, and their zones forget them
			}
			var err error
			added[i], err = a.addBuilt(sd, sv.id, liveForms, liveRules)
			a.mu.Lock()
			if err != nil && a.sd == sd {
				a.failed("adding rules", err) // a refusal (the service ended) stops only this socket's add
			}
			a.deleteSuperseded(sd, sv, added[i])
			a.mu.Unlock()
		}
		a.mu.Lock()
		a.noteInstalled(g, sd, forms[:n], services, added)
		a.mu.Unlock()
		forms, rules = forms[n:], rules[n:]
	}
}

// unchanged is the forms, and their rules, no change of whose zones was
// seen after they were asked. Called with a.mu held.
func unchanged(forms []*form, rules []rule.Rule) ([]*form, []rule.Rule) {
	var fs []*form
	var rs []rule.Rule
	for i, f := range forms {
		if !changedSince(f.zones, f.seq) {
			fs, rs = append(fs, f), append(rs, rules[i])
		}
	}
	return fs, rs
}

// deleteSuperseded deletes from a service the rules just added (added)
// of forms a change of whose zones was seen after they were asked, and
// leaves them out of added. Called with a.mu held.
func (a *agent) deleteSuperseded(sd Santad, sv *service, added map[*form]uint32) {
	var ids []uint32
	for f, id := range added {
		if changedSince(f.zones, f.seq) {
			ids = append(ids, id)
			delete(added, f)
		}
	}
	if len(ids) > 0 && a.sd == sd {
		a.deleteRules(sv, ids)
	}
}

// bestFirst sorts learned forms best first: the free zones (max_zones)
// and the byte budget go to them. Called with a.mu held.
func (a *agent) bestFirst(g *group, ls []*learned) {
	slices.SortFunc(ls, func(x, y *learned) int {
		return cmp.Or(cmp.Compare(g.learning[y.f.key], g.learning[x.f.key]), cmp.Compare(x.f.key, y.f.key))
	})
}

// installable is the learned forms to install (ls, best first:
// bestFirst), within the group's byte budget and max_zones, each already
// watched by its zones; fresh are the zones not followed yet, their
// serials asked just now (serialsNow). Called with a.mu held.
func (a *agent) installable(g *group, ls []*learned, fresh map[zoneKey]*zone) []*form {
	used := 0
	if a.cfg.MaxBytes > 0 { // a walk of every form, each window: only for a budget
		for _, f := range g.forms {
			used += f.size()
		}
	}
	var forms []*form
	for _, l := range ls {
		f := l.f
		if g.forms[f.key] != nil || a.cfg.MaxBytes > 0 && used+f.size() > a.cfg.MaxBytes {
			continue
		}
		if len(a.zones)+a.newZones(g.dst, l) > a.cfg.MaxZones {
			if a.stats.skipped[dnsmsg.ZoneLimit] == 0 {
				a.log.Warn("following max_zones zones: forms of further zones are skipped (zone_limit)", "max_zones", a.cfg.MaxZones)
			}
			a.skipLocked(g, f.key, dnsmsg.ZoneLimit)
			continue
		}
		zones, ok := a.zonesFor(g.dst, l, fresh)
		if !ok {
			a.stats.superseded++
			continue
		}
		used += f.size()
		f.group, f.zones = g, zones
		for _, z := range zones {
			a.watch(z, f)
		}
		forms = append(forms, f)
	}
	return forms
}

// noteInstalled records the rules install added (added[i]: on
// services[i]), if the connection is still sd: a form has its rule on
// every service still the group's. A form a change of whose zones was
// seen after it was asked has its rules deleted again. Called with a.mu
// held.
func (a *agent) noteInstalled(g *group, sd Santad, forms []*form, services []*service, added []map[*form]uint32) {
	current := a.sd == sd && a.groups[g.local] == g
	stale := map[*service][]uint32{}
	var kept []*form
	now := a.now()
	for _, f := range forms {
		superseded := changedSince(f.zones, f.seq)
		on := false
		for i, sv := range services {
			id, ok := added[i][f]
			switch {
			case !ok || !current || g.services[sv.id] != sv: // its rules ended with the service
			case superseded:
				stale[sv] = append(stale[sv], id)
			default:
				sv.note(f, id)
				on = true
			}
		}
		if !on {
			if current && superseded {
				a.stats.superseded++
			}
			for _, z := range f.zones {
				delete(z.forms, f)
			}
			continue
		}
		f.installed = now
		f.rate = g.learning[f.key]
		g.forms[f.key] = f
		f.inLine = a.line.PushBack(f)
		delete(a.retries, skipKey{g.local, f.key})
		a.stats.installed++
		kept = append(kept, f)
	}
	for sv, ids := range stale {
		if a.sd != nil {
			a.deleteRules(sv, ids)
		}
	}
	// A socket that joined the group meanwhile, or refused a form (a
	// joining socket's old rule of the same query, deleted since), gets
	// them now.
	for _, sv := range g.services {
		var lacking []*form
		for _, f := range kept {
			if _, on := sv.rules[f]; !on {
				lacking = append(lacking, f)
			}
		}
		if a.sd != nil && len(lacking) > 0 {
			a.addRules(a.sd, sv, lacking)
		}
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
	a.line.Remove(f.inLine)
	for _, z := range f.zones {
		delete(z.forms, f)
	}
	if cause != "" {
		a.stats.deleted[cause]++
	}
}
