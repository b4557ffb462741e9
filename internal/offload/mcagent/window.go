package mcagent

import (
	"cmp"
	"context"
	"iter"
	"slices"
	"time"

	"github.com/santa-offload/santa/internal/offload/santadconn"
	"github.com/santa-offload/santa/internal/offload/server"
	"github.com/santa-offload/santa/internal/rate"
)

// follow runs a window when santad's hot sets make one due
// (santadconn.Follower). Only the window loop calls it.
func (a *agent) follow(ctx context.Context) {
	if a.follower.Due(a.now(), a.hotNumber) {
		a.window(ctx)
	}
}

// hotNumber is the number of the newest hot set of the UDP services
// (santadconn.HotNumber).
func (a *agent) hotNumber() (uint32, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sd == nil {
		return 0, false
	}
	return santadconn.HotNumber(a.sd.Hot, serviceIDs(a.udpServices()))
}

// window keeps the offloaded keys the hot ones: it reads the rates (the
// rules' hits and the passed gets the kernel counted), deletes the keys
// that fell out of the top MaxRules, and learns the newcomers and the
// offloaded keys whose rule needs its item read again: one that passes
// gets (its guard died: a write, an expiry, a flush), one past its
// deadline, one read longer than MaxAge ago.
func (a *agent) window(ctx context.Context) {
	a.pollEvictions(ctx)
	wants := a.choose()
	if len(wants) == 0 {
		return
	}
	start := a.now()
	ctx, cancel := context.WithTimeout(ctx, time.Duration(a.cfg.Window))
	defer cancel()
	learned := a.learnAll(ctx, wants)
	a.install(learned)
	a.log.Debug("window", "learn", len(wants), "learned", len(learned.keys), "took", a.now().Sub(start))
}

// want is a key to learn: a newcomer (old nil) or an offloaded key to read
// again.
type want struct {
	form string
	mkey []byte
	rate float64
	old  *key
}

// candidate is a hot form in the running for the top set: score ranks
// it; a newcomer's rate is its passed gets a second, which its key starts
// with.
type candidate struct {
	form  string
	mkey  []byte
	k     *key // nil: not offloaded
	score float64
	rate  float64
}

// choose reads the rates, deletes the keys that fell out of the top set
// and returns what to learn, best first. With more than rankKeys keys it
// ranks them every few windows only (rankEvery), admitting newcomers into
// free room in between.
func (a *agent) choose() []want {
	a.mu.Lock()
	defer a.mu.Unlock()
	udp := a.udpServices()
	if a.sd == nil || a.leader == nil || len(udp) == 0 {
		return nil
	}
	now := a.now()
	passes, hotWindow, share, ok := a.hotPasses(udp)
	if !ok {
		return nil
	}
	newcomers := a.newcomers(passes, hotWindow, share, now)
	a.windows++
	if (a.windows-1)%a.rankEvery() != 0 {
		return a.admit(newcomers, passes, hotWindow, now)
	}
	elapsed := now.Sub(a.lastRead).Seconds()
	first := a.lastRead.IsZero()
	a.lastRead = now
	hits, ok := a.ruleHits(udp)
	if !ok {
		return nil
	}
	// An offloaded key's score is its rate times 1 + hysteresis; a
	// newcomer's is the least rate its gets show (newcomers).
	score := func(k *key) float64 { return k.rate * (1 + a.cfg.Hysteresis) }
	for _, k := range a.keys {
		r := passes[k.form]
		if !first && elapsed > 0 {
			r += float64(hits[k]) / elapsed
		}
		// A key learned during the last window has not had a whole
		// window of hits: it keeps the rate that chose it. Others are
		// smoothed as santad smooths the passes.
		if now.Sub(k.learned) < time.Duration(a.cfg.Window)*3/2 {
			r = max(r, k.rate)
		} else {
			r = rate.Smooth(k.rate, r)
		}
		k.rate = r
	}
	// The offloaded keys sorted by rate are also the watch's order: one
	// sort of them a ranking (100,000 keys), and the few newcomers merged in.
	offloaded := a.sortedKeys()
	var cold []*key
	var wants []want
	i := 0
	for c := range merged(offloaded, newcomers, score) {
		switch {
		case c.k != nil && i >= a.cfg.MaxRules:
			cold = append(cold, c.k)
		case c.k == nil && i < a.cfg.MaxRules:
			wants = append(wants, want{form: c.form, mkey: c.mkey, rate: c.rate})
		case c.k != nil && a.stale(c.k, passes[c.form] > 0, hotWindow, now):
			wants = append(wants, want{form: c.form, mkey: c.mkey, rate: c.k.rate, old: c.k})
		}
		i++
	}
	a.deleteKeys(cold, "cold")
	a.watched = slices.DeleteFunc(offloaded, func(k *key) bool { return a.keys[k.form] != k })
	for form, until := range a.skipped {
		if now.After(until) {
			delete(a.skipped, form)
		}
	}
	return wants
}

