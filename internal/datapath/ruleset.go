package datapath

import (
	"errors"
	"fmt"
	"slices"

	"github.com/santa-offload/santa/internal/maputil"
	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/rules"
	"github.com/santa-offload/santa/rule"
)

type installedRule struct {
	id   model.RuleID
	svc  *service
	rule rule.Rule
	// compiled is the body to write, until it is written: then it goes,
	// since rule holds the same reply (a million 1400-B replies kept twice
	// took 1.3 GiB more).
	compiled rule.Compiled
	slot     uint32           // where the data plane reads it; new on every replace
	guard    *santaSantaGuard // nil: unguarded (memcached.go)
}

// AddRule installs one rule on a service.
func (d *Datapath) AddRule(svc model.ServiceID, r rule.Rule) (model.RuleID, error) {
	ids, err := d.AddRules(svc, []rule.Rule{r})
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// AddRules validates rules against the service's limits, compiles them
// and installs them on a service, all or none.
func (d *Datapath) AddRules(id model.ServiceID, rs []rule.Rule) ([]model.RuleID, error) {
	b := model.Batch{Add: rs}
	if err := d.compile(id, &b); err != nil {
		return nil, err
	}
	return d.Apply(id, b)
}

// compile fills b's compiled forms, for Apply, against the limits of
// service id's protocol.
func (d *Datapath) compile(id model.ServiceID, b *model.Batch) error {
	d.store.mu.Lock()
	svc, ok := d.store.services[id]
	d.store.mu.Unlock()
	if !ok {
		return fmt.Errorf("service %d: %w", id, model.ErrUnknownService)
	}
	return b.Compile(rule.LimitsFor(svc.info.Protocol))
}

// DeleteRules deletes rules of one service, all or none.
func (d *Datapath) DeleteRules(ids []model.RuleID) error {
	if len(ids) == 0 {
		return errors.New("empty batch")
	}
	svc, err := d.store.serviceOf(ids[0])
	if err != nil {
		return err
	}
	_, err = d.Apply(svc, model.Batch{Delete: ids})
	return err
}

// Apply makes one batch of changes to a service's rules: all land, or none
// does. It returns the ids of the added rules, in order. The batch carries
// its rules compiled (model.Batch.Compile, against the service's limits):
// Apply compiles nothing, and refuses a batch without them.
func (d *Datapath) Apply(id model.ServiceID, b model.Batch) ([]model.RuleID, error) {
	return d.store.apply(id, b)
}

func (st *store) apply(id model.ServiceID, b model.Batch) ([]model.RuleID, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	svc, ok := st.services[id]
	if !ok {
		return nil, fmt.Errorf("service %d: %w", id, model.ErrUnknownService)
	}
	if len(b.Add)+len(b.Replace)+len(b.Delete) == 0 {
		return nil, errors.New("empty batch")
	}
	if b.AddIDs != nil && len(b.AddIDs) != len(b.Add) {
		return nil, fmt.Errorf("%d ids for %d added rules", len(b.AddIDs), len(b.Add))
	}
	if (b.AddGuards != nil && len(b.AddGuards) != len(b.Add)) || (b.ReplaceGuards != nil && len(b.ReplaceGuards) != len(b.Replace)) {
		return nil, fmt.Errorf("%d guards for %d added rules, %d for %d replacements: one each, or none",
			len(b.AddGuards), len(b.Add), len(b.ReplaceGuards), len(b.Replace))
	}
	if len(b.AddCompiled) != len(b.Add) || len(b.ReplaceCompiled) != len(b.Replace) {
		return nil, fmt.Errorf("batch not compiled: %d compiled for %d added rules, %d for %d replacements (model.Batch.Compile)",
			len(b.AddCompiled), len(b.Add), len(b.ReplaceCompiled), len(b.Replace))
	}
	replaceIDs := make([]model.RuleID, len(b.Replace))
	for i, u := range b.Replace {
		replaceIDs[i] = u.ID
	}
	found, err := st.lookupRules(svc, replaceIDs, b.Delete)
	if err != nil {
		return nil, err
	}
	replaced, deleted := found[0], found[1]

	var added []*installedRule
	if b.AddIDs != nil {
		added, err = st.prepare(svc, b.Add, b.AddCompiled, b.AddGuards, func(i int) (model.RuleID, error) { return st.claimRuleID(b.AddIDs[i]) })
	} else {
		added, err = st.prepare(svc, b.Add, b.AddCompiled, b.AddGuards, func(int) (model.RuleID, error) { return st.newRuleID() })
	}
	if err != nil {
		return nil, err
	}
	replacements, err := st.prepare(svc, b.ReplaceRules(), b.ReplaceCompiled, b.ReplaceGuards, func(i int) (model.RuleID, error) { return replaceIDs[i], nil })
	if err != nil {
		st.unprepare(svc, added)
		return nil, err
	}
	if err := st.commit(svc, append(added, replacements...), replaced, deleted); err != nil {
		return nil, err
	}
	ids := make([]model.RuleID, len(added))
	for i, r := range added {
		ids[i] = r.id
	}
	return ids, nil
}

func slotsOf(rs []*installedRule) []uint32 {
	out := make([]uint32, len(rs))
	for i, r := range rs {
		out[i] = r.slot
	}
	return out
}

// serviceOf is the service a rule belongs to.
func (st *store) serviceOf(id model.RuleID) (model.ServiceID, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	r, ok := st.rules[id]
	if !ok {
		return 0, fmt.Errorf("rule %d: %w", id, model.ErrUnknownRule)
	}
	return r.svc.id, nil
}

// lookupRules finds the installed rules a batch replaces and deletes: each
// once, and all of svc.
func (st *store) lookupRules(svc *service, lists ...[]model.RuleID) ([][]*installedRule, error) {
	seen := map[model.RuleID]bool{}
	out := make([][]*installedRule, len(lists))
	for li, ids := range lists {
		for _, id := range ids {
			r, ok := st.rules[id]
			if !ok {
				return nil, fmt.Errorf("rule %d: %w", id, model.ErrUnknownRule)
			}
			if seen[id] {
				return nil, fmt.Errorf("rule %d appears twice in one batch", id)
			}
			seen[id] = true
			if r.svc != svc {
				return nil, fmt.Errorf("rule %d belongs to service %d, not to service %d: a batch touches one service",
					id, r.svc.id, svc.id)
			}
			out[li] = append(out[li], r)
		}
	}
	return out, nil
}

// prepare gives rules, compiled already, each a slot and the id idOf
// names, and its guard (guards: nil, or one or nil per rule). On error
// nothing stays allocated.
func (st *store) prepare(svc *service, rs []rule.Rule, compiled []rule.Compiled, guards []*model.Guard,
	idOf func(int) (model.RuleID, error)) ([]*installedRule, error) {
	out := make([]*installedRule, 0, len(rs))
	fail := func(i int, err error) ([]*installedRule, error) {
		st.unprepare(svc, out)
		return nil, fmt.Errorf("rule %d of the batch: %w", i, err)
	}
	maxReply := rule.LimitsFor(svc.info.Protocol).MaxReplyLen
	for i, r := range rs {
		// A cheap check that the compiled form is this rule's, for this
		// service: the records are sized by it.
		if n := len(compiled[i].Template); n != int(r.ReplyLen) || n > maxReply {
			return fail(i, fmt.Errorf("compiled reply of %d bytes for a reply of %d (limit %d): not the rule's compiled form", n, r.ReplyLen, maxReply))
		}
		ir := &installedRule{svc: svc, rule: r, compiled: compiled[i]}
		body := len(compiled[i].Template)
		if guards != nil && guards[i] != nil {
			g, err := st.guardOf(svc, guards[i])
			if err != nil {
				return fail(i, err)
			}
			if freshShape(r, compiled[i], guards[i].Key) {
				g.Flags = uint32(santaSantaGuardFlagSANTA_GUARD_FRESH)
			}
			ir.guard = g
			// The guard ends the reply area of the class that holds both.
			if body += guardLen; body > rule.MaxTCPReply {
				return fail(i, fmt.Errorf("a guarded reply of %d bytes: the limit is %d", len(compiled[i].Template), rule.MaxTCPReply-guardLen))
			}
		}
		class := classOf(body)
		number, err := st.slots[class].get()
		if err != nil {
			return fail(i, fmt.Errorf("rule capacity of %d reached: %w", st.slots[class].limit-1, err))
		}
		ir.slot = classSlot(number, class)
		if ir.id, err = idOf(i); err != nil {
			st.freeSlot(ir.slot)
			return fail(i, err)
		}
		out = append(out, ir)
	}
	return out, nil
}

func (st *store) newRuleID() (model.RuleID, error) {
	raw, err := st.ruleIDs.get()
	if err != nil {
		return 0, fmt.Errorf("rule capacity of %d reached: %w", st.ruleIDs.limit, err)
	}
	return model.RuleID(raw), nil
}

func (st *store) claimRuleID(id model.RuleID) (model.RuleID, error) {
	if st.reserved[id] {
		delete(st.reserved, id)
		return id, nil
	}
	if err := st.ruleIDs.claim(uint32(id)); err != nil {
		return 0, fmt.Errorf("rule id %d: %w", id, err)
	}
	return id, nil
}

// ReserveRuleIDs takes n rule ids for rules still to come, a transaction's,
// so that their owner learns them before the rules land: Apply with them
// as model.Batch.AddIDs lands rules under them. ReleaseRuleIDs gives back what
// did not land. Reserved ids count against the rule capacity.
func (d *Datapath) ReserveRuleIDs(n int) ([]model.RuleID, error) { return d.store.reserveRuleIDs(n) }

func (st *store) reserveRuleIDs(n int) ([]model.RuleID, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	ids := make([]model.RuleID, 0, n)
	for range n {
		id, err := st.newRuleID()
		if err != nil {
			for _, got := range ids {
				st.ruleIDs.put(uint32(got))
			}
			return nil, err
		}
		ids = append(ids, id)
	}
	st.reserved = maputil.Reserve(st.reserved, len(ids))
	for _, id := range ids {
		st.reserved[id] = true
	}
	return ids, nil
}

// ReleaseRuleIDs gives back the ids of ids that are still reserved; those
// that rules landed under (and those a refused Apply gave back already)
// are left alone, so it is safe to call after any Apply.
func (d *Datapath) ReleaseRuleIDs(ids []model.RuleID) { d.store.releaseRuleIDs(ids) }

func (st *store) releaseRuleIDs(ids []model.RuleID) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, id := range ids {
		if st.reserved[id] {
			delete(st.reserved, id)
			st.ruleIDs.put(uint32(id))
		}
	}
}

