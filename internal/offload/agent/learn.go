package agent

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"time"

	"github.com/santa-offload/santa/internal/offload/dnsmsg"
)

// learned is a form learned: its reply, and the zones (apex, serial when
// asked) its answer comes from.
type learned struct {
	f     *form
	zones []zoneSeen
}

type zoneSeen struct {
	apex   dnsmsg.Name
	serial uint32
}

// learn asks the server a query form once, then cfg.Asks times in a row:
// the query must be safe to offload, and so must the replies, all the
// same (asks in a row see a rotating RRset rotate). Between the first ask
// and the others, the zones of the answer's names are found (SOA): the
// reply is then at least as new as the serials noted, from which the
// zones' pollers follow it.
func (a *agent) learn(ctx context.Context, dst netip.AddrPort, key string) (*learned, error) {
	query := append([]byte{0, 0}, key...)
	if _, err := dnsmsg.CheckQuery(query); err != nil {
		return nil, err
	}
	seq := a.seq.Add(1)
	first, m, err := a.askStable(ctx, dst, query, 1)
	if err != nil {
		return nil, err
	}
	var zones []zoneSeen
	seen := map[string]bool{}
	for _, name := range m.ZoneNames() {
		apex, serial, err := a.zoneOf(ctx, dst, name)
		if err != nil {
			return nil, err
		}
		if !seen[apex.Key()] {
			seen[apex.Key()] = true
			zones = append(zones, zoneSeen{apex, serial})
		}
	}
	reply, _, err := a.askStable(ctx, dst, query, a.cfg.Asks)
	if err != nil {
		return nil, err
	}
	if string(reply) != string(first) {
		return nil, &dnsmsg.Skip{Reason: dnsmsg.Unstable, Detail: "the replies before and after the zone lookup differ"}
	}
	return &learned{f: &form{key: key, query: query, reply: reply, seq: seq, checked: a.now()}, zones: zones}, nil
}

// zoneOf asks the SOA of name: the zone it is in, and its serial. A name
// that owns a CNAME (or lies under a DNAME) is answered with that chain,
// and the SOA that follows is the target's zone: its own zone is then its
// parent's, as no zone cut can lie between a name and its parent there.
func (a *agent) zoneOf(ctx context.Context, dst netip.AddrPort, name dnsmsg.Name) (dnsmsg.Name, uint32, error) {
	for {
		q := dnsmsg.NewQuery(name, dnsmsg.TypeSOA, dnsmsg.ClassIN)
		_, m, err := a.askStable(ctx, dst, q, 1)
		if err != nil {
			return nil, 0, err
		}
		if len(m.Answer) == 0 || m.Answer[0].Type == dnsmsg.TypeSOA || name.Labels() == 0 {
			return m.Apex()
		}
		name = name.Parent()
	}
}

// learnAll learns keys at once (the probe socket bounds the asks in
// flight) until ctx ends, counting skips by reason. Keys not learned when
// ctx ends are neither counted nor remembered: the next window may pick
// them again.
func (a *agent) learnAll(ctx context.Context, g *group, keys []string) []*learned {
	var mu sync.Mutex
	var out []*learned
	var wg sync.WaitGroup
	for _, key := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := a.learn(ctx, g.dst, key)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				out = append(out, l)
				return
			}
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return
			}
			a.skip(g, key, err)
		}()
	}
	wg.Wait()
	return out
}

// skip counts a form not offloaded and keeps it from being tried again
// for a while.
func (a *agent) skip(g *group, key string, err error) {
	reason := dnsmsg.ReasonOf(err)
	if reason == "" {
		reason = "error"
		a.log.Warn("learning", "group", g.local, "err", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stats.skipped[reason]++
	a.skipped[skipKey{g.local, key}] = a.now().Add(time.Duration(a.cfg.SkipRetry))
}