// rankKeys is how many offloaded keys one window ranks: with more, they
// are ranked every rankEvery windows. Each ranking weighs every key (its
// hits, its rate, a sort); at 100,000 keys, doing it every second took a
// fifth of the server core on this VM (docs/benchmarks.md (j)).
const rankKeys = 25000

// rankEvery is how many windows go from one ranking to the next. Called
// with a.mu held.
func (a *agent) rankEvery() uint64 {
	return uint64(max(1, (len(a.keys)+a.rankKeys-1)/a.rankKeys))
}

// evidenceSpan is how many windows a generation of the newcomers'
// evidence spans: a form's least rate rests on up to twice as many.
const evidenceSpan = 8

// newcomers are the hot forms not offloaded (nor skipped for now), best
// first, each scored by the least rate its passed gets show over this
// window and the last ones (rate.Evidence): at the edge of a hot set of
// 100,000 keys, rates are a fraction of a get a second, and raw counts let
// the tail's chance pairs swap a thousand keys a second with the hot set's
// edge (each a read of memcached, a delete and an add), which took a
// third of the server core (docs/benchmarks.md (j)). The least rate
// rests on the gets the data plane counted, share of those passed.
// Called with a.mu held.
func (a *agent) newcomers(passes map[string]float64, hotWindow time.Duration, share float64, now time.Time) []candidate {
	window := hotWindow.Seconds()
	a.evidence.Window()
	var out []candidate
	for form, r := range passes {
		if a.keys[form] != nil || now.Before(a.skipped[form]) {
			continue
		}
		mkey, err := getKey([]byte(form))
		if err != nil {
			a.skip(form, err)
			continue
		}
		seen := rate.Scaled(r*window, share)
		a.evidence.Add(form, seen)
		out = append(out, candidate{form: form, mkey: mkey, rate: r, score: a.evidence.Least(form, seen, window)})
	}
	slices.SortFunc(out, byScore)
	return out
}

// admit is a window between rankings: the best newcomers fill the room
// below MaxRules, and offloaded keys whose gets pass (a dead rule) are
// read again; displacing keys, and reading them again at their deadline
// or max_age, wait for the next ranking. Called with a.mu held.
func (a *agent) admit(newcomers []candidate, passes map[string]float64, hotWindow time.Duration, now time.Time) []want {
	var wants []want
	for form := range passes {
		if k := a.keys[form]; k != nil && a.stale(k, true, hotWindow, now) {
			wants = append(wants, want{form: form, mkey: k.mkey, rate: k.rate, old: k})
		}
	}
	room := max(0, a.cfg.MaxRules-len(a.keys))
	for _, c := range newcomers[:min(room, len(newcomers))] {
		wants = append(wants, want{form: c.form, mkey: c.mkey, rate: c.rate})
	}
	return wants
}

// byScore orders candidates best first: by score, an offloaded key before
// a newcomer of the same score, then the older offloaded key, or the
// newcomers by form.
func byScore(x, y candidate) int {
	if c := cmp.Compare(y.score, x.score); c != 0 {
		return c
	}
	switch {
	case x.k != nil && y.k != nil:
		return cmp.Compare(x.k.seq, y.k.seq)
	case x.k != nil:
		return -1
	case y.k != nil:
		return 1
	}
	return cmp.Compare(x.form, y.form)
}

