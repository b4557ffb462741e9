// Package mccheck checks that memcached, with whatever is in front of it
// (Santa's data plane and a rule installer, or the memcached agent), is
// linearizable for its clients: once a write is acknowledged, no read sent
// later returns an older value (docs/memcached.md, "Checking it:
// linearizability").
//
// Run drives concurrent writers over TCP (pipelined, cut across segments,
// text and meta commands, noreply and quiet ones, flush_all) and over UDP,
// and readers over UDP (single-key get, what the kernel answers) and TCP,
// records every operation with its send and acknowledgement times, and
// then checks the history against a reference model (check.go).
package mccheck

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/santa-offload/santa/internal/netns"
)

// Kind is a write command the writers may send.
type Kind string

const (
	Set       Kind = "set"
	Add       Kind = "add"
	Replace   Kind = "replace"
	Append    Kind = "append"
	Prepend   Kind = "prepend"
	CAS       Kind = "cas" // after a gets of the key over TCP; TCP writers only
	Incr      Kind = "incr"
	Decr      Kind = "decr"
	Delete    Kind = "delete"
	Touch     Kind = "touch"
	MetaSet   Kind = "ms"
	MetaDel   Kind = "md"
	MetaArith Kind = "ma"
	// NoReply: set and delete with noreply (TCP only), acknowledged by the
	// reply to a later command of the connection.
	NoReply Kind = "noreply"
	// Quiet: ms and md with q and an opaque (TCP only), acknowledged by
	// the batch's closing mn.
	Quiet Kind = "quiet"
	// FlushAll: flush_all from the first TCP writer, about once per
	// FlushEvery of its commands; FlushDelay: flush_all with a 1- or
	// 2-second delay, as often.
	FlushAll   Kind = "flush_all"
	FlushDelay Kind = "flush_all_delay"
)

// AllKinds is every write kind.
var AllKinds = []Kind{Set, Add, Replace, Append, Prepend, CAS, Incr, Decr, Delete, Touch,
	MetaSet, MetaDel, MetaArith, NoReply, Quiet, FlushAll, FlushDelay}

// Config is one run.
type Config struct {
	// Netns is the network namespace the clients run in: a path, or a
	// name made by `ip netns add`; "" is the caller's own.
	Netns string
	// TCP and UDP are memcached's addresses.
	TCP, UDP netip.AddrPort
	// Keys is how many keys are written and read: key i is
	// KeyPrefix + i in 5 digits. Each key has one writer.
	Keys      int
	KeyPrefix string
	// Ops bounds the operations (writes, reads, flushes) of the run;
	// Deadline bounds its time. The run ends at the first of both.
	Ops      int
	Deadline time.Duration
	// Writers over TCP and UDP; Readers over UDP (get, single key) and
	// TCPReaders (get and mg, pipelined).
	Writers, UDPWriters, Readers, TCPReaders int
	// Kinds are the write commands used (nil: AllKinds).
	Kinds []Kind
	// Pipeline is the most commands a TCP batch holds (one per key).
	Pipeline int
	// Split cuts a batch, at random places, into several writes with
	// short sleeps between them (TCP_NODELAY: each is a segment); else
	// each batch is one write.
	Split bool
	// Window is how many UDP gets a reader has outstanding at once.
	Window int
	// WritePause is how long each writer waits between two batches (0:
	// none): rarer writes leave rules alive longer, so more gets are
	// answered by the kernel while the writes still race them.
	WritePause time.Duration
	// FlushEvery is about how many commands of the first TCP writer come
	// between two flush_all (of either kind enabled).
	FlushEvery int
	// UDPTimeout is how long a UDP request waits for its reply.
	UDPTimeout time.Duration
	// Seed seeds the choices of keys, commands and cuts.
	Seed uint64
	// KernelAnswered, if set, returns a counter of UDP gets answered by
	// the kernel (e.g. the service's Matched): read before and after.
	KernelAnswered func() (uint64, error)
}

