package protocol

// The messages of protocol version 2 that keep a memcached service's rules
// from answering a value older than a write (docs/memcached.md): PARSER
// marks a service as memcached's, GENERATION reads what a guard is built
// at, MEMCACHED_STATS reads a domain's counters. The guard itself travels
// with its rule (shared.go).

// Parser kinds (model.ParserKind).
const (
	ParserNone      = 0
	ParserMemcached = 1
)

// Parser sets how the data plane reads a service's requests, and the
// generation domain its writes bump: Domain is the service that starts it
// (the service itself) or one that has.
type Parser struct {
	ServiceID uint32
	Kind      uint8
	Domain    uint32
}

func (*Parser) Type() Type { return TypeParser }

func (p *Parser) fields(c codec) {
	c.u32("service_id", &p.ServiceID)
	c.u8("kind", &p.Kind)
	c.u32("domain", &p.Domain)
}

// ParserReply is the empty reply to PARSER.
type ParserReply struct{ empty }

func (*ParserReply) Type() Type { return TypeParser | ReplyBit }

// Generation asks what the data plane holds now for a key of a memcached
// service's domain.
type Generation struct {
	ServiceID uint32
	Key       []byte
}

func (*Generation) Type() Type { return TypeGeneration }

func (g *Generation) fields(c codec) {
	c.u32("service_id", &g.ServiceID)
	c.bytes16("key", &g.Key)
}

// GenerationReply is what a guard of the key is built at (model.Generation).
type GenerationReply struct {
	Gen       uint32
	DomainGen uint32
	Epoch     uint32 // the domain's life; 0: dead
	InFlight  bool
	Fresh     bool // version 3: the kernel answers the key's rules with a set's value at Gen
}

func (*GenerationReply) Type() Type { return TypeGeneration | ReplyBit }

func (g *GenerationReply) fields(c codec) {
	c.u32("gen", &g.Gen)
	c.u32("domain_gen", &g.DomainGen)
	c.u32("epoch", &g.Epoch)
	c.flag("in_flight", &g.InFlight)
	if c.version() >= Version3 {
		c.flag("fresh", &g.Fresh)
	}
}

// MemcachedStats asks for the counters of a memcached service's domain.
type MemcachedStats struct {
	ServiceID uint32
}

func (*MemcachedStats) Type() Type       { return TypeMemcachedStats }
func (m *MemcachedStats) fields(c codec) { c.u32("service_id", &m.ServiceID) }

// MemcachedStatsReply holds a domain's counters, summed over CPUs
// (model.MemcachedStats): the same for every service of the domain.
type MemcachedStatsReply struct {
	Domain                                                             uint32
	Writes, KeyBumps, DomainBumps, Completed, Released, Overflow, Lost uint64
	GuardStale, GuardInFlight, GuardExpired                            uint64
	// Version 3:
	UDPHeld, UDPTimedOut, UDPDomain, DelayedFlush, Refreshed, FreshTorn uint64
	// Version 4:
	Filled uint64
}

func (*MemcachedStatsReply) Type() Type { return TypeMemcachedStats | ReplyBit }

func (m *MemcachedStatsReply) fields(c codec) {
	c.u32("domain", &m.Domain)
	c.u64("writes", &m.Writes)
	c.u64("key_bumps", &m.KeyBumps)
	c.u64("domain_bumps", &m.DomainBumps)
	c.u64("completed", &m.Completed)
	c.u64("released", &m.Released)
	c.u64("overflow", &m.Overflow)
	c.u64("lost", &m.Lost)
	c.u64("guard_stale", &m.GuardStale)
	c.u64("guard_inflight", &m.GuardInFlight)
	c.u64("guard_expired", &m.GuardExpired)
	if c.version() >= Version3 {
		c.u64("udp_held", &m.UDPHeld)
		c.u64("udp_timed_out", &m.UDPTimedOut)
		c.u64("udp_domain", &m.UDPDomain)
		c.u64("delayed_flush", &m.DelayedFlush)
		c.u64("refreshed", &m.Refreshed)
		c.u64("fresh_torn", &m.FreshTorn)
	}
	if c.version() >= Version4 {
		c.u64("filled", &m.Filled)
	}
}

// Guard (version 2, a rule's flags bit 1) holds a rule of a memcached
// service back unless what it answers is still current (model.Guard).
type Guard struct {
	Key       []byte // empty: the domain's generation alone
	Gen       uint32 // GENERATION's, read before the value was
	DomainGen uint32
	Epoch     uint32 // never 0: a dead domain's guard never answers
	// ExpiresInMS: from the batch's application on, the rule stops
	// answering after this many milliseconds; 0: never. In a LIST_RULES
	// page, the time left, rounded up (1 once past).
	ExpiresInMS uint32
}

func guardFields(c codec, g *Guard) {
	c.bytes16("key", &g.Key)
	if len(g.Key) == 0 {
		g.Key = nil // one value for no key
	}
	c.u32("gen", &g.Gen)
	c.u32("domain_gen", &g.DomainGen)
	c.u32("epoch", &g.Epoch)
	c.u32("expires_in_ms", &g.ExpiresInMS)
	if g.Epoch == 0 {
		c.refuse("epoch", "is 0, a dead domain's, whose guards never answer: read GENERATION of a started domain")
	}
}
