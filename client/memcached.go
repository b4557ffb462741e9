package client

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/rule"
)

// memcached invalidation (docs/memcached.md, "Using it from santad"):
// services marked memcached's have their writes seen by the data plane,
// and their rules may carry a guard that stops them answering once the
// value they answer may be older than a write. All of it is protocol
// version 2, and none of it survives a restart of santad.
//
// A guard is no part of a rule (package rule): it matches nothing, it is
// a condition of the data plane's state under which the rule may answer.
// So it travels beside the rule: in GuardedRule when a rule is added, in
// RuleEntry when one is replaced or listed.

// ParserKind says how the data plane reads a service's requests.
type ParserKind uint8

const (
	ParserNone      ParserKind = protocol.ParserNone
	ParserMemcached ParserKind = protocol.ParserMemcached
)

// Parser is a service's parser and its generation domain: the service that
// starts the domain (the service itself) or one that has. The services of
// one memcached (its UDP socket, its TCP listener) share a domain; both
// must be the caller's.
type Parser struct {
	Kind   ParserKind
	Domain uint32
}

// SetParser marks a service as a memcached service of a domain, or not
// (ParserNone) (PARSER). Mark the TCP listener right after attaching it:
// connections it accepted before are not parsed, and no guarded rule of
// the domain answers while they live.
func (c *Client) SetParser(service uint32, p Parser) error {
	req := &protocol.Parser{ServiceID: service, Kind: uint8(p.Kind), Domain: p.Domain}
	if _, err := call[*protocol.ParserReply](c, req, nil); err != nil {
		return fmt.Errorf("set parser of service %d: %w", service, err)
	}
	return nil
}

// Generation is what the data plane holds for a key of a memcached
// service's domain.
type Generation struct {
	Gen       uint32 // the key's
	DomainGen uint32
	Epoch     uint32 // the domain's life; 0: dead, no guard of it answers
	// InFlight: a write of the key, or of the domain, is in flight: a rule
	// guarded now does not answer until it ends, and then not at all.
	InFlight bool
	// Fresh (protocol version 3): the kernel answers the key with the
	// value a set of it stored, at Gen (docs/memcached.md, "Answering
	// after a set"): the key's rule of memcached's "get <key>", guarded at
	// an older generation, answers with memcached's current value.
	Fresh bool
}

// Generation reads a key's generation (GENERATION): read it before asking
// memcached for the key's value, and guard the rule that answers the value
// with it.
func (c *Client) Generation(service uint32, key []byte) (Generation, error) {
	r, err := call[*protocol.GenerationReply](c, &protocol.Generation{ServiceID: service, Key: key}, nil)
	if err != nil {
		return Generation{}, fmt.Errorf("generation of a key of service %d: %w", service, err)
	}
	return Generation(*r), nil
}

// generationsInFlight bounds the GENERATION requests Generations sends
// before it reads their replies: santad's replies must fit the
// connection's receive buffer while the client still sends, or each side
// would wait on the other.
const generationsInFlight = 32

// Generations is Generation of each of keys, pipelined (docs/protocol.md:
// replies come in request order): up to 32 requests in flight, so that
// santad and the client each wake once per 32 keys rather than once per
// key. The first refusal is returned once every reply of its batch was
// read, so the connection stays usable.
func (c *Client) Generations(service uint32, keys [][]byte) ([]Generation, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Generation, 0, len(keys))
	for len(keys) > 0 {
		batch := keys[:min(len(keys), generationsInFlight)]
		keys = keys[len(batch):]
		// Every request is encoded before any is sent: one this side
		// refuses is refused with nothing in flight.
		msgs := make([][]byte, len(batch))
		for i, key := range batch {
			var err error
			if msgs[i], err = protocol.Encode(c.version, c.seq+1+uint32(i), &protocol.Generation{ServiceID: service, Key: key}); err != nil {
				return nil, fmt.Errorf("generation of a key of service %d: %w", service, err)
			}
		}
		first := c.seq + 1
		for _, msg := range msgs {
			c.seq++
			if _, _, err := c.conn.WriteMsgUnix(msg, nil, nil); err != nil {
				return nil, err
			}
		}
		var refused error
		for i := range batch {
			r, err := receive[*protocol.GenerationReply](c, &protocol.Generation{}, first+uint32(i))
			var e *protocol.Error
			switch {
			case errors.As(err, &e):
				refused = cmp.Or(refused, fmt.Errorf("generation of a key of service %d: %w", service, err))
			case err != nil:
				return nil, err
			default:
				out = append(out, Generation(*r))
			}
		}
		if refused != nil {
			return nil, refused
		}
	}
	return out, nil
}

// Guard lets a rule of a memcached service answer only while its key (Key;
// empty: any key, the domain's generation alone) and its domain are at the
// generations read, and for ExpiresInMS milliseconds from when santad
// applies the rule (0: no deadline). Listed, ExpiresInMS is the time left
// (1 once past).
type Guard = protocol.Guard

// Guard is a guard of key at g, for expiresIn (0: no deadline), rounded up
// to the millisecond and at most math.MaxUint32 ms (about 49 days: the rule
// then stops answering before the value expires, which is safe). A value
// memcached keeps for a while must not be answered longer: give its TTL.
// It panics if expiresIn is negative: an expired value has no rule.
func (g Generation) Guard(key []byte, expiresIn time.Duration) *Guard {
	if expiresIn < 0 {
		panic(fmt.Sprintf("client: a guard expiring in %v", expiresIn))
	}
	ms := (expiresIn + time.Millisecond - 1) / time.Millisecond
	return &Guard{Key: key, Gen: g.Gen, DomainGen: g.DomainGen, Epoch: g.Epoch, ExpiresInMS: uint32(min(ms, math.MaxUint32))}
}

// GuardedRule is a rule and its guard (nil: none).
type GuardedRule struct {
	Rule  rule.Rule
	Guard *Guard
}

// AddGuardedRules is AddRules of rules with guards. To replace a rule with a
// guarded one, ReplaceRules takes its RuleEntry's Guard.
func (c *Client) AddGuardedRules(service uint32, rs []GuardedRule) ([]uint32, error) {
	return c.addGuardedRules(service, 0, rs)
}

func (c *Client) addGuardedRules(service, txn uint32, rs []GuardedRule) ([]uint32, error) {
	req := &protocol.AddRules{ServiceID: service, Txn: txn, Rules: make([]rule.Rule, len(rs)), Guards: make([]*Guard, len(rs))}
	for i, r := range rs {
		req.Rules[i], req.Guards[i] = r.Rule, r.Guard
	}
	return c.addRulesReq(req)
}

// MemcachedStats are a memcached domain's counters (the same for each of
// its services).
type MemcachedStats = protocol.MemcachedStatsReply

// MemcachedStats reads the counters of a memcached service's domain
// (MEMCACHED_STATS).
func (c *Client) MemcachedStats(service uint32) (MemcachedStats, error) {
	r, err := call[*protocol.MemcachedStatsReply](c, &protocol.MemcachedStats{ServiceID: service}, nil)
	if err != nil {
		return MemcachedStats{}, fmt.Errorf("memcached stats of service %d: %w", service, err)
	}
	return *r, nil
}
