package datapath

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/santa-offload/santa/internal/rules"
)

// RuleID names an installed rule; it stays the same when the rule is replaced.
type RuleID uint32

// ErrUnknownRule is returned for a RuleID that is not installed.
var ErrUnknownRule = errors.New("unknown rule")

type installedRule struct {
	id       RuleID
	svc      *service
	rule     rules.Rule
	compiled rules.Compiled
	slot     uint32 // where the data plane reads it; new on every replace
}

// RuleUpdate replaces the rule with ID by Rule.
type RuleUpdate struct {
	ID   RuleID
	Rule rules.Rule
}

// AddRule installs one rule on a service.
func (d *Datapath) AddRule(svc ServiceID, r rules.Rule) (RuleID, error) {
	ids, err := d.AddRules(svc, []rules.Rule{r})
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// AddRules installs rules on a service, all or none.
func (d *Datapath) AddRules(id ServiceID, rs []rules.Rule) ([]RuleID, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	svc, ok := d.services[id]
	if !ok {
		return nil, fmt.Errorf("service %d: %w", id, ErrUnknownService)
	}
	fresh, err := d.prepare(svc, rs, nil)
	if err != nil {
		return nil, err
	}
	next := maps.Clone(svc.rules)
	ids := make([]RuleID, len(fresh))
	for i, r := range fresh {
		next[r.id] = r
		ids[i] = r.id
	}
	if err := d.commit(svc, next, fresh, nil, nil); err != nil {
		return nil, err
	}
	return ids, nil
}

// ReplaceRule replaces one rule; readers see the old rule or the new one.
func (d *Datapath) ReplaceRule(id RuleID, r rules.Rule) error {
	return d.ReplaceRules([]RuleUpdate{{ID: id, Rule: r}})
}

// ReplaceRules replaces rules of one service, all or none.
func (d *Datapath) ReplaceRules(updates []RuleUpdate) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	ids := make([]RuleID, len(updates))
	rs := make([]rules.Rule, len(updates))
	for i, u := range updates {
		ids[i], rs[i] = u.ID, u.Rule
	}
	svc, old, err := d.lookupRules(ids)
	if err != nil {
		return err
	}
	fresh, err := d.prepare(svc, rs, ids)
	if err != nil {
		return err
	}
	next := maps.Clone(svc.rules)
	for _, r := range fresh {
		next[r.id] = r
	}
	return d.commit(svc, next, fresh, old, nil)
}

// DeleteRule deletes one rule.
func (d *Datapath) DeleteRule(id RuleID) error { return d.DeleteRules([]RuleID{id}) }

// DeleteRules deletes rules of one service, all or none.
func (d *Datapath) DeleteRules(ids []RuleID) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	svc, old, err := d.lookupRules(ids)
	if err != nil {
		return err
	}
	next := maps.Clone(svc.rules)
	for _, id := range ids {
		delete(next, id)
	}
	return d.commit(svc, next, nil, old, ids)
}

// Rules lists a service's rules in id order.
func (d *Datapath) Rules(id ServiceID) (map[RuleID]rules.Rule, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	svc, ok := d.services[id]
	if !ok {
		return nil, fmt.Errorf("service %d: %w", id, ErrUnknownService)
	}
	out := make(map[RuleID]rules.Rule, len(svc.rules))
	for id, r := range svc.rules {
		out[id] = r.rule
	}
	return out, nil
}

// lookupRules finds installed rules that must all belong to one service.
func (d *Datapath) lookupRules(ids []RuleID) (*service, []*installedRule, error) {
	if len(ids) == 0 {
		return nil, nil, errors.New("empty batch")
	}
	var svc *service
	out := make([]*installedRule, len(ids))
	seen := make(map[RuleID]bool, len(ids))
	for i, id := range ids {
		r, ok := d.rules[id]
		if !ok {
			return nil, nil, fmt.Errorf("rule %d: %w", id, ErrUnknownRule)
		}
		if seen[id] {
			return nil, nil, fmt.Errorf("rule %d appears twice in one batch", id)
		}
		seen[id] = true
		if svc != nil && r.svc != svc {
			return nil, nil, fmt.Errorf("rule %d belongs to service %d, the batch's other rules to service %d: a batch touches one service",
				id, r.svc.id, svc.id)
		}
		svc, out[i] = r.svc, r
	}
	return svc, out, nil
}

