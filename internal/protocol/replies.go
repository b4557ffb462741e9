package protocol

import "syscall"

// LastPage is the next of the last page of LIST_RULES, RULE_STATS and
// (version 7) LIST_SERVICES.
const LastPage = 0xffffffff

// HelloReply is the version agreed and who the daemon thinks the client is.
type HelloReply struct {
	Version    uint16
	UID        uint32
	GID        uint32
	PID        uint32
	Admin      bool   // may manage every service
	QuotaRules uint32 // 0 = unlimited
	QuotaBytes uint64 // 0 = unlimited
	Daemon     string // the daemon's version text
}

func (*HelloReply) Type() Type { return TypeHello | ReplyBit }

func (h *HelloReply) fields(c codec) {
	c.u16("version", &h.Version)
	c.u32("uid", &h.UID)
	c.u32("gid", &h.GID)
	c.u32("pid", &h.PID)
	c.flag("admin", &h.Admin)
	c.u32("quota_rules", &h.QuotaRules)
	c.u64("quota_bytes", &h.QuotaBytes)
	c.string16("daemon", &h.Daemon, maxLen16)
}

// The ATTACH reply is a ServiceInfo.

// DetachReply is the empty reply to DETACH.
type DetachReply struct{ empty }

func (*DetachReply) Type() Type { return TypeDetach | ReplyBit }

// AddRulesReply holds the new rules' ids, in request order. Inside a
// transaction they are the ids the rules get if COMMIT lands them, held
// for the transaction until it ends.
type AddRulesReply struct {
	RuleIDs []uint32
}

func (*AddRulesReply) Type() Type       { return TypeAddRules | ReplyBit }
func (a *AddRulesReply) fields(c codec) { u32s(c, "rule_ids", &a.RuleIDs) }

// ReplaceRulesReply is the empty reply to REPLACE_RULES.
type ReplaceRulesReply struct{ empty }

func (*ReplaceRulesReply) Type() Type { return TypeReplaceRules | ReplyBit }

// DeleteRulesReply is the empty reply to DELETE_RULES.
type DeleteRulesReply struct{ empty }

func (*DeleteRulesReply) Type() Type { return TypeDeleteRules | ReplyBit }

// BeginReply holds the new transaction's id (never 0).
type BeginReply struct {
	Txn uint32
}

func (*BeginReply) Type() Type       { return TypeBegin | ReplyBit }
func (b *BeginReply) fields(c codec) { c.u32("txn", &b.Txn) }

// CommitReply tells how many rules the transaction added. Their ids came
// with the ADD_RULES replies that staged them: a large transaction's ids
// would not fit in one message.
type CommitReply struct {
	Added uint32
}

func (*CommitReply) Type() Type       { return TypeCommit | ReplyBit }
func (m *CommitReply) fields(c codec) { c.u32("added", &m.Added) }

// AbortReply is the empty reply to ABORT.
type AbortReply struct{ empty }

func (*AbortReply) Type() Type { return TypeAbort | ReplyBit }

// ListServicesReply holds the services the client may see, in rising id
// order. In version 7 it is one page of them, as ListRulesReply is: Next
// is the start of the next page, or LastPage. Earlier versions have no
// next (Next is 0 there): the reply is the whole list.
type ListServicesReply struct {
	Next     uint32 // version 7
	Services []ServiceInfo
}

func (*ListServicesReply) Type() Type { return TypeListServices | ReplyBit }

// In version 7 the count comes before next, as in LIST_RULES' reply.
func (l *ListServicesReply) fields(c codec) {
	item := func(c codec, s *ServiceInfo) { s.fields(c) }
	if c.version() < Version7 {
		// Never a cut list where the whole is due.
		if l.Next != 0 && l.Next != LastPage {
			c.refuse("next", "a page of services needs protocol version %d; this connection speaks version %d", Version7, c.version())
		}
		list(c, "services", 4, 0, serviceSize, &l.Services, item)
		return
	}
	n := c.count("services", 4, 0, serviceSize, len(l.Services))
	c.u32("next", &l.Next)
	each(c, "services", &l.Services, n, item)
}

// ListRulesReply is one page of rules, in rising id order.
type ListRulesReply struct {
	Next  uint32 // the start of the next page, or LastPage
	Rules []RuleEntry
}

func (*ListRulesReply) Type() Type { return TypeListRules | ReplyBit }

// On the wire the count comes before next, apart from its items.
func (l *ListRulesReply) fields(c codec) {
	n := c.count("rules", 4, 0, ruleEntrySize, len(l.Rules))
	c.u32("next", &l.Next)
	each(c, "rules", &l.Rules, n, ruleEntryFields)
}

// RuleStatsReply is one page of rule counters, in rising id order.
type RuleStatsReply struct {
	Next     uint32 // the start of the next page, or LastPage
	Counters []RuleCounters
}

func (*RuleStatsReply) Type() Type { return TypeRuleStats | ReplyBit }

func (r *RuleStatsReply) fields(c codec) {
	n := c.count("counters", 4, 0, countersSize, len(r.Counters))
	c.u32("next", &r.Next)
	each(c, "counters", &r.Counters, n, ruleCountersFields)
}

// ServiceStatsReply holds a service's counters, summed over CPUs.
type ServiceStatsReply struct {
	Matched   uint64 // answered by the data plane, in XDP or in TC
	Passed    uint64
	Fallback  uint64 // answered in TC rather than XDP: the sum of the TC counters below
	BadCsum   uint64
	Rules     uint32
	RuleBytes uint64 // condition plus reply bytes of the rules
	// Version 2: answered in TC rather than XDP, by why (model.ServiceStats).
	TCChecksum, TCTooLong, TCNoXDP uint64
}

func (*ServiceStatsReply) Type() Type { return TypeServiceStats | ReplyBit }

func (s *ServiceStatsReply) fields(c codec) {
	c.u64("matched", &s.Matched)
	c.u64("passed", &s.Passed)
	c.u64("fallback", &s.Fallback)
	c.u64("bad_csum", &s.BadCsum)
	c.u32("rules", &s.Rules)
	c.u64("rule_bytes", &s.RuleBytes)
	if c.version() >= Version2 {
		c.u64("tc_checksum", &s.TCChecksum)
		c.u64("tc_too_long", &s.TCTooLong)
		c.u64("tc_no_xdp", &s.TCNoXDP)
	}
}

// StatusReply is the daemon's state.
type StatusReply struct {
	Daemon     string
	Rules      uint32 // installed on the host
	Capacity   uint32 // rules per host
	Services   uint32
	Interfaces []Interface
}

func (*StatusReply) Type() Type { return TypeStatus | ReplyBit }

func (s *StatusReply) fields(c codec) {
	c.string16("daemon", &s.Daemon, maxLen16)
	c.u32("rules", &s.Rules)
	c.u32("capacity", &s.Capacity)
	c.u32("services", &s.Services)
	list(c, "interfaces", 2, 0, minInterfaceSize, &s.Interfaces, interfaceFields)
}

func (*Error) Type() Type { return TypeError }

func (e *Error) fields(c codec) {
	code := uint32(e.Code)
	c.u32("code", &code)
	e.Code = syscall.Errno(code)
	c.u32("index", &e.Index)
	c.string16("message", &e.Message, MaxErrorMessage)
}
