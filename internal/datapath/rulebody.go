package datapath

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf"
)

// Rule bodies live in one map per size class of their reply (santa_abi.h),
// so that a rule costs the kernel memory and install time its reply needs.
// A slot's top bits name the class; the rest is its number in the class's
// pool (st.slots). The UDP classes are arrays of chunks (chunks.go); huge
// bodies, TCP only, are a hash map allocated per rule.

const slotClassShift = uint32(santaSantaSlotLayoutSANTA_SLOT_CLASS_SHIFT)

const (
	smallRule   = santaSantaRuleClassSANTA_RULE_SMALL
	mediumRule  = santaSantaRuleClassSANTA_RULE_MEDIUM
	largeRule   = santaSantaRuleClassSANTA_RULE_LARGE
	hugeRule    = santaSantaRuleClassSANTA_RULE_HUGE
	ruleClasses = hugeRule + 1
)

// chunkedClassMaps names the map of each chunked class.
var chunkedClassMaps = [hugeRule]string{smallRule: "rules_small", mediumRule: "rules_medium", largeRule: "rules_large"}

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

// freeSlot gives a slot back to its class's pool.
func (st *store) freeSlot(slot uint32) { st.slots[slotClass(slot)].put(slotNumber(slot)) }

// bodyAt is the map that holds the body of slot, and the body's key there.
// Called with st.mu held: it may make a chunk.
func (st *store) bodyAt(slot uint32) (*ebpf.Map, uint32, error) {
	if c := slotClass(slot); c < hugeRule {
		return st.chunks[c].at(slotNumber(slot))
	}
	return st.objs.RulesHuge, slot, nil
}

// batchBytes bounds the buffer one batch of bodies takes.
const batchBytes = 4 << 20

// writeBodies stores compiled rules in their (unused) slots. Called with
// st.mu held.
func (st *store) writeBodies(rs []*installedRule) error {
	byClass := map[santaSantaRuleClass][]*installedRule{}
	for _, r := range rs {
		c := slotClass(r.slot)
		byClass[c] = append(byClass[c], r)
	}
	return errors.Join(
		writeClass(st.bodyAt, byClass[smallRule], func(v *santaSantaRuleSmall) (*santaSantaRule, []byte) {
			return &v.Rule, v.Reply[:]
		}),
		writeClass(st.bodyAt, byClass[mediumRule], func(v *santaSantaRuleMedium) (*santaSantaRule, []byte) {
			return &v.Rule, v.Reply[:]
		}),
		writeClass(st.bodyAt, byClass[largeRule], func(v *santaSantaRuleLarge) (*santaSantaRule, []byte) {
			return &v.Rule, v.Reply[:]
		}),
		writeClass(st.bodyAt, byClass[hugeRule], func(v *santaSantaRuleHuge) (*santaSantaRule, []byte) {
			return &v.Rule, v.Reply[:]
		}),
	)
}

// writeClass writes the bodies of rules of one class in batches, one per
// map (chunk) that at places them in; parts names a body's head and reply
// area. Bodies are built in place in the batch buffer: at a million rules
// every copy of a body costs.
func writeClass[V any](at func(slot uint32) (*ebpf.Map, uint32, error), rs []*installedRule,
	parts func(*V) (*santaSantaRule, []byte)) error {
	// A batch holds up to batchBytes of bodies: 2048 huge ones would be
	// 128 MiB.
	var zero V
	size := max(1, min(batchSize, batchBytes/int(unsafe.Sizeof(zero))))
	keys := make([]uint32, 0, min(len(rs), size))
	vals := make([]V, cap(keys))
	var to *ebpf.Map
	flush := func() error {
		if len(keys) == 0 {
			return nil
		}
		_, err := to.BatchUpdate(keys, vals[:len(keys)], nil)
		keys = keys[:0]
		if err != nil {
			return fmt.Errorf("writing rules: %w", err)
		}
		return nil
	}
	for _, r := range rs {
		m, key, err := at(r.slot)
		if err != nil {
			return err
		}
		if m != to || len(keys) == size {
			if err := flush(); err != nil {
				return err
			}
			to = m
		}
		v := &vals[len(keys)]
		*v = zero
		head, reply := parts(v)
		writeHead(head, r)
		copy(reply, r.compiled.Template)
		if r.guard != nil {
			putGuard(reply, r.guard)
		}
		keys = append(keys, key)
	}
	return flush()
}

// deleteBodies deletes the huge bodies in slots, ignoring those already
// gone. A chunked class's bodies stay until their slot is written again:
// no index node refers to them any more.
func (st *store) deleteBodies(slots []uint32) error {
	var huge []uint32
	for _, s := range slots {
		if slotClass(s) == hugeRule {
			huge = append(huge, s)
		}
	}
	return batchDelete(st.objs.RulesHuge, huge, "rules")
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
	v.ReqMin = r.rule.Condition.MinLen
	v.ReqMax = r.rule.Condition.MaxLen
	v.ReplyLen = uint16(len(c.Template))
	v.Ncopies = uint8(len(c.Copies))
	if r.guard != nil {
		v.Flags = uint8(santaSantaRuleFlagSANTA_RULE_GUARDED)
		if readOnlyDatagram(r.rule.Condition) {
			v.Flags |= uint8(santaSantaRuleFlagSANTA_RULE_READ_ONLY)
		}
	}
	v.ReplyCsum = c.Csum
	for i, p := range c.Copies {
		v.Copies[i] = santaSantaCopy{Src: p.Src, Dst: p.Dst, Len: p.Len}
	}
	copy(v.Cond[:], r.rule.Condition.Pattern)
}
