package agent

import (
	"context"
	"errors"
	"iter"
	"net/netip"
	"slices"
	"time"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/offload/batch"
	"github.com/santa-offload/santa/internal/offload/dnsmsg"
	"github.com/santa-offload/santa/internal/offload/workers"
)

// check is the result of re-asking a form: its reply now, or nil if it
// could not be re-checked (no reply in time, an unsafe or unstable reply,
// answers from other zones than before). unreached is whether that was
// for want of a reply in time; once, whether reply was asked once only,
// as the reply the form had when asked; learning whether, when it was
// asked, the agent's learning settings (their probe port: santad's
// rules do not answer the agent's asks) were on every socket of the
// form's group (none left to take up again after a broken connection),
// in connection conns (agent.conns) to santad.
type check struct {
	f         *form
	seq       uint64
	reply     []byte
	unreached bool
	once      bool
	learning  bool
	conns     uint64
}

// recheck re-asks forms, probe_concurrency at a time, until ctx ends,
// each lost ask again; a form not re-checked by then has no reply. A
// reply the same as the form's confirms it: that reply was asked cfg.Asks
// times when it was learned, and most re-checks (a sweep, a zone change
// that left the form's answer alone) find it unchanged, each for one ask
// where there were cfg.Asks (with 100,000 forms the sweep asked 6,700
// times a second, and its re-checks were 5 % of the server's core in the
// agent alone, docs/benchmarks.md (h)). Another reply is new, and is
// asked cfg.Asks times in all, as when learning.
func (a *agent) recheck(ctx context.Context, forms []*form) []check {
	checks := make([]check, len(forms))
	workers.Each(len(forms), a.cfg.ProbeConcurrency, func(i int) {
		f := forms[i]
		seq := a.seq.Add(1)
		a.mu.Lock()
		old, zones := f.reply, f.zones
		learning, conns := a.sd != nil && len(f.group.services) > 0 && len(f.group.sockets) == 0, a.conns
		a.mu.Unlock()
		reply, m, err := a.askStable(ctx, f.group.dst, f.query, 1)
		once := err == nil && string(reply) == string(old)
		if err == nil && !once {
			if err = a.askAgain(ctx, f.group.dst, f.query, reply, a.cfg.Asks); err != nil {
				reply = nil
			}
		}
		if err == nil && (!sameZones(m, old) || !once && !a.zonesStay(ctx, f.group.dst, m, zones)) {
			reply = nil
		}
		unreached := err != nil && (dnsmsg.ReasonOf(err) == dnsmsg.Timeout || ctx.Err() != nil && errors.Is(err, ctx.Err()))
		checks[i] = check{f: f, seq: seq, reply: reply, unreached: unreached, once: once, learning: learning, conns: conns}
	})
	a.keepServersConfirmations(checks)
	a.mu.Lock()
	a.stats.rechecks += uint64(len(forms))
	a.mu.Unlock()
	return checks
}

// keepServersConfirmations unmakes the confirmations the kernel may have
// given instead of the server: the agent's asks pass santad's rules only
// while its learning settings (their probe port) are on the services,
// and a santad that restarts restores the services and their rules
// without them, until the agent has connected again and set them. An ask
// in that gap, or across it, is answered by the old rule itself, and
// would confirm it until the sweep (found by a review). A confirmation
// stands only if the learning was on when it was asked, in a connection
// to santad that still stands once the replies are in (a call on it
// succeeds: a santad that restarted closed it); any other is a form not
// reached, deleted by a zone change's re-check and left first in line
// by the sweep's.
func (a *agent) keepServersConfirmations(checks []check) {
	a.mu.Lock()
	sd, conns := a.sd, a.conns
	a.mu.Unlock()
	alive := false
	if sd != nil {
		_, err := sd.Status() // small and fixed, unlike the services' list
		alive = err == nil
		if err != nil {
			a.mu.Lock()
			if a.conns == conns {
				a.failed("checking the connection after re-checks", err)
			}
			a.mu.Unlock()
		}
	}
	for i := range checks {
		c := &checks[i]
		if c.once && !(alive && c.learning && c.conns == conns) {
			c.reply, c.once, c.unreached = nil, false, true
		}
	}
}

