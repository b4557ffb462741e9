package agent

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/santa-offload/santa/internal/offload/dnsmsg"
	"github.com/santa-offload/santa/internal/offload/workers"
)

// zone is a zone of the server whose SOA serial the agent polls, for the
// offloaded forms whose answers come from it.
type zone struct {
	key    zoneKey
	apex   dnsmsg.Name
	serial uint32
	// changed is the ask sequence number when a change was last seen, and
	// again when its re-check began, or when its serial could not be
	// asked: an answer asked before it is not installed.
	changed uint64
	forms   map[*form]bool
	// answered is when the last poll answered was asked (the first:
	// serialsNow's): a change after it may be unseen, which bounds how
	// long a failed poll may be asked again (pollSerial). The poller's own.
	answered time.Time
	// handled is what committing the last change's re-check took (C and
	// the waits for a.mu in the bound), until a poll answers again: the
	// next poll's grace (pollSerial). The poller's own.
	handled time.Duration
}

type zoneKey struct {
	dst  netip.AddrPort
	apex string // dnsmsg.Name.Key
}

// zonesFor is the zones of a learned form (asked with sequence number
// l.f.seq), registered (and polled) if new; false if a change of one was
// seen after the form was asked, or the form saw another serial of one
// than the one its poller follows: asked across a change, its reply may
// be of either version, and nothing would re-check it at the next change
// (a new zone takes the serial of the first form installed, which may be
// newer than another's of the same batch); false too for a new zone
// whose serial was first seen less than ChangeSettle before the form was
// asked (sightings), or is not the one it has now (fresh, asked just
// before: serialsNow), or was asked too long ago for its first poll to
// keep the bound (newZoneAge). Called with a.mu held.
func (a *agent) zonesFor(dst netip.AddrPort, l *learned, fresh map[zoneKey]*zone) ([]*zone, bool) {
	zones := make([]*zone, len(l.zones))
	for i, s := range l.zones {
		k := zoneKey{dst, s.apex.Key()}
		z := a.zones[k]
		if z == nil {
			// Followed from this form's install on, if all its zones pass.
			z = fresh[k]
			if z == nil || z.serial != s.serial || time.Since(z.answered) > a.cfg.newZoneAge() ||
				!a.sighted.settled(k, s.serial, l.asked, time.Duration(a.cfg.ChangeSettle)) {
				return nil, false
			}
		}
		if z.changedSince(l.f.seq) || z.serial != s.serial {
			return nil, false
		}
		zones[i] = z
	}
	for _, z := range zones {
		if a.zones[z.key] == nil {
			z.forms = map[*form]bool{}
			a.zones[z.key] = z
			a.pollers.Add(1)
			// The first poll P after the serial asked before the install.
			go a.poll(a.zonesCtx, z, time.Until(z.answered.Add(time.Duration(a.cfg.ZonePoll))))
		}
	}
	return zones, true
}

// newZones is how many of l's zones (each once) the agent does not
// follow yet. Called with a.mu held.
func (a *agent) newZones(dst netip.AddrPort, l *learned) int {
	n := 0
	for _, s := range l.zones {
		if a.zones[zoneKey{dst, s.apex.Key()}] == nil {
			n++
		}
	}
	return n
}