// merged yields the offloaded keys (sorted by rate, score rising with it)
// and the newcomers (sorted byScore) as one list in byScore's order.
func merged(offloaded []*key, newcomers []candidate, score func(*key) float64) iter.Seq[candidate] {
	return func(yield func(candidate) bool) {
		j := 0
		for _, k := range offloaded {
			c := candidate{form: k.form, mkey: k.mkey, k: k, score: score(k)}
			for ; j < len(newcomers) && byScore(newcomers[j], c) < 0; j++ {
				if !yield(newcomers[j]) {
					return
				}
			}
			if !yield(c) {
				return
			}
		}
		for _, c := range newcomers[j:] {
			if !yield(c) {
				return
			}
		}
	}
}

// stale is whether an offloaded key's item must be read again: its gets
// passed in the last complete hot window although its rule was installed
// before that window began (at least two windows ago: the rule no longer
// answers), its deadline is near, or it was read MaxAge ago and memcached
// has evicted items since (pollEvictions). Called with a.mu held.
func (a *agent) stale(k *key, passing bool, hotWindow time.Duration, now time.Time) bool {
	age := now.Sub(k.learned)
	return passing && age >= 2*hotWindow && !a.writeHot(k, now) ||
		!k.deadline.IsZero() && !now.Before(k.deadline.Add(-time.Duration(a.cfg.ExpiryMargin))) ||
		age >= time.Duration(a.cfg.MaxAge) && a.evictedAt.After(k.learned)
}

// pollEvictions reads memcached's eviction counters, and notes when they
// were last seen to move (or could not be read): only an item read before
// that may have left memcached with no write, and need be read again at
// MaxAge. At 100,000 keys and a 30-s MaxAge, reading every key again
// regardless cost 3,300 reads of memcached and santad a second. Called
// without a.mu.
func (a *agent) pollEvictions(ctx context.Context) {
	a.mu.Lock()
	leader := a.leader
	a.mu.Unlock()
	if leader == nil {
		return
	}
	n, err := a.items.Evictions(ctx, server.AskAddr(leader.local), time.Duration(a.cfg.ProbeTimeout))
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil && ctx.Err() == nil {
		a.log.Warn("reading memcached's eviction counters", "err", err)
	}
	if err != nil || !a.evictionsRead || n != a.evictions {
		a.evictedAt = a.now()
	}
	a.evictions, a.evictionsRead = n, err == nil
}

// ruleHits reads the hits of each key's rules since the last read, over
// every UDP service. Called with a.mu held.
func (a *agent) ruleHits(udp []*service) (map[*key]uint64, bool) {
	hits := map[*key]uint64{}
	for _, sv := range udp {
		err := santadconn.HitDeltas(a.sd.RuleStats(sv.id), sv.hits, func(rule uint32, n uint64) bool {
			k := sv.byRule[rule]
			if k != nil {
				hits[k] += n
			}
			return k != nil
		})
		if err != nil {
			a.failed("reading rule stats", err)
			return nil, false
		}
	}
	return hits, true
}

// hotPasses reads the passed gets of the kernel's last complete hot
// window per second, over every UDP service (santadconn.HotRates), how
// long that window is, and the least share of passed gets they counted.
// Called with a.mu held.
func (a *agent) hotPasses(udp []*service) (passes map[string]float64, hotWindow time.Duration, share float64, ok bool) {
	passes, hotWindow, share, err := santadconn.HotRates(a.sd.Hot, serviceIDs(udp), a.cfg.HotMax)
	if err != nil {
		a.failed("reading the hot set", err)
		return nil, 0, 0, false
	}
	return passes, hotWindow, share, true
}

// skip counts a hot form not offloaded now; one that cannot be (not a
// plain get, a reply too large) is not tried again for SkipRetry.
func (a *agent) skip(form string, err error) {
	reason := skipReason(err)
	if reason == "error" {
		a.log.Warn("learning", "form", form, "err", err)
	}
	a.stats.skipped[reason]++
	switch reason {
	case skipForm, skipLongKey, skipTooLarge, skipRefused:
		a.skipped[form] = a.now().Add(time.Duration(a.cfg.SkipRetry))
	}
}
