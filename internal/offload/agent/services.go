package agent

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"slices"
	"syscall"
	"time"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/offload/batch"
	"github.com/santa-offload/santa/internal/offload/dnsmsg"
	"github.com/santa-offload/santa/internal/offload/santadconn"
	"github.com/santa-offload/santa/internal/offload/server"
	"github.com/santa-offload/santa/internal/rate"
	"github.com/santa-offload/santa/rule"
)

// scan follows the server: services whose socket closed are forgotten
// (santad ended them with the socket, and their rules), new sockets are
// attached, or taken up if santad has them already (after a restart of
// santad or of the agent: known by socket cookie).
func (a *agent) scan(ctx context.Context) {
	a.mu.Lock()
	joins := a.scanLocked()
	sd := a.sd
	a.mu.Unlock()
	for _, j := range joins {
		a.join(ctx, sd, j)
	}
}

// scanLocked is scan's work under a.mu; it returns the services that
// joined a group with forms, to get them without a.mu (join).
func (a *agent) scanLocked() (joins []*joining) {
	sd, err := a.santad()
	if err != nil {
		return nil
	}
	sv, err := santadconn.TakeSurvey(sd, a.finder, a.sockets)
	switch {
	case errors.Is(err, santadconn.ErrScan):
		a.scans.Failed(a.log, "scanning the server's sockets", err)
		return nil
	case err != nil:
		a.failed("listing services", err)
		return nil
	}
	a.scans.Worked(a.log, "scanning the server's sockets")
	// Gone first: a restarted server's group starts afresh, its forms
	// learned again from the new process rather than carried over.
	for _, s := range a.services {
		if why := sv.Gone(s.inode, s.id); why != "" {
			a.forget(s, why)
		}
	}
	a.forgetRestarted(sv.Fresh)
	fresh := map[uint64]bool{}
	for _, s := range sv.Fresh {
		fresh[s.Inode] = true
		if a.now().Before(a.refused[s.Inode]) {
			continue
		}
		if j := a.attach(sd, s, sv.ByCookie); j != nil {
			joins = append(joins, j)
		}
		if a.sd == nil {
			return nil
		}
	}
	maps.DeleteFunc(a.refused, func(inode uint64, _ time.Time) bool { return !fresh[inode] })
	a.takes.Keep(sv.Fresh)
	for _, g := range a.groups {
		g.sockets = slices.DeleteFunc(g.sockets, func(inode uint64) bool { return !fresh[inode] || a.sockets[inode] != nil })
	}
	return joins
}

// refusedRetry is how long a socket whose learning santad refused is left
// alone: a refusal that lasts (a santad too old for learning, say) would
// have it attached and detached at every scan.
const refusedRetry = time.Minute

// forget drops a service; a group left without services drops its forms,
// whose rules died with the sockets. Called with a.mu held.
func (a *agent) forget(s *service, why string) {
	a.log.Info("service ended", "service", s.id, "addr", s.group.local, "why", why)
	delete(a.services, s.id)
	delete(a.sockets, s.inode)
	g := s.group
	delete(g.services, s.id)
	if len(g.services) == 0 {
		a.dropGroup(g)
	}
}

// forgetRestarted drops the groups left without services by a broken
// connection to santad whose sockets all closed meanwhile (the server
// restarted while the agent was away): their forms are the old process's
// answers, learned again from the new one rather than installed on its
// sockets. fresh is the server's sockets the agent has not taken (all of
// them, after a broken connection). Called with a.mu held.
func (a *agent) forgetRestarted(fresh []server.Socket) {
	live := map[uint64]bool{}
	for _, s := range fresh {
		live[s.Inode] = true
	}
	for _, g := range a.groups {
		if len(g.services) == 0 && !slices.ContainsFunc(g.sockets, func(inode uint64) bool { return live[inode] }) {
			a.log.Info("the server's sockets closed while santad was away", "addr", g.local, "forms", len(g.forms))
			a.dropGroup(g)
		}
	}
}

// dropGroup drops a group without services and its forms, whose rules
// ended with their sockets. Called with a.mu held.
func (a *agent) dropGroup(g *group) {
	for _, f := range g.forms {
		a.dropForm(f, "")
	}
	delete(a.groups, g.local)
}

// attach makes socket s a service of the agent's; the group's forms its
// rules lack (nil: none) are to be added by join. Called with a.mu held.
func (a *agent) attach(sd Santad, s server.Socket, byCookie map[uint64]client.ServiceInfo) *joining {
	info, adopted, err := santadconn.TakeUp(sd, a.take, s, byCookie)
	switch {
	case errors.Is(err, santadconn.ErrTake) || santadconn.Refused(err):
		a.takes.Failed(a.log, s.Inode, "taking up "+s.Local.String(), err)
		return nil
	case err != nil:
		a.failed("attaching "+s.Local.String(), err)
		return nil
	case !adopted:
		a.stats.attached++
	}
	a.takes.Worked(a.log, s.Inode, "taking up "+s.Local.String())
	g := a.groups[s.Local]
	if g == nil {
		g = &group{local: s.Local, dst: server.AskAddr(s.Local), services: map[uint32]*service{}, forms: map[string]*form{}, learning: map[string]float64{},
			evidence: rate.NewEvidence(evidenceSpan)}
	}
	if err := sd.SetLearning(info.ServiceID, a.learning(sd, g.counts)); err != nil {
		a.failed("enabling learning", err)
		if a.sd != nil {
			// Refused: santad keeps the service, with the rules an adopted
			// one has, and nothing would follow them. A scan after
			// refusedRetry attaches the socket afresh.
			a.log.Warn("detaching the service; its socket is tried again later", "service", info.ServiceID,
				"addr", s.Local, "in", refusedRetry)
			a.refused[s.Inode] = a.now().Add(refusedRetry)
			if err := sd.Detach(info.ServiceID); err != nil {
				a.failed("detaching a service whose learning was refused", err)
			}
		}
		return nil
	}
	a.groups[s.Local] = g
	sv := &service{id: info.ServiceID, inode: s.Inode, group: g, rules: map[*form]uint32{}, byRule: map[uint32]*form{}, hits: map[uint32]uint64{}}
	g.services[sv.id] = sv
	a.services[sv.id] = sv
	a.sockets[s.Inode] = sv
	a.log.Info("service", "service", sv.id, "addr", s.Local, "pid", s.Holder.PID, "adopted", adopted)
	return a.resync(sd, sv)
}