// serialsNow asks the serial of each zone of ls that is not followed yet,
// as many as max_zones leaves room for (ls is best first), as its poller
// would, and returns those zones, answered, to be followed from their
// first install (the zones whose serial could not be asked are missing). A zone is followed from the install of its first forms, up to
// a window after they were asked: a change in between would go unseen
// (its poller starts from the serial the forms saw), and their old
// answers would stay until the first poll's re-check, past the bound
// (found by a review). Forms whose serial is not the one asked here are
// not installed (zonesFor); a change after it is the poller's, which
// counts this ask as its last answered poll (pollSerial). Called without
// a.mu.
func (a *agent) serialsNow(g *group, ls []*learned) map[zoneKey]*zone {
	a.mu.Lock()
	var unfollowed []*zone
	seen := map[zoneKey]bool{}
	for _, l := range ls {
		for _, s := range l.zones {
			k := zoneKey{g.dst, s.apex.Key()}
			if a.zones[k] == nil && !seen[k] && len(a.zones)+len(unfollowed) < a.cfg.MaxZones {
				seen[k] = true
				unfollowed = append(unfollowed, &zone{key: k, apex: s.apex})
			}
		}
	}
	a.mu.Unlock()
	errs := make([]error, len(unfollowed))
	start, budget := time.Now(), 2*time.Duration(a.cfg.ProbeTimeout)
	workers.Each(len(unfollowed), newZoneAsks, func(i int) {
		z := unfollowed[i]
		asked := time.Now()
		if asked.Sub(start) > budget {
			// The first zones' forms would wait for the rest, and their
			// first polls too long after these asks: the rest wait for
			// the next window.
			errs[i] = errNewZoneLate
			return
		}
		if z.serial, errs[i] = a.serial(a.zonesCtx, z, 2*time.Duration(a.cfg.ProbeTimeout)); errs[i] == nil {
			z.answered = asked
		}
	})
	fresh := map[zoneKey]*zone{}
	for i, z := range unfollowed {
		if errs[i] != nil {
			a.log.Debug("zone serial before its first install", "zone", z.apex.String(), "server", z.key.dst, "err", errs[i])
			continue
		}
		fresh[z.key] = z
	}
	return fresh
}

// errNewZoneLate is a new zone whose serial serialsNow did not begin to
// ask within 2T of its first.
var errNewZoneLate = errors.New("not asked within 2 × probe_timeout of the window's first new zone: next window")

// newZoneAsks is how many new zones' serials serialsNow asks at once: on
// the pollers' connection, where a poll must not wait behind many asks.
const newZoneAsks = 4

// watch makes z follow f. Called with a.mu held.
func (a *agent) watch(z *zone, f *form) { z.forms[f] = true }

// poll asks z's SOA serial every ZonePoll (the first after wait), and at
// once again after a change was handled, until the zone has no forms
// left. On a change it
// waits ChangeSettle, then re-asks every form of the zone within
// RecheckBudget and replaces or deletes their rules in one transaction
// per service; a form not re-checked in time is deleted. A zone whose
// serial cannot be asked (the server is down or does not answer) has its
// forms deleted (once no answer could come within the bound any more:
// pollSerial): nothing could tell whether they are still right.
func (a *agent) poll(ctx context.Context, z *zone, wait time.Duration) {
	defer a.pollers.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		alive, changed := a.pollOnce(ctx, z)
		if !alive {
			return
		}
		// A change handled: ask again at once, for a change made while
		// the forms were re-asked.
		wait = time.Duration(a.cfg.ZonePoll)
		if changed {
			wait = 0
		}
	}
}

// pollOnce asks z's serial and handles a change; alive is false once the
// zone has no forms (it is then forgotten).
func (a *agent) pollOnce(ctx context.Context, z *zone) (alive, changed bool) {
	a.mu.Lock()
	if len(z.forms) == 0 {
		delete(a.zones, z.key)
		a.mu.Unlock()
		return false, false
	}
	a.mu.Unlock()
	serial, err := a.pollSerial(ctx, z)
	if ctx.Err() != nil {
		return false, false
	}
	a.mu.Lock()
	if err == nil && serial == z.serial {
		a.mu.Unlock()
		return true, false
	}
	if err != nil {
		// Listed only now: a zone of 100,000 forms, polled every
		// zone_poll, took a map walk and 800 KB each poll, under a.mu.
		forms := slices.Collect(maps.Keys(z.forms))
		a.log.Warn("zone serial", "zone", z.apex.String(), "server", z.key.dst, "err", err, "forms deleted", len(forms))
		// Forms being installed, asked before, are not installed either.
		z.changed = a.seq.Add(1)
		a.deleteForms(forms, "zone_unverifiable")
		a.mu.Unlock()
		return true, false
	}
	a.log.Info("zone changed", "zone", z.apex.String(), "serial", z.serial, "new", serial, "forms", len(z.forms))
	z.serial = serial
	z.changed = a.seq.Add(1)
	a.stats.zoneChanges++
	a.mu.Unlock()
	// NSD reloads by forking new servers; its old ones answer the old data
	// from the same socket for a few ms after a new one has answered the
	// new serial (up to 12 ms measured under load): a re-check asked then
	// could confirm an old answer, to be served until the sweep. Asks and
	// answers learned before the wait ends are superseded as well.
	select {
	case <-ctx.Done():
		return false, false
	case <-time.After(time.Duration(a.cfg.ChangeSettle)):
	}
	a.mu.Lock()
	z.changed = a.seq.Add(1)
	forms := slices.Collect(maps.Keys(z.forms))
	a.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, time.Duration(a.cfg.RecheckBudget))
	checks := a.recheck(rctx, forms)
	cancel()
	if ctx.Err() == nil {
		start := time.Now()
		a.apply(checks, "zone")
		z.handled = time.Since(start)
	}
	return true, true
}