// DefaultConfig is a run of 10^5 operations on 64 keys.
func DefaultConfig() Config {
	return Config{
		KeyPrefix: "mcc", Keys: 64, Ops: 100_000, Deadline: 2 * time.Minute,
		Writers: 3, UDPWriters: 1, Readers: 4, TCPReaders: 1,
		Pipeline: 8, Split: true, Window: 8, FlushEvery: 3000, UDPTimeout: time.Second, Seed: 1,
	}
}

// Limits of a Config.
const (
	MaxKeys    = 100_000
	MaxWorkers = 64
	MaxWindow  = 256
	MaxBatch   = 64
)

// Validate says what is wrong with c, if anything.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if !c.TCP.IsValid() || c.TCP.Port() == 0 {
		bad("TCP address %v: want memcached's address and port", c.TCP)
	}
	if !c.UDP.IsValid() || c.UDP.Port() == 0 {
		bad("UDP address %v: want memcached's address and port", c.UDP)
	}
	if c.Keys < 1 || c.Keys > MaxKeys {
		bad("keys %d: want 1..%d", c.Keys, MaxKeys)
	}
	if c.KeyPrefix == "" || len(c.KeyPrefix) > 200 || strings.ContainsAny(c.KeyPrefix, " \t\r\n\x00") {
		bad("key prefix %q: want 1..200 bytes, no space or control character", c.KeyPrefix)
	}
	if c.Ops < 1 {
		bad("ops %d: want at least 1", c.Ops)
	}
	if c.Deadline <= 0 {
		bad("deadline %v: want a positive duration", c.Deadline)
	}
	writers := c.Writers + c.UDPWriters
	for _, w := range []struct {
		name string
		n    int
	}{{"writers", c.Writers}, {"UDP writers", c.UDPWriters}, {"readers", c.Readers}, {"TCP readers", c.TCPReaders}} {
		if w.n < 0 || w.n > MaxWorkers {
			bad("%s %d: want 0..%d", w.name, w.n, MaxWorkers)
		}
	}
	if writers == 0 || c.Readers+c.TCPReaders == 0 {
		bad("%d writers and %d readers: want at least one of each", writers, c.Readers+c.TCPReaders)
	}
	if writers > c.Keys {
		bad("%d writers for %d keys: each writer needs a key of its own", writers, c.Keys)
	}
	if c.Pipeline < 1 || c.Pipeline > MaxBatch {
		bad("pipeline %d: want 1..%d", c.Pipeline, MaxBatch)
	}
	if c.Window < 1 || c.Window > MaxWindow {
		bad("window %d: want 1..%d", c.Window, MaxWindow)
	}
	if c.FlushEvery < 1 {
		bad("flush every %d: want at least 1", c.FlushEvery)
	}
	if c.WritePause < 0 {
		bad("write pause %v: want 0 or more", c.WritePause)
	}
	if c.UDPTimeout <= 0 {
		bad("UDP timeout %v: want a positive duration", c.UDPTimeout)
	}
	for _, k := range c.Kinds {
		if !known(k) {
			bad("write kind %q: want one of %v", k, AllKinds)
		}
	}
	return errors.Join(errs...)
}

func known(k Kind) bool {
	for _, a := range AllKinds {
		if a == k {
			return true
		}
	}
	return false
}

// kinds is the set of kinds used.
func (c Config) kinds() map[Kind]bool {
	ks := c.Kinds
	if ks == nil {
		ks = AllKinds
	}
	m := map[Kind]bool{}
	for _, k := range ks {
		m[k] = true
	}
	return m
}

// netnsPath is Netns as a path ("" stays "").
func (c Config) netnsPath() string {
	if c.Netns == "" || strings.Contains(c.Netns, "/") {
		return c.Netns
	}
	return netns.Named(c.Netns)
}

// Key is key i's name.
func (c Config) Key(i int) string { return fmt.Sprintf("%s%05d", c.KeyPrefix, i) }