// unprepare gives back what prepare handed out for rules that did not land:
// their slots, and their ids unless they replace installed rules.
func (st *store) unprepare(svc *service, fresh []*installedRule) {
	for _, r := range fresh {
		st.freeSlot(r.slot)
		if _, replacing := svc.rules[r.id]; !replacing {
			st.ruleIDs.put(uint32(r.id))
		}
	}
}

// commit lands fresh rules (added ones, and the new versions of replaced
// ones) and drops replaced and deleted ones. Fresh rules are written to
// unused slots first; then the index is switched over: the touched roots'
// nodes one by one if the regions stay, else a whole new index generation
// behind one service update. Old slots (and deleted rule ids) are released
// after a barrier, so a reader sees a rule completely old or completely new,
// never a mix.
func (st *store) commit(svc *service, fresh, replaced, deleted []*installedRule) error {
	abort := func(err error) error {
		st.unprepare(svc, fresh)
		return err
	}
	add := make([]rules.Entry, len(fresh))
	for i, r := range fresh {
		add[i] = rules.Entry{Slot: r.slot, ID: uint32(r.id), Cond: r.rule.Condition}
	}
	var remove []uint32
	for _, r := range slices.Concat(replaced, deleted) {
		remove = append(remove, uint32(r.id))
	}
	// Planning the index and writing the bodies are independent, and each
	// takes about a second for a million rules: side by side, on two cores.
	var change *rules.IndexChange
	planned := make(chan error, 1)
	go func() {
		var err error
		change, err = svc.index.Plan(add, remove)
		planned <- err
	}()
	bodiesErr := st.writeBodies(fresh)
	if err := errors.Join(<-planned, bodiesErr); err != nil {
		st.deleteBodies(slotsOf(fresh))
		return abort(err)
	}
	for _, r := range fresh {
		r.compiled = rule.Compiled{}
	}
	var err error
	if change.Full {
		err = st.switchIndex(svc, change)
	} else if err = st.deleteRetiredReached(svc, change); err == nil {
		err = st.updateIndex(svc.indexID, change.Old, change.Index,
			func(k rules.IndexKey) bool { return svc.index.Walked(change, k) })
	}
	if err != nil {
		// The index is as before (or a fresh generation was dropped).
		st.deleteBodies(slotsOf(fresh))
		return abort(err)
	}
	svc.index.Apply(change)
	st.rules = maputil.Reserve(st.rules, len(fresh))
	svc.rules = maputil.Reserve(svc.rules, len(fresh))
	for _, r := range fresh {
		st.rules[r.id] = r
		svc.rules[r.id] = r
	}
	for _, r := range deleted {
		delete(svc.rules, r.id)
	}
	st.retire(replaced, false)
	st.retire(deleted, true)
	return nil
}

// switchIndex writes a new index generation for new regions, points the
// service at it in one update, then retires the old generation.
func (st *store) switchIndex(svc *service, change *rules.IndexChange) error {
	newID := st.newIndexID()
	if err := st.updateIndex(newID, nil, change.Index, nil); err != nil {
		st.deleteIndex(newID, change.Index)
		return err
	}
	oldID, oldRegions := svc.indexID, svc.regions
	svc.indexID, svc.regions = newID, change.Regions
	if err := st.objs.Services.Put(svc.info.Cookie, svc.value()); err != nil {
		svc.indexID, svc.regions = oldID, oldRegions
		st.deleteIndex(newID, change.Index)
		return fmt.Errorf("switching service %d to its new index: %w", svc.id, err)
	}
	st.retireIndex(oldID, svc.index.Keys())
	return nil
}
