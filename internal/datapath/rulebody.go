package datapath

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/cilium/ebpf"
)

// Rule bodies live in one map per size class of their reply (santa_abi.h),
// so that a rule costs the kernel memory and install time its reply needs.
// A slot's top bits name the class; the rest is its number in d.slots.

const slotClassShift = uint32(santaSantaSlotLayoutSANTA_SLOT_CLASS_SHIFT)

const (
	smallRule  = santaSantaRuleClassSANTA_RULE_SMALL
	mediumRule = santaSantaRuleClassSANTA_RULE_MEDIUM
	largeRule  = santaSantaRuleClassSANTA_RULE_LARGE
	hugeRule   = santaSantaRuleClassSANTA_RULE_HUGE
)

// classOf is the smallest class whose bodies hold a reply of n bytes.
func classOf(n int) santaSantaRuleClass {
	switch {
	case n <= len(santaSantaRuleSmall{}.Reply):
		return smallRule
	case n <= len(santaSantaRuleMedium{}.Reply):
		return mediumRule
	case n <= len(santaSantaRuleLarge{}.Reply):
		return largeRule
	}
	return hugeRule
}

func classSlot(number uint32, c santaSantaRuleClass) uint32 {
	return number | uint32(c)<<slotClassShift
}

func slotNumber(slot uint32) uint32 { return slot & (1<<slotClassShift - 1) }

func slotClass(slot uint32) santaSantaRuleClass { return santaSantaRuleClass(slot >> slotClassShift) }

// bodies is the map of a class's rule bodies.
func (d *Datapath) bodies(c santaSantaRuleClass) *ebpf.Map {
	switch c {
	case smallRule:
		return d.objs.RulesSmall
	case mediumRule:
		return d.objs.RulesMedium
	case largeRule:
		return d.objs.RulesLarge
	}
	return d.objs.RulesHuge
}

// batchBytes bounds the buffer one batch of bodies takes.
const batchBytes = 4 << 20

// writeBodies stores compiled rules in their (unused) slots.
func (d *Datapath) writeBodies(rs []*installedRule) error {
	byClass := map[santaSantaRuleClass][]*installedRule{}
	for _, r := range rs {
		c := slotClass(r.slot)
		byClass[c] = append(byClass[c], r)
	}
	return errors.Join(
		writeClass(d.objs.RulesSmall, byClass[smallRule], func(v *santaSantaRuleSmall) (*santaSantaRule, []byte) {
			return &v.Rule, v.Reply[:]
		}),
		writeClass(d.objs.RulesMedium, byClass[mediumRule], func(v *santaSantaRuleMedium) (*santaSantaRule, []byte) {
			return &v.Rule, v.Reply[:]
		}),
		writeClass(d.objs.RulesLarge, byClass[largeRule], func(v *santaSantaRuleLarge) (*santaSantaRule, []byte) {
			return &v.Rule, v.Reply[:]
		}),
		writeClass(d.objs.RulesHuge, byClass[hugeRule], func(v *santaSantaRuleHuge) (*santaSantaRule, []byte) {
			return &v.Rule, v.Reply[:]
		}),
	)
}

// writeClass writes the bodies of rules of one class in batches; parts
// names a body's head and reply area. Bodies are built in place in the
// batch buffer: at a million rules every copy of a body costs.
func writeClass[V any](m *ebpf.Map, rs []*installedRule, parts func(*V) (*santaSantaRule, []byte)) error {
	// A batch holds up to batchBytes of bodies: 2048 huge ones would be
	// 128 MiB.
	var zero V
	size := max(1, min(batchSize, batchBytes/int(unsafe.Sizeof(zero))))
	keys := make([]uint32, min(len(rs), size))
	vals := make([]V, len(keys))
	for chunk := range slices.Chunk(rs, size) {
		ks, vs := keys[:len(chunk)], vals[:len(chunk)]
		clear(vs)
		for i, r := range chunk {
			head, reply := parts(&vs[i])
			writeHead(head, r)
			copy(reply, r.compiled.Template)
			ks[i] = r.slot
		}
		if _, err := m.BatchUpdate(ks, vs, nil); err != nil {
			return fmt.Errorf("writing rules: %w", err)
		}
	}
	return nil
}

// deleteBodies deletes the bodies in slots, ignoring those already gone.
func (d *Datapath) deleteBodies(slots []uint32) error {
	byClass := map[santaSantaRuleClass][]uint32{}
	for _, s := range slots {
		byClass[slotClass(s)] = append(byClass[slotClass(s)], s)
	}
	var errs []error
	for c, keys := range byClass {
		errs = append(errs, batchDelete(d.bodies(c), keys, "rules"))
	}
	return errors.Join(errs...)
}

// writeHead writes what matching reads of a rule, all of it but the
// reply, into v (zeroed).
func writeHead(v *santaSantaRule, r *installedRule) {
	c := r.compiled
	v.RuleId = uint32(r.id)
	v.ServiceId = uint32(r.svc.id)
	v.Slot = r.slot
	v.CondOff = r.rule.Condition.Offset
	v.CondLen = uint16(len(r.rule.Condition.Pattern))
	v.ReplyLen = uint16(len(c.Template))
	v.Ncopies = uint8(len(c.Copies))
	v.ReplyCsum = c.Csum
	for i, p := range c.Copies {
		v.Copies[i] = santaSantaCopy{Src: p.Src, Dst: p.Dst, Len: p.Len}
	}
	copy(v.Cond[:], r.rule.Condition.Pattern)
}