// prepare validates and compiles rules and gives each a slot and, unless it
// replaces one (ids), a new rule id. On error nothing stays allocated.
func (d *Datapath) prepare(svc *service, rs []rules.Rule, ids []RuleID) ([]*installedRule, error) {
	if len(rs) == 0 {
		return nil, errors.New("empty batch")
	}
	out := make([]*installedRule, 0, len(rs))
	release := func() { d.unprepare(svc, out) }
	for i, r := range rs {
		if err := r.Validate(rules.DefaultUDPLimits); err != nil {
			release()
			return nil, fmt.Errorf("rule %d of the batch: %w", i, err)
		}
		c, err := rules.Compile(r)
		if err != nil {
			release()
			return nil, fmt.Errorf("rule %d of the batch: %w", i, err)
		}
		ir := &installedRule{svc: svc, rule: r, compiled: c}
		if ir.slot, err = d.slots.get(); err != nil {
			release()
			return nil, fmt.Errorf("rule capacity of %d reached: %w", d.slots.limit-1, err)
		}
		if ids != nil {
			ir.id = ids[i]
		} else {
			raw, err := d.ruleIDs.get()
			if err != nil {
				d.slots.put(ir.slot)
				release()
				return nil, fmt.Errorf("rule capacity of %d reached: %w", d.ruleIDs.limit, err)
			}
			ir.id = RuleID(raw)
		}
		out = append(out, ir)
	}
	if ids == nil {
		for _, r := range out {
			if err := d.resetRuleStats(r.id); err != nil {
				release()
				return nil, err
			}
		}
	}
	return out, nil
}

// unprepare gives back what prepare handed out for rules that did not land:
// their slots, and their ids unless they replace installed rules.
func (d *Datapath) unprepare(svc *service, fresh []*installedRule) {
	for _, r := range fresh {
		d.slots.put(r.slot)
		if _, replacing := svc.rules[r.id]; !replacing {
			d.ruleIDs.put(uint32(r.id))
		}
	}
}

// commit makes next the service's rule set. Fresh rules are written to
// unused slots first; then the index is switched over: entry by entry if the
// regions stay, else as a whole new index generation behind one service
// update. Old slots (and deleted rule ids) are released after a barrier, so
// a reader sees a rule completely old or completely new, never a mix.
func (d *Datapath) commit(svc *service, next map[RuleID]*installedRule, fresh, old []*installedRule,
	deleted []RuleID) error {
	abort := func(err error) error {
		d.unprepare(svc, fresh)
		return err
	}
	entries := make([]rules.Entry, 0, len(next))
	conds := make([]rules.Condition, 0, len(next))
	for _, r := range next {
		entries = append(entries, rules.Entry{Slot: r.slot, ID: uint32(r.id), Cond: r.rule.Condition})
		conds = append(conds, r.rule.Condition)
	}
	if err := rules.CheckDuplicates(entries); err != nil {
		return abort(err)
	}
	regions, err := rules.Regions(conds, rules.DefaultUDPLimits.MaxRegions)
	if err != nil {
		return abort(err)
	}
	index, err := rules.BuildIndex(regions, entries)
	if err != nil {
		return abort(err)
	}

	if err := d.writeBodies(fresh); err != nil {
		d.deleteBodies(fresh)
		return abort(err)
	}
	if slices.Equal(regions, svc.regions) {
		err = d.updateIndex(svc.indexID, svc.index, index)
	} else {
		err = d.switchIndex(svc, regions, index)
	}
	if err != nil {
		// The index is as before (or a fresh generation was dropped).
		d.deleteBodies(fresh)
		return abort(err)
	}
	svc.index = index
	for _, r := range fresh {
		d.rules[r.id] = r
	}
	for _, id := range deleted {
		delete(d.rules, id)
	}
	svc.rules = next
	d.retire(old, deleted != nil)
	return nil
}

// switchIndex writes a new index generation for new regions, points the
// service at it in one update, then retires the old generation.
func (d *Datapath) switchIndex(svc *service, regions []rules.Region, index map[rules.IndexKey]rules.IndexNode) error {
	newID := d.newIndexID()
	if err := d.updateIndex(newID, nil, index); err != nil {
		d.deleteIndex(newID, index)
		return err
	}
	oldID, oldRegions := svc.indexID, svc.regions
	svc.indexID, svc.regions = newID, regions
	if err := d.objs.Services.Put(svc.info.Cookie, svc.value()); err != nil {
		svc.indexID, svc.regions = oldID, oldRegions
		d.deleteIndex(newID, index)
		return fmt.Errorf("switching service %d to its new index: %w", svc.id, err)
	}
	d.retireIndex(oldID, slices.Collect(maps.Keys(svc.index)))
	return nil
}