// zonesStay is whether the zone each name of a new reply m follows
// (followedZone, as when learning) is still one of the zones the form
// follows: a zone added on the server below one of them (a delegation to
// itself, a new zone) takes the name away, with the same owner names,
// and its changes would not be followed. A name whose zone cannot be
// asked does not stay. Asked only for replies that changed: most
// re-checks find the reply the same.
func (a *agent) zonesStay(ctx context.Context, dst netip.AddrPort, m *dnsmsg.Message, zones []*zone) bool {
	for _, n := range m.ZoneNames() {
		apex, _, err := a.followedZone(ctx, dst, n)
		if err != nil || apex != nil && !slices.ContainsFunc(zones, func(z *zone) bool { return z.apex.Key() == apex.Key() }) {
			return false
		}
	}
	return true
}

// sameZones is whether the reply m has the names (ZoneNames) the reply
// before had: a new CNAME target, or a new owner in the authority or
// additional section, may lead into a zone nobody follows for the form.
func sameZones(m *dnsmsg.Message, reply []byte) bool {
	old, err := dnsmsg.Parse(reply)
	if err != nil {
		return false
	}
	key := func(m *dnsmsg.Message) []string {
		var ks []string
		for _, n := range m.ZoneNames() {
			ks = append(ks, n.Name.Key())
		}
		slices.Sort(ks)
		return ks
	}
	return slices.Equal(key(m), key(old))
}

// apply makes the rules what the checks found, in one transaction per
// service: a changed reply replaces the rule, a form without a reply is
// deleted. A reply asked before a change of one of the form's zones was
// seen, or before the reply installed was asked, is not installed (that
// change's own re-check handles it). cause names the deletions in the
// metrics.
func (a *agent) apply(checks []check, cause string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	type ops struct {
		replace []client.RuleEntry
		del     []uint32
	}
	byService := map[*service]*ops{}
	var deleted []*form
	type update struct {
		f     *form
		reply []byte
		seq   uint64
	}
	var updates []update
	now := a.now()
	for _, c := range checks {
		f := c.f
		if f.group.forms[f.key] != f {
			continue // deleted meanwhile
		}
		switch {
		case c.reply == nil:
			deleted = append(deleted, f)
		case !a.current(f, c.seq):
		case string(c.reply) == string(f.reply):
			a.checkedAt(f, now)
		case c.once:
			// It confirmed a reply another check has replaced since: asked
			// once, it is no new reply asked cfg.Asks times. The form
			// stays as it is, first in line for the sweep.
		default:
			updates = append(updates, update{f, c.reply, c.seq})
		}
	}
	for _, sv := range a.services {
		o := &ops{}
		for _, u := range updates {
			if id, ok := sv.rules[u.f]; ok {
				o.replace = append(o.replace, client.RuleEntry{RuleID: id, Rule: dnsmsg.Rule(u.f.query, u.reply)})
			}
		}
		for _, f := range deleted {
			if id, ok := sv.rules[f]; ok {
				o.del = append(o.del, id)
			}
		}
		if len(o.replace)+len(o.del) > 0 {
			byService[sv] = o
		}
	}
	committed := true
	for sv, o := range byService {
		if a.sd == nil {
			committed = false
			break
		}
		if err := a.commit(sv, o.replace, o.del); err != nil {
			a.failed("re-checked rules of service", err)
			committed = false
			continue
		}
		// The transaction deleted these: they must not be deleted again.
		for _, f := range deleted {
			sv.unnote(f)
		}
	}
	if !committed {
		// Where a transaction failed, the rules may now be stale: forget
		// the forms, and delete what can be deleted (a new connection's
		// resync deletes the rest).
		for _, u := range updates {
			deleted = append(deleted, u.f)
		}
		updates = nil
	}
	for _, u := range updates {
		u.f.reply, u.f.seq = u.reply, u.seq
		a.checkedAt(u.f, now)
		a.stats.replaced++
	}
	a.deleteForms(deleted, cause)
}

// current is whether a reply asked with sequence number seq may replace
// f's: asked after f's own and after the last change of its zones.
func (a *agent) current(f *form, seq uint64) bool {
	return seq > f.seq && !changedSince(f.zones, seq)
}

// changedSince is whether a change of one of zones was seen after the ask
// with sequence number seq.
func changedSince(zones []*zone, seq uint64) bool {
	return slices.ContainsFunc(zones, func(z *zone) bool { return z.changedSince(seq) })
}

