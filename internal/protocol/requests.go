package protocol

import (
	"slices"

	"github.com/santa-offload/santa/rule"
)

// MaxClientName is the longest client name HELLO may carry.
const MaxClientName = 64

// Hello opens a connection: the versions the client speaks and its name.
type Hello struct {
	MinVersion uint16
	MaxVersion uint16
	Client     string // for logs; at most MaxClientName bytes
}

func (*Hello) Type() Type { return TypeHello }

func (h *Hello) fields(c codec) {
	c.u16("min_version", &h.MinVersion)
	c.u16("max_version", &h.MaxVersion)
	c.string16("client", &h.Client, MaxClientName)
}

// Attach registers the socket sent along with it by SCM_RIGHTS.
type Attach struct {
	Flags uint32 // 0
}

func (*Attach) Type() Type       { return TypeAttach }
func (a *Attach) fields(c codec) { c.u32("flags", &a.Flags) }

// Detach removes a service and its rules.
type Detach struct {
	ServiceID uint32
}

func (*Detach) Type() Type       { return TypeDetach }
func (d *Detach) fields(c codec) { c.u32("service_id", &d.ServiceID) }

// AddRules adds at least one rule, at once (Txn 0) or in a transaction.
type AddRules struct {
	ServiceID uint32
	Txn       uint32
	Rules     []rule.Rule
	// Guards (version 2) is nil, or holds one guard or nil for each rule;
	// decoded, it is nil unless a rule has a guard.
	Guards []*Guard
}

func (*AddRules) Type() Type { return TypeAddRules }

func (a *AddRules) fields(c codec) {
	c.u32("service_id", &a.ServiceID)
	c.u32("txn", &a.Txn)
	if a.Guards != nil && len(a.Guards) != len(a.Rules) {
		c.refuse("rules", "%d guards for %d rules: one each (nil for none), or none", len(a.Guards), len(a.Rules))
		return
	}
	n := c.count("rules", 4, 1, minRuleSize, len(a.Rules))
	guards := make([]*Guard, 0, n)
	each(c, "rules", &a.Rules, n, func(c codec, r *rule.Rule) {
		var g *Guard
		if a.Guards != nil {
			g = a.Guards[len(guards)]
		}
		ruleFields(c, r, &g)
		guards = append(guards, g)
	})
	if a.Guards == nil && slices.ContainsFunc(guards, func(g *Guard) bool { return g != nil }) {
		a.Guards = guards // decoded
	}
}

// ReplaceRules gives rules new contents; each keeps its id.
type ReplaceRules struct {
	ServiceID uint32
	Txn       uint32
	Updates   []RuleEntry
}

func (*ReplaceRules) Type() Type { return TypeReplaceRules }

func (r *ReplaceRules) fields(c codec) {
	c.u32("service_id", &r.ServiceID)
	c.u32("txn", &r.Txn)
	list(c, "updates", 4, 0, ruleEntrySize, &r.Updates, ruleEntryFields)
}

// DeleteRules removes rules by id.
type DeleteRules struct {
	ServiceID uint32
	Txn       uint32
	RuleIDs   []uint32
}

func (*DeleteRules) Type() Type { return TypeDeleteRules }

func (d *DeleteRules) fields(c codec) {
	c.u32("service_id", &d.ServiceID)
	c.u32("txn", &d.Txn)
	u32s(c, "rule_ids", &d.RuleIDs)
}

// Begin opens a transaction on a service.
type Begin struct {
	ServiceID uint32
}

func (*Begin) Type() Type       { return TypeBegin }
func (b *Begin) fields(c codec) { c.u32("service_id", &b.ServiceID) }

// Commit applies a transaction.
type Commit struct {
	Txn uint32
}

func (*Commit) Type() Type       { return TypeCommit }
func (m *Commit) fields(c codec) { c.u32("txn", &m.Txn) }

// Abort drops a transaction.
type Abort struct {
	Txn uint32
}

func (*Abort) Type() Type       { return TypeAbort }
func (a *Abort) fields(c codec) { c.u32("txn", &a.Txn) }

// ListServices asks for the client's services (every service for an
// admin). In version 7 it asks for one page of them, as ListRules does:
// those of id Start and above, at most Max (0: as many as fit one reply).
// Earlier versions have no pages (Start and Max are 0): their reply is
// every service, or an error if they do not fit one reply.
type ListServices struct {
	Start uint32 // version 7
	Max   uint32 // version 7
}

func (*ListServices) Type() Type { return TypeListServices }

func (l *ListServices) fields(c codec) {
	if c.version() >= Version7 {
		c.u32("start", &l.Start)
		c.u32("max", &l.Max)
		return
	}
	if l.Start != 0 || l.Max != 0 {
		c.refuse("start", "a page of services needs protocol version %d; this connection speaks version %d", Version7, c.version())
	}
}

// ListRules asks for one page of a service's rules.
type ListRules struct {
	ServiceID uint32
	Start     uint32 // the smallest rule id wanted
	Max       uint32 // at most this many; 0 = as many as fit
}

func (*ListRules) Type() Type { return TypeListRules }

func (l *ListRules) fields(c codec) {
	c.u32("service_id", &l.ServiceID)
	c.u32("start", &l.Start)
	c.u32("max", &l.Max)
}

// RuleStats asks for one page of a service's rule counters; its fields are
// those of ListRules.
type RuleStats ListRules

func (*RuleStats) Type() Type       { return TypeRuleStats }
func (r *RuleStats) fields(c codec) { (*ListRules)(r).fields(c) }

// ServiceStats asks for a service's counters.
type ServiceStats struct {
	ServiceID uint32
}

func (*ServiceStats) Type() Type       { return TypeServiceStats }
func (s *ServiceStats) fields(c codec) { c.u32("service_id", &s.ServiceID) }

// Status asks for the daemon's state.
type Status struct{ empty }

func (*Status) Type() Type { return TypeStatus }

// empty is the body of messages without fields.
type empty struct{}

func (*empty) fields(codec) {}
