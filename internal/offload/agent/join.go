package agent

import (
	"context"

	"github.com/santa-offload/santa/internal/offload/batch"
	"github.com/santa-offload/santa/internal/offload/dnsmsg"
	"github.com/santa-offload/santa/rule"
)

// joining is a service that joined a group with forms (a socket the
// server opened on a served address, or one taken up after a reconnect
// to santad whose journal lacks some), and the group's forms it lacks.
type joining struct {
	sv *service
	// next is the forms to add in turn; when it runs out, the group's
	// forms the service still lacks and that were not tried are.
	next  []*form
	tried map[*form]bool
}

// newJoining is sv joining its group. Called with a.mu held.
func newJoining(sv *service) *joining {
	j := &joining{sv: sv, tried: map[*form]bool{}}
	j.next = j.lacking()
	return j
}

// lacking is the group's forms the service has no rule for and that
// were not tried. Called with a.mu held.
func (j *joining) lacking() []*form {
	var forms []*form
	for _, f := range j.sv.group.forms {
		if _, on := j.sv.rules[f]; !on && !j.tried[f] {
			forms = append(forms, f)
		}
	}
	return forms
}

// join adds the forms a service lacks, a batch at a time without a.mu:
// santad rebuilds the service's index at each batch, which for the
// 100,000 forms of a group is seconds that the zone pollers, their
// re-checks and commits must not wait for (docs/offload-dns.md, "Bound").
// Each batch is chosen and its rules made under a.mu from the forms as
// they are then: a form a re-check deleted or replaced before its batch
// is not added with its old answer, and a form learned meanwhile (also
// one learned again under a key whose old rule the join had added, which
// santad then refused to the install) is added too. A form deleted or
// replaced while its batch was added (its rule was not on the service for
// the re-check's transaction to replace) has that rule deleted once the
// batch is added, and is added again with its new reply. Called without
// a.mu.
func (a *agent) join(ctx context.Context, sd Santad, j *joining) {
	for ctx.Err() == nil {
		a.mu.Lock()
		forms, rules, seqs := a.nextJoin(sd, j)
		a.mu.Unlock()
		if len(forms) == 0 {
			return
		}
		added, err := a.addBuilt(sd, j.sv.id, forms, rules)
		a.mu.Lock()
		if err != nil && a.sd == sd {
			a.failed("adding rules", err)
		}
		a.noteJoined(sd, j, forms, seqs, added)
		a.mu.Unlock()
	}
}

// nextJoin is j's next batch: forms still the group's and not on the
// service, their rules and their replies' sequence numbers (a re-check
// that replaces a reply gives it a new one); none once there are none,
// or the connection is no longer sd or the service no longer the group's
// (its rules ended with it). Called with a.mu held.
func (a *agent) nextJoin(sd Santad, j *joining) (forms []*form, rules []rule.Rule, seqs []uint64) {
	sv, g := j.sv, j.sv.group
	if a.sd != sd || g.services[sv.id] != sv || a.groups[g.local] != g {
		return nil, nil, nil
	}
	used := 0
	for {
		if len(j.next) == 0 {
			if j.next = j.lacking(); len(j.next) == 0 {
				return forms, rules, seqs
			}
		}
		f := j.next[0]
		if _, on := sv.rules[f]; on || j.tried[f] || g.forms[f.key] != f {
			j.next = j.next[1:]
			continue
		}
		r := dnsmsg.Rule(f.query, f.reply)
		size := ruleSize(r)
		if !batch.Fits(used, size, len(forms)) {
			return forms, rules, seqs
		}
		used += size
		j.tried[f] = true
		j.next = j.next[1:]
		forms, rules, seqs = append(forms, f), append(rules, r), append(seqs, f.seq)
	}
}

// noteJoined records the rules join added (added) for forms whose
// replies were those of seqs, and deletes those of forms deleted or
// replaced meanwhile; a replaced one is tried again, with its new reply.
// Called with a.mu held.
func (a *agent) noteJoined(sd Santad, j *joining, forms []*form, seqs []uint64, added map[*form]uint32) {
	sv := j.sv
	if a.sd != sd || sv.group.services[sv.id] != sv {
		return // the rules ended with the connection's services, or with the socket
	}
	var stale []uint32
	for i, f := range forms {
		id, ok := added[f]
		switch {
		case !ok: // santad refused it: the service goes without
		case sv.group.forms[f.key] != f:
			stale = append(stale, id)
		case f.seq != seqs[i]:
			stale = append(stale, id)
			delete(j.tried, f)
		default:
			sv.note(f, id)
		}
	}
	if len(stale) > 0 {
		a.deleteRules(sv, stale)
	}
}