// changedSince is whether a change of z was seen after the ask with
// sequence number seq.
func (z *zone) changedSince(seq uint64) bool { return z.changed >= seq }

// commit replaces and deletes rules of a service in one transaction,
// batch by batch. Called with a.mu held.
func (a *agent) commit(sv *service, replace []client.RuleEntry, del []uint32) error {
	txn, err := a.sd.Begin(sv.id)
	if err != nil {
		return err
	}
	for len(replace) > 0 {
		n := batch.Fitting(replace, batch.ReplaceSize)
		if err := txn.ReplaceRules(replace[:n]); err != nil {
			txn.Abort()
			return err
		}
		replace = replace[n:]
	}
	for len(del) > 0 {
		n := batch.Fitting(del, func(uint32) int { return 4 })
		if err := txn.DeleteRules(del[:n]); err != nil {
			txn.Abort()
			return err
		}
		del = del[n:]
	}
	_, err = txn.Commit()
	return err
}

// sweep re-checks the forms asked longest ago, so many each second that
// every form is re-checked within cfg.Sweep (sweepDue): it catches what
// changes without a new serial. A form it could not reach in time (an
// overloaded server drops queries) is left as it is, first in line for
// the next second, until its last check is cfg.Sweep old: then it is
// deleted.
func (a *agent) sweep(ctx context.Context) {
	a.mu.Lock()
	due := a.dueForSweep(a.now(), time.Duration(a.cfg.Sweep))
	a.mu.Unlock()
	if len(due) == 0 {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	checks := a.recheck(sctx, due)
	cancel()
	if ctx.Err() != nil {
		return
	}
	a.mu.Lock()
	now := a.now()
	checks = slices.DeleteFunc(checks, func(c check) bool {
		return c.unreached && now.Sub(c.f.checked) < time.Duration(a.cfg.Sweep)
	})
	a.mu.Unlock()
	a.apply(checks, "sweep")
}

// sweepDue is how many of forms (oldest check first) a second's sweep
// re-checks: the steady rate that, if it holds, re-checks every form
// before its check turns sweep old (the rate planned over all of them),
// but no form checked less than sweep/2 ago. With checks spread evenly
// over time that is len(forms) / sweep a second, as a sweep of all in
// turn would do; an agent learning a large hot set from no rules no
// longer re-asks forms it learned seconds ago (a fifth of its asks at 1M
// names, docs/benchmarks.md (h)), and planning over the young forms too
// keeps the rate from falling behind when they come due. The forms of a
// burst of checks (a zone change re-asks all of its forms at once) come
// due together, and are re-checked over the last sweep/2 before they
// turn sweep old: at most twice the steady rate. The last sweep to
// include a form may start when it has less than a second left; its asks
// take that second.
func sweepDue(forms iter.Seq[*form], now time.Time, sweep time.Duration) int {
	rate, due, i := 0, 0, 0
	for f := range forms {
		left := f.checked.Add(sweep).Sub(now)
		if left <= sweep/2 {
			due = i + 1
		}
		seconds := max(1, int((left+time.Second-1)/time.Second))
		rate = max(rate, (i+1+seconds-1)/seconds)
		i++
	}
	return min(rate, due)
}

// dueForSweep is the forms a second's sweep re-checks (sweepDue), from
// the line. Called with a.mu held.
func (a *agent) dueForSweep(now time.Time, sweep time.Duration) []*form {
	n := sweepDue(a.inLine(), now, sweep)
	due := make([]*form, 0, n)
	for f := range a.inLine() {
		if len(due) == n {
			break
		}
		due = append(due, f)
	}
	return due
}

// inLine is the forms of the line, oldest check first. Called with a.mu
// held.
func (a *agent) inLine() iter.Seq[*form] {
	return func(yield func(*form) bool) {
		for e := a.line.Front(); e != nil; e = e.Next() {
			if !yield(e.Value.(*form)) {
				return
			}
		}
	}
}

// checkedAt notes that f was checked at t: it goes to the end of the
// line. Called with a.mu held.
func (a *agent) checkedAt(f *form, t time.Time) {
	f.checked = t
	a.line.MoveToBack(f.inLine)
}