// pollSerial asks z's serial as a poll, within 2T, and asks again after a
// failure (no answer in time, under overload) for as long as an answer
// can still come by z.answered + pollGrace: a change made after the last
// answered poll was asked would be seen by then on the regular schedule
// (the bound's 4T + max(P, D + B + C); see docs/offload-dns.md, "Bound":
// C is what the change handled after that poll took to commit, if any),
// so asking until then keeps the bound, where deleting the zone's forms
// at the first miss threw their load back on the overloaded server.
func (a *agent) pollSerial(ctx context.Context, z *zone) (uint32, error) {
	t := time.Duration(a.cfg.ProbeTimeout)
	deadline := z.answered.Add(a.pollGrace + a.cfg.handledGrace(z.handled))
	timeout := 2 * t
	for {
		asked := time.Now()
		serial, err := a.serial(ctx, z, timeout)
		if err == nil {
			z.answered, z.handled = asked, 0
			return serial, nil
		}
		// At most one ask per T, for a server that fails at once (its
		// socket closed, REFUSED).
		next := asked.Add(t)
		if now := time.Now(); now.After(next) {
			next = now
		}
		if timeout = min(2*t, deadline.Sub(next)); timeout < t/2 {
			return 0, err
		}
		select {
		case <-ctx.Done():
			return 0, err
		case <-time.After(time.Until(next)):
		}
		a.log.Debug("zone serial asked again", "zone", z.apex.String(), "server", z.key.dst, "err", err, "within", timeout)
		a.mu.Lock()
		a.stats.pollRetries++
		a.mu.Unlock()
	}
}

// handledGrace is what the grace after a poll that saw a change gains
// by that change's commit, which took handled: 4T + max(P, D + B + C)
// instead of 4T + max(P, D + B).
func (c Config) handledGrace(handled time.Duration) time.Duration {
	p, db := time.Duration(c.ZonePoll), time.Duration(c.ChangeSettle+c.RecheckBudget)
	return max(0, db+handled-max(p, db))
}

// newZoneAge is how long after a new zone's serial was asked (serialsNow)
// its poller may start: its first poll, at most P after that ask and
// within 2T, is then answered within the grace of that ask (pollGrace
// less 2T), as a poll after an answered one is.
func (c Config) newZoneAge() time.Duration {
	return c.pollGrace() - 2*time.Duration(c.ProbeTimeout)
}

// pollGrace is how long after an answered poll was asked the next answer
// may come without stretching the freshness bound: 4T + max(P, D + B).
func (c Config) pollGrace() time.Duration {
	return 4*time.Duration(c.ProbeTimeout) + max(time.Duration(c.ZonePoll), time.Duration(c.ChangeSettle+c.RecheckBudget))
}

// serial asks the zone's SOA serial, within timeout: over TCP, or over UDP
// (lost asks asked again) if the server takes no TCP connection.
func (a *agent) serial(ctx context.Context, z *zone, timeout time.Duration) (uint32, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, m, err := a.askStream(ctx, z.key.dst, dnsmsg.NewQuery(z.apex, dnsmsg.TypeSOA, dnsmsg.ClassIN), timeout)
	if err != nil {
		return 0, err
	}
	return m.Serial(z.apex)
}