// resync makes a service's rules the group's forms: rules of the agent's
// forms are kept (santad restarted, or the service was just taken up),
// any other rule is deleted (left by an agent that died: nobody kept it
// fresh), and the missing forms are returned (nil: none), for join to
// add. Called with a.mu held.
func (a *agent) resync(sd Santad, sv *service) *joining {
	g := sv.group
	var stale []uint32
	for e, err := range sd.Rules(sv.id) {
		if err != nil {
			a.failed("listing rules", err)
			return nil
		}
		f := g.forms[string(e.Rule.Condition.Pattern)]
		if f == nil || e.Rule.Condition.Offset != 2 || sv.rules[f] != 0 || !reflect.DeepEqual(e.Rule, dnsmsg.Rule(f.query, f.reply)) {
			stale = append(stale, e.RuleID)
			continue
		}
		sv.note(f, e.RuleID)
	}
	// The rules taken up have counted hits since they were installed: the
	// next ranking must see only those from now on, not a whole rule's
	// life as a window's.
	err := santadconn.HitDeltas(sd.RuleStats(sv.id), sv.hits, func(rule uint32, _ uint64) bool { return sv.byRule[rule] != nil })
	if err != nil {
		a.failed("reading rule stats", err)
		return nil
	}
	if g.recount { // the hits since the last ranking went with the connection
		g.hitsSince, g.recount = a.now(), false
	}
	if len(stale) > 0 {
		if err := a.deleteIDs(sd, sv.id, stale); err != nil {
			a.failed("deleting rules the agent does not know", err)
			return nil
		}
		a.log.Info("deleted rules the agent does not know", "service", sv.id, "rules", len(stale))
	}
	if j := newJoining(sv); len(j.next) > 0 {
		return j
	}
	return nil
}

// note records f's rule id on the service.
func (sv *service) note(f *form, id uint32) {
	sv.rules[f] = id
	sv.byRule[id] = f
	sv.hits[id] = 0
}

// unnote forgets f's rule on the service and returns its id.
func (sv *service) unnote(f *form) (uint32, bool) {
	id, ok := sv.rules[f]
	if ok {
		delete(sv.rules, f)
		delete(sv.byRule, id)
		delete(sv.hits, id)
	}
	return id, ok
}

// addRules installs forms on a service, in batches that fit a message.
// A form santad refuses (another rule has its condition) is dropped from
// the batch, which is sent again. It returns the forms installed. Called
// with a.mu held.
func (a *agent) addRules(sd Santad, sv *service, forms []*form) []*form {
	ids, err := a.addBuilt(sd, sv.id, forms, rulesOf(forms))
	var done []*form
	for _, f := range forms {
		if id, ok := ids[f]; ok {
			sv.note(f, id)
			done = append(done, f)
		}
	}
	if err != nil {
		a.failed("adding rules", err)
	}
	return done
}

// rulesOf is each form's rule, made from its reply as it is now.
func rulesOf(forms []*form) []rule.Rule {
	rules := make([]rule.Rule, len(forms))
	for i, f := range forms {
		rules[i] = dnsmsg.Rule(f.query, f.reply)
	}
	return rules
}

// addBuilt installs rules[i], forms[i]'s rule, as addRules does, and
// returns the rule id of each form installed; the error is the
// connection's. It reads nothing of the forms but their query, which
// never changes.
func (a *agent) addBuilt(sd Santad, service uint32, forms []*form, rules []rule.Rule) (map[*form]uint32, error) {
	ids := map[*form]uint32{}
	for len(forms) > 0 {
		n := batch.Fitting(rules, ruleSize)
		got, err := sd.AddRules(service, rules[:n])
		var refusal *client.Error
		switch {
		case err == nil:
			for i, f := range forms[:n] {
				ids[f] = got[i]
			}
			forms, rules = forms[n:], rules[n:]
		case errors.As(err, &refusal) && refusal.Code == syscall.EDQUOT && refusal.Index != client.NoIndex && int(refusal.Index) < n:
			// Over the quota from this rule on: only those before it are
			// sent again. Refused one by one, the rest took a round trip
			// each, in an install's retry under a.mu too.
			i := int(refusal.Index)
			a.log.Warn("santad refuses rules over the quota", "service", service, "refused", len(forms)-i, "err", err)
			forms, rules = forms[:i], rules[:i]
		case errors.As(err, &refusal) && refusal.Index != client.NoIndex && int(refusal.Index) < n:
			i := int(refusal.Index)
			a.log.Warn("santad refuses a rule", "service", service, "query", queryName(forms[i].query), "err", err)
			forms, rules = slices.Delete(slices.Clone(forms), i, i+1), slices.Delete(slices.Clone(rules), i, i+1)
		default:
			return ids, err
		}
	}
	return ids, nil
}

// ruleSize is what r takes in an ADD_RULES message.
func ruleSize(r rule.Rule) int { return batch.AddSize(r, nil) }

func queryName(q []byte) string {
	if m, err := dnsmsg.Parse(q); err == nil && len(m.Question) == 1 {
		return m.Question[0].Name.String()
	}
	return "?"
}
