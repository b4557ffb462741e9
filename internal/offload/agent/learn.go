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

// learn asks the server a query form once (over TCP if the server takes
// it: askStream; within the window, not 2T: a server busy with its UDP
// flood may take long to get to it), for the names of its answer, finds their zones (SOA,
// the same way), then asks it cfg.Asks times in a row over UDP: the query
// must be safe to offload, and so must the UDP replies, all the same
// (asks in a row see a rotating RRset rotate), with the names of the
// first. The reply is then at least as new as the serials noted, from
// which the zones' pollers follow it.
func (a *agent) learn(ctx context.Context, dst netip.AddrPort, key string) (*learned, error) {
	query := append([]byte{0, 0}, key...)
	if _, err := dnsmsg.CheckQuery(query); err != nil {
		return nil, err
	}
	seq := a.seq.Add(1)
	first, m, err := a.askStream(ctx, dst, query, time.Duration(a.cfg.Window))
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
	reply, rm, err := a.askStable(ctx, dst, query, a.cfg.Asks)
	if err != nil {
		return nil, err
	}
	if !sameZones(rm, first) {
		return nil, &dnsmsg.Skip{Reason: dnsmsg.Unstable, Detail: "the answers before and after the zone lookup have other names"}
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
		_, m, err := a.askStream(ctx, dst, q, time.Duration(a.cfg.Window))
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
			switch {
			case ctx.Err() != nil && errors.Is(err, ctx.Err()):
			case dnsmsg.ReasonOf(err) == dnsmsg.Timeout:
				a.retryLater(g, key)
			default:
				a.skip(g, key, err)
			}
		}()
	}
	wg.Wait()
	return out
}

// maxRetryWait is the most windows a form whose learning keeps running
// out of time waits between tries.
const maxRetryWait = 4

// retryLater has a form whose learning ran out of time on lost asks tried
// again at the next window, then after 2, then 4 windows (maxRetryWait)
// as long as that goes on: the hottest forms are the ones an overloaded
// server needs offloaded most, so they are not skipped for SkipRetry, yet
// a server that stopped answering is not asked for every form each
// window.
func (a *agent) retryLater(g *group, key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := skipKey{g.local, key}
	r := a.retries[k]
	if r == nil {
		r = &retry{}
		a.retries[k] = r
	}
	r.lost++
	r.next = a.windows + uint64(min(1<<min(r.lost-1, 8), maxRetryWait))
	a.stats.learnTimeouts++
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
