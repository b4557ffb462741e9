package protocol

import "github.com/santa-offload/santa/rule"

// The shared structures of docs/protocol.md.

// Smallest encodings, which bound a count before its items are allocated.
const (
	minRuleSize      = 8 // cond_off, empty pattern, reply_len, nproc, flags (no length condition)
	minProcessorSize = 6 // kind, reserved, dst, empty bytes
	ruleEntrySize    = 4 + minRuleSize
	serviceSize      = 48
	countersSize     = 20
	minInterfaceSize = 9 // ifindex, empty name, empty xdp, tc
)

// processorKinds names the processor kinds by value, for the wire's kind
// byte and the JSON form's key.
var processorKinds = []string{
	rule.ProcessorPut:  "put",
	rule.ProcessorCopy: "copy",
}

// ruleFields is a rule and its guard (*g: nil for none; a decoded guard
// is allocated there).
func ruleFields(c codec, r *rule.Rule, g **Guard) {
	c.u16("cond_off", &r.Condition.Offset)
	c.bytes16("pattern", &r.Condition.Pattern)
	c.u16("reply_len", &r.ReplyLen)
	n := c.count("processors", 1, 0, minProcessorSize, len(r.Processors))
	ruleFlags(c, &r.Condition, g)
	each(c, "processors", &r.Processors, n, processorFields)
}

// A rule's flags (version 2): bit 0, min_len and max_len follow; bit 1, a
// guard follows them.
const (
	ruleFlagLength = 1
	ruleFlagGuard  = 2
)

// ruleFlags is a rule's flags byte and what it announces. Version 1 has no
// flags (0), no length condition and no guard: a rule with either cannot
// be sent in it.
func ruleFlags(c codec, cond *rule.Condition, g **Guard) {
	if c.version() < Version2 {
		if cond.HasLength() {
			c.refuse("flags", "a length condition needs protocol version %d; this connection speaks version %d", Version2, c.version())
		}
		if *g != nil {
			c.refuse("flags", "a guard needs protocol version %d; this connection speaks version %d", Version2, c.version())
		}
		c.zero("flags")
		return
	}
	var flags uint8
	if cond.HasLength() {
		flags |= ruleFlagLength
	}
	if *g != nil {
		flags |= ruleFlagGuard
	}
	c.u8("flags", &flags)
	if flags&^(ruleFlagLength|ruleFlagGuard) != 0 {
		c.refuse("flags", "is %#02x; version %d defines bit 0 (a length condition follows) and bit 1 (a guard follows) only", flags, c.version())
	}
	if flags&ruleFlagLength != 0 {
		c.u16("min_len", &cond.MinLen)
		c.u16("max_len", &cond.MaxLen)
		if !cond.HasLength() { // every body has one encoding
			c.refuse("max_len", "min_len and max_len are 0, which allows every length: that is flags bit 0 clear")
		}
	}
	if flags&ruleFlagGuard != 0 {
		if *g == nil {
			*g = &Guard{}
		}
		c.object("guard", func(c codec) { guardFields(c, *g) })
	}
}

func processorFields(c codec, p *rule.Processor) {
	kind := uint8(p.Kind)
	c.variant(processorKinds, &kind, func(c codec) {
		switch rule.ProcessorKind(kind) {
		case rule.ProcessorPut:
			c.u16("dst", &p.DstOffset)
			c.bytes16("bytes", &p.Bytes)
		case rule.ProcessorCopy:
			c.u16("src", &p.SrcOffset)
			c.u16("len", &p.Length)
			c.u16("dst", &p.DstOffset)
		}
	})
	// Written only if decoding changed it: encoding must not write to the
	// rule it reads, which others may be reading too (a race, if a
	// harmless one, that -race reported in internal/cli's tests).
	if k := rule.ProcessorKind(kind); p.Kind != k {
		p.Kind = k
	}
}

// RuleEntry is a rule with its id: an update of REPLACE_RULES, an item of a
// LIST_RULES page. Guard (version 2) is nil for a rule without one.
type RuleEntry struct {
	RuleID uint32
	Rule   rule.Rule
	Guard  *Guard
}

func ruleEntryFields(c codec, e *RuleEntry) {
	c.u32("rule_id", &e.RuleID)
	c.object("rule", func(c codec) { ruleFields(c, &e.Rule, &e.Guard) })
}

// ServiceInfo is a service: the ATTACH reply, an item of LIST_SERVICES'.
type ServiceInfo struct {
	ServiceID   uint32
	Protocol    uint8    // 17 (UDP) or 6 (TCP)
	Family      uint8    // 4 or 6
	Port        uint16   // local port
	Addr        [16]byte // local address; IPv4 in the first 4 bytes
	Cookie      uint64   // the socket's SO_COOKIE
	NetnsCookie uint64   // the socket's SO_NETNS_COOKIE
	OwnerUID    uint32
	Rules       uint32 // rules installed now
	// Manager is the HELLO name of the client that attached the service
	// or last set its learning (version 2).
	Manager string
}

func (*ServiceInfo) Type() Type { return TypeAttach | ReplyBit }

func (s *ServiceInfo) fields(c codec) {
	c.u32("service_id", &s.ServiceID)
	c.u8("protocol", &s.Protocol)
	c.u8("family", &s.Family)
	c.u16("port", &s.Port)
	c.addr("addr", &s.Addr)
	c.u64("cookie", &s.Cookie)
	c.u64("netns_cookie", &s.NetnsCookie)
	c.u32("owner_uid", &s.OwnerUID)
	c.u32("rules", &s.Rules)
	if c.version() >= 2 {
		c.string16("manager", &s.Manager, MaxClientName)
	}
}

// RuleCounters are one rule's counters, summed over CPUs.
type RuleCounters struct {
	RuleID uint32
	Hits   uint64
	Bytes  uint64
}

func ruleCountersFields(c codec, r *RuleCounters) {
	c.u32("rule_id", &r.RuleID)
	c.u64("hits", &r.Hits)
	c.u64("bytes", &r.Bytes)
}

// Interface is a network interface santad has attached to (STATUS).
type Interface struct {
	Ifindex uint32
	Name    string
	XDP     string // "native", "generic" or "none"
	TC      bool   // the TC program is attached
}

func interfaceFields(c codec, i *Interface) {
	c.u32("ifindex", &i.Ifindex)
	c.string16("name", &i.Name, maxLen16)
	c.string16("xdp", &i.XDP, maxLen16)
	c.flag("tc", &i.TC)
}
