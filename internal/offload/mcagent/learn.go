package mcagent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/offload/probe"
	"github.com/santa-offload/santa/internal/offload/server"
	"github.com/santa-offload/santa/internal/offload/workers"
)

// clockLag is how many seconds memcached's clock may lag behind real
// time (capture).
const clockLag = 2

// learned is what a window learned, in the domain of leader.
type learned struct {
	leader *service
	keys   []learnedKey
	failed []failure // keys whose read failed
}

// learnedKey is a key's UDP reply, read after gen.
type learnedKey struct {
	want
	gen      client.Generation
	checked  time.Time // before gen was read
	reply    []byte    // request id 0
	read     time.Time // before the item was read
	deadline time.Time // the item's earliest expiry; zero: none
	// rebuilds: the reply is udpReply of the item (key.rebuilds), so it
	// is built from the TCP read, without a UDP get.
	rebuilds bool
}

type failure struct {
	form string
	k    *key // offloaded; nil for a newcomer
	err  error
}

// learnAll learns keys by the protocol docs/memcached.md proves safe:
// each key's generation first (santad), then its item over TCP (`mg`: its
// value and time to live, all keys in one pipelined batch), then its
// reply over UDP from the probe port (a get memcached answers, never a
// rule), which must be one datagram and agree with the item. A write that
// races any of it bumps the key past gen, so the rule installed with gen
// never answers the value read.
func (a *agent) learnAll(ctx context.Context, wants []want) learned {
	a.mu.Lock()
	l, keys, tcpDst, udpDst, ok := a.generations(wants)
	a.mu.Unlock()
	if !ok || len(keys) == 0 {
		return l
	}
	return a.read(ctx, l, keys, tcpDst, udpDst)
}

// read reads the items of keys, whose generations were read, over TCP, and
// their replies: a UDP get, or for a key that rebuilds, the item itself.
func (a *agent) read(ctx context.Context, l learned, keys []learnedKey, tcpDst, udpDst netip.AddrPort) learned {
	mkeys := make([][]byte, len(keys))
	for i, k := range keys {
		mkeys[i] = k.mkey
	}
	read := a.now()
	items, err := a.items.Read(ctx, tcpDst, mkeys, time.Duration(a.cfg.ProbeTimeout))
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("reading items", "err", err)
		}
		return l
	}
	var mu sync.Mutex
	workers.Each(len(keys), a.cfg.ProbeConcurrency, func(i int) {
		k := keys[i]
		k.read = read
		err := items[i].err
		if err == nil {
			err = a.capture(ctx, udpDst, &k, items[i].it)
		}
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			l.keys = append(l.keys, k)
		} else if ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
			l.failed = append(l.failed, failure{k.form, k.old, fmt.Errorf("%q: %w", k.mkey, err)})
		}
	})
	return l
}

// generations reads each key's generation, leaving out those with a write
// in flight and, if the domain is dead, all. It returns where to ask
// memcached over TCP and UDP. Called with a.mu held.
func (a *agent) generations(wants []want) (l learned, keys []learnedKey, tcpDst, udpDst netip.AddrPort, ok bool) {
	udp := a.udpServices()
	if a.sd == nil || a.leader == nil || len(udp) == 0 {
		return l, nil, tcpDst, udpDst, false
	}
	l.leader = a.leader
	now := a.now()
	inFlight := 0
	defer func() {
		held := len(wants) > 1 && inFlight == len(wants)
		if held && !a.warnedHeld {
			a.log.Warn("every key has a write in flight: a connection the domain does not follow (accepted before the " +
				"listener was marked, or that lost sync) holds the offload back until it closes")
		}
		a.warnedHeld = held
	}()
	gens, ok := a.readGenerations(len(wants), func(i int) []byte { return wants[i].mkey })
	if !ok {
		return l, nil, tcpDst, udpDst, false
	}
	for i, w := range wants {
		g := gens[i]
		switch {
		case g.Epoch == 0:
			a.skip(w.form, skipf(skipDead, "the domain's life ended"))
			return l, nil, tcpDst, udpDst, false
		case g.InFlight:
			a.skip(w.form, skipf(skipInFlight, "a write is in flight"))
			inFlight++
			continue
		}
		lk := learnedKey{want: w, gen: guardOf(g), checked: now}
		if w.old != nil {
			lk.rebuilds = w.old.rebuilds
		}
		keys = append(keys, lk)
	}
	return l, keys, server.AskAddr(a.leader.local), server.AskAddr(udp[0].local), true
}

// guardOf is what a guard built at g is built at: g but whether the
// kernel answers the key from a set (Fresh), which a guard does not keep.
func guardOf(g client.Generation) client.Generation {
	g.Fresh = false
	return g
}

// readGenerations reads the generations of n keys (key(i) the i-th) in
// the leader's domain, pipelined; an error is handled (failed) and gives
// false. Called with a.mu held.
func (a *agent) readGenerations(n int, key func(int) []byte) ([]client.Generation, bool) {
	mkeys := make([][]byte, n)
	for i := range mkeys {
		mkeys[i] = key(i)
	}
	gens, err := a.sd.Generations(a.leader.id, mkeys)
	if err != nil {
		a.failed("reading generations", err)
		return nil, false
	}
	return gens, true
}

// capture asks memcached the key's UDP get and checks that the reply is
// one datagram holding the item read over TCP; it sets k's reply and
// deadline. A key that rebuilds gets udpReply of the item instead, with
// no UDP get: the item was read after its generation as well.
func (a *agent) capture(ctx context.Context, dst netip.AddrPort, k *learnedKey, it item) error {
	if it.ttl >= 0 {
		// memcached's clock is the whole seconds of a monotonic clock,
		// read at ticks a little over a second apart: after a tick just
		// before a whole second it is nearly 2 s behind until the next
		// one, and ttl (the item's expiry less that clock) 2 s too long.
		// The item expires when the clock reaches its expiry: no earlier
		// than ttl-2 s after the read (expiry_margin covers a late tick).
		if it.ttl <= clockLag {
			return skipf(skipExpiring, "%d s to live", it.ttl)
		}
		k.deadline = k.read.Add(time.Duration(it.ttl-clockLag) * time.Second)
	}
	if k.rebuilds {
		reply := udpReply(k.mkey, it)
		if len(reply) > maxReply {
			return skipf(skipTooLarge, "a %d-byte reply", len(reply))
		}
		k.reply = reply
		return nil
	}
	reply, err := a.probe.Ask(ctx, dst, udpGet(k.mkey), time.Duration(a.cfg.ProbeTimeout))
	if errors.Is(err, probe.ErrTimeout) {
		return skipf(skipTimeout, "%v", err)
	}
	if err != nil {
		return err
	}
	got, err := checkUDPReply(k.mkey, reply)
	if err != nil {
		return err
	}
	if got.flags != it.flags || !bytes.Equal(got.data, it.data) {
		return skipf(skipChanged, "the UDP get and the TCP read disagree")
	}
	if len(reply) > maxReply {
		return skipf(skipTooLarge, "a %d-byte reply", len(reply))
	}
	reply[0], reply[1] = 0, 0
	k.reply, k.rebuilds = reply, bytes.Equal(reply, udpReply(k.mkey, it))
	return nil
}

// skipReason is an error's skip reason, or "error".
func skipReason(err error) string {
	var s *skip
	if errors.As(err, &s) {
		return s.reason
	}
	return "error"
}
