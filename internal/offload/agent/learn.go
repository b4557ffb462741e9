package agent

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/santa-offload/santa/internal/offload/dnsmsg"
	"github.com/santa-offload/santa/internal/offload/workers"
)

// learned is a form learned: its reply, and the zones (apex, serial when
// asked) its records come from.
type learned struct {
	f     *form
	zones []zoneSeen
	asked time.Time // when the reply installed was first asked
}

type zoneSeen struct {
	apex   dnsmsg.Name
	serial uint32
}

// learn finds the zones of a query form's names, then asks it cfg.Asks
// times in a row over UDP: the query must be safe to offload, and so must
// the UDP replies, all the same (asks in a row see a rotating RRset
// rotate). The reply is then at least as new as the serials noted, from
// which the zones' pollers follow it. The query itself names the first
// zone (its name's; a DS query's parent's); a reply that has other names
// (a CNAME chain, the owners of its authority and additional sections)
// has their zones found next (followedZone) and is asked again, so that
// the reply installed was asked after every one of its zones' serials
// was noted; if that reply has yet other names, the form is unstable.
// Zones are found over UDP, as the form is asked, lost lookups asked
// again: TCP is the zone pollers'. found holds the zones found so far
// (a window's, shared by its forms): the owners of NS records and of
// their addresses, which BIND and NSD put in most replies, are looked up
// once a window, not once a form with another round of asks. A serial
// noted earlier in the window is older than the reply still: a change
// since is the poller's (zonesFor, serialsNow).
func (a *agent) learn(ctx context.Context, dst netip.AddrPort, key string, found *zoneCache) (*learned, error) {
	query := append([]byte{0, 0}, key...)
	q, err := dnsmsg.CheckQuery(query)
	if err != nil {
		return nil, err
	}
	seq := a.seq.Add(1)
	names := q.ZoneNames()
	for try := 0; ; try++ {
		for _, n := range names {
			if _, ok := found.get(n.Name); ok {
				continue
			}
			apex, serial, err := a.followedZone(ctx, dst, n)
			if err != nil {
				return nil, err
			}
			found.set(n.Name, zoneSeen{apex, serial})
			if apex != nil {
				// An apex is its own zone: the owner of a negative
				// reply's SOA or of NS records, mostly one found already,
				// costs no lookup, nor the form another round of asks.
				found.set(apex, zoneSeen{apex, serial})
				a.sighted.see(zoneKey{dst, apex.Key()}, serial, a.now())
			}
		}
		asked := a.now()
		reply, rm, err := a.askStable(ctx, dst, query, a.cfg.Asks)
		if err != nil {
			return nil, err
		}
		names = rm.ZoneNames()
		zones, known := found.zonesOf(names)
		switch {
		case known:
			return &learned{f: &form{key: key, query: query, reply: reply, seq: seq, checked: a.now()}, zones: zones, asked: asked}, nil
		case try > 0:
			return nil, &dnsmsg.Skip{Reason: dnsmsg.Unstable, Detail: "the answers before and after the zone lookup have other names"}
		}
	}
}

// zoneCache is the zones of names found (by name; a nil apex: no zone to
// follow), shared by the forms a window learns.
type zoneCache struct {
	mu sync.Mutex
	m  map[string]zoneSeen
}

func newZoneCache() *zoneCache { return &zoneCache{m: map[string]zoneSeen{}} }

func (c *zoneCache) get(name dnsmsg.Name) (zoneSeen, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	z, ok := c.m[name.Key()]
	return z, ok
}

func (c *zoneCache) set(name dnsmsg.Name, z zoneSeen) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[name.Key()] = z
}

// zonesOf is the zones of names, each once, if c has all of them and a
// zone for each name of the answer (one found outside the answer without
// a zone may have moved into it).
func (c *zoneCache) zonesOf(names []dnsmsg.ZoneName) (zones []zoneSeen, known bool) {
	for _, n := range names {
		z, ok := c.get(n.Name)
		switch {
		case !ok || z.apex == nil && n.Answer:
			return nil, false
		case z.apex != nil && !slices.ContainsFunc(zones, func(y zoneSeen) bool { return y.apex.Key() == z.apex.Key() }):
			zones = append(zones, z)
		}
	}
	return zones, true
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

// followedZone is the zone (apex, serial) whose changes the records
// owned by n's name in a reply follow: the name's own (zoneOf), which the
// question's name and the answer's owners must have. An owner of the
// authority or additional section may lie outside the server's zones:
//   - refused (REFUSED: in none of its zones), it has no zone to follow
//     (nil apex). No zone of the server holds data for it but as
//     out-of-zone glue in the zone answered from, the zone of the record
//     naming it (an NS record), which that record's owner follows. Data
//     from a cache (a server that also resolves) follows no serial, and
//     was never followed: the sweep re-checks it.
//   - referred (AA clear: below a delegation to other servers), it
//     follows the zone holding the delegation, where the delegation's NS
//     records and glue lie (a CNAME into the delegation brings them into
//     an authoritative reply): the nearest ancestor's whose SOA the
//     server answers, none if no ancestor's.
//
// Any other failure (no reply, SERVFAIL, no SOA) is an error, as for a
// name of the answer: the form is not offloaded.
func (a *agent) followedZone(ctx context.Context, dst netip.AddrPort, n dnsmsg.ZoneName) (dnsmsg.Name, uint32, error) {
	for name := n.Name; ; name = name.Parent() {
		apex, serial, err := a.zoneOf(ctx, dst, name)
		referred := dnsmsg.ReasonOf(err) == dnsmsg.NotAuthoritative
		switch {
		case err == nil || n.Answer:
			return apex, serial, err
		case dnsmsg.Refused(err) || referred && name.Labels() == 0:
			return nil, 0, nil
		case !referred:
			return nil, 0, err
		}
	}
}

// learnAll learns keys, probe_concurrency at a time, until ctx ends,
// counting skips by reason. Keys not learned when ctx ends are neither
// counted nor remembered: the next window may pick them again.
func (a *agent) learnAll(ctx context.Context, g *group, keys []string) []*learned {
	var mu sync.Mutex
	var out []*learned
	found := newZoneCache()
	workers.Each(len(keys), a.cfg.ProbeConcurrency, func(i int) {
		key := keys[i]
		l, err := a.learn(ctx, g.dst, key, found)
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
	})
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
	a.skipLocked(g, key, reason)
}

// skipLocked counts a form not offloaded for reason, and leaves it
// alone for SkipRetry. Called with a.mu held.
func (a *agent) skipLocked(g *group, key string, reason dnsmsg.Reason) {
	if reason == dnsmsg.Recursion && a.stats.skipped[reason] == 0 {
		a.log.Warn("the server offers the agent recursion (RA set), perhaps not every client: nothing it answers so "+
			"is offloaded; make it authoritative only (BIND: recursion no;)", "group", g.local)
	}
	a.stats.skipped[reason]++
	a.skipped[skipKey{g.local, key}] = a.now().Add(time.Duration(a.cfg.SkipRetry))
}
