package model

import (
	"errors"
	"fmt"
	"time"
)

// ParserKind says how the data plane reads a service's requests for the
// writes among them.
type ParserKind uint8

const (
	ParserNone ParserKind = 0
	// ParserMemcached: memcached's text protocol (docs/memcached.md). Every
	// request the service receives is parsed before memcached can act on
	// it, and every reply of its TCP connections before it leaves; writes
	// bump their keys' generations, and are in flight until answered.
	ParserMemcached ParserKind = 1
)

// Parser is a service's parser and its generation domain.
type Parser struct {
	Kind ParserKind
	// Domain names the generations the service's writes bump and its
	// guards read: the services of one memcached (its UDP socket, its TCP
	// listener) share one. It is the id of one of them, which starts it
	// (its own Domain is itself); the others join it. A domain dies when
	// one of its services is no longer parsed (unregistered, or its parser
	// set to none): from then on no guard of it lets a rule answer, until
	// its first service starts it again (a new life; the others join
	// again).
	Domain ServiceID
}

// Guard holds a rule back unless what it answers is still current
// (docs/memcached.md, "Invalidation"): it answers only while its key's
// generation slot and its domain have the generations it was built at,
// no write to either is in flight, no connection of the domain lost sync,
// the domain is in the life it was built in, and Expires has not passed.
type Guard struct {
	Key []byte // the key the rule answers for; nil: the domain's generation alone
	// At is what Generation said for Key before its value was read from
	// memcached (its InFlight is not read).
	At      Generation
	Expires time.Time // zero: never
}

// Generation is what the data plane holds for a key of a domain now.
type Generation struct {
	Gen       uint32 // the key's slot's generation
	DomainGen uint32
	// Epoch is the domain's life (Parser.Domain); 0: the domain is dead,
	// and no guard of it lets a rule answer.
	Epoch uint32
	// InFlight: a write to the key's slot, or to the whole domain, is in
	// flight, a connection of the domain lost sync, or the domain is held
	// (a delayed flush_all pending, UDP writes held domain-wide): a rule
	// built now does not answer until that ends, and then its generations
	// are old.
	InFlight bool
	// Fresh: the kernel holds the value a set of the key stored, at Gen
	// (docs/memcached.md, "Answering after a set"): a rule of the key
	// guarded at an older generation, and answering memcached's "get
	// <key>", answers with memcached's current value.
	Fresh bool
}

// MemcachedStats are a generation domain's counters, summed over CPUs.
type MemcachedStats struct {
	Writes        uint64 // write commands received
	KeyBumps      uint64 // key generations bumped (a write's arrival, its reply, its connection's end)
	DomainBumps   uint64 // domain generations bumped (flush_all, unknown keys, lost sync)
	Completed     uint64 // writes whose reply left
	Released      uint64 // writes in flight when their connection ended
	Overflow      uint64 // one-key writes beyond a connection's ring, counted domain-wide
	Lost          uint64 // streams (connections, datagrams) that lost sync
	GuardStale    uint64 // answers refused: a generation moved
	GuardInFlight uint64 // answers refused: a write in flight, or a connection lost sync
	GuardExpired  uint64 // answers refused: past the deadline
	UDPHeld       uint64 // UDP writes held one by one until their reply (or their deadline)
	UDPTimedOut   uint64 // UDP writes released at their deadline: no reply of theirs seen
	UDPDomain     uint64 // UDP writes that held the whole domain: table full, request id in flight
	DelayedFlush  uint64 // flush_all with a delay: the domain held until it happened
	Refreshed     uint64 // sets stored whose value the kernel answers their key's get with from then
	FreshTorn     uint64 // answers from a set's value dropped: the value changed while it was copied
	Filled        uint64 // gets' replies the kernel answers their key's gets with from then
}

// MaxMemcachedKey is memcached's longest key (KEY_MAX_LENGTH).
const MaxMemcachedKey = 250

// CheckMemcachedKey says why key cannot be a memcached key, if it cannot:
// 1 to 250 bytes, none a space or a control character.
func CheckMemcachedKey(key []byte) error {
	if len(key) == 0 || len(key) > MaxMemcachedKey {
		return fmt.Errorf("a memcached key of %d bytes: 1 to %d", len(key), MaxMemcachedKey)
	}
	for i, c := range key {
		if c <= ' ' || c == 0x7f {
			return fmt.Errorf("a memcached key with byte %#x at %d: no spaces or control characters", c, i)
		}
	}
	return nil
}

// ErrNotMemcached: a guard or generation asked of a service whose parser
// is not memcached's.
var ErrNotMemcached = errors.New("not a memcached service (SetParser)")

// ErrStaleGuard: a guard of another life of its domain than the domain's
// now (it died and started again since its generations were read).
var ErrStaleGuard = errors.New("stale guard")
