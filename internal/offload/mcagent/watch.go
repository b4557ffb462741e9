package mcagent

import (
	"container/heap"
	"context"
	"net/netip"
	"slices"
	"time"

	"github.com/santa-offload/santa/internal/offload/server"
)

// bumps are a domain's counts of slot and domain bumps (MEMCACHED_STATS):
// every write that can kill a guard moves one of them.
type bumps struct{ key, domain uint64 }

// watch brings killed rules back at once, where the window would notice
// them a window or two later (by their gets passing): when the domain's
// bumps moved since the last look, it checks the generations of the keys
// not checked since, at most WatchRate a second, those that lose the most
// gets while dead first, and reads again the ones a write killed, in one
// batch, each guarded by the generation its check read before the read
// (the order learning keeps, so a write racing it leaves the new rule
// dead, never stale). Keys not written are not read.
func (a *agent) watch(ctx context.Context) {
	start := a.now()
	l, keys, tcpDst, udpDst, ok := a.killed()
	if !ok || len(keys) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(a.cfg.Window))
	defer cancel()
	checked := a.now().Sub(start)
	l = a.read(ctx, l, keys, tcpDst, udpDst)
	a.install(l)
	a.log.Debug("watch", "killed", len(keys), "read", len(l.keys), "checked_in", checked, "took", a.now().Sub(start))
}

// killed checks the generations of the keys suspected (checked before the
// domain's bumps last moved) and returns the killed ones with their new
// generation, and where to ask memcached. Called without a.mu.
func (a *agent) killed() (l learned, keys []learnedKey, tcpDst, udpDst netip.AddrPort, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	udp := a.udpServices()
	if a.sd == nil || a.leader == nil || len(udp) == 0 || len(a.keys) == 0 {
		return l, nil, tcpDst, udpDst, false
	}
	now := a.now()
	st, err := a.sd.MemcachedStats(a.leader.id)
	if err != nil {
		a.failed("reading the domain's counters", err)
		return l, nil, tcpDst, udpDst, false
	}
	if b := (bumps{st.KeyBumps, st.DomainBumps}); b != a.bumps {
		a.bumps, a.bumpedAt = b, now
	}
	l.leader = a.leader
	suspects := a.suspects(now)
	gens, ok := a.readGenerations(len(suspects), func(i int) []byte { return suspects[i].mkey })
	if !ok {
		return l, nil, tcpDst, udpDst, false
	}
	for i, k := range suspects {
		g := guardOf(gens[i])
		a.stats.checks++
		k.count(g != k.gen && !g.InFlight && !gens[i].Fresh)
		switch {
		case g.Epoch == 0:
			return l, nil, tcpDst, udpDst, false // the domain is dead: the next scan ends it
		case g == k.gen:
			k.checked = now // alive
		case g.InFlight:
			// Being written: checked again next time, the write done.
		case gens[i].Fresh && g.DomainGen == k.gen.DomainGen && g.Epoch == k.gen.Epoch:
			// Written by a set whose value the kernel answers with
			// (docs/memcached.md, "Answering after a set"): alive, its
			// rule as it is.
			k.checked = now
			a.stats.fresh++
		case a.writeHot(k, now):
			// Written too often to pay: left to memcached for now.
		default:
			a.stats.killed++ // checked once installed: a failed read is tried again
			keys = append(keys, learnedKey{want: want{form: k.form, mkey: k.mkey, rate: k.rate, old: k}, gen: g,
				checked: now, rebuilds: k.rebuilds})
		}
	}
	return l, keys, server.AskAddr(a.leader.local), server.AskAddr(udp[0].local), true
}

// scanned is how many keys, per key a watch may check, it weighs: its
// cost must not grow with max_rules.
const scanned = 4

// suspects are the keys not checked since the domain's bumps last moved,
// at most a watch's share of WatchRate, those likeliest to have lost the
// most gets first: the gets since their check (a hot key written is the
// costliest to leave dead) times the share of their checks that found
// them written (a hot key never written is not worth a check each
// watch). It weighs the hottest keys, scanned per key it may check, and
// as many of the colder ones in turn. Called with a.mu held.
func (a *agent) suspects(now time.Time) []*key {
	n := max(1, int(float64(a.cfg.WatchRate)*time.Duration(a.cfg.Watch).Seconds()))
	head := min(len(a.watched), scanned*n)
	weighed := a.watched[:head]
	if cold := a.watched[head:]; len(cold) > 0 {
		a.tail %= len(cold)
		end := min(len(cold), a.tail+scanned*n)
		weighed = append(slices.Clip(weighed), cold[a.tail:end]...)
		if rest := scanned*n - (end - a.tail); rest > 0 {
			weighed = append(weighed, cold[:min(a.tail, rest)]...)
		}
		a.tail += scanned * n
	}
	h := &byLoss{}
	for _, k := range weighed {
		if a.keys[k.form] != k || !k.checked.Before(a.bumpedAt) || k.waiting(now) {
			continue // deleted, checked since (the read came after the bumps seen), or waiting
		}
		s := suspect{k, k.rate * now.Sub(k.checked).Seconds() * k.written()}
		switch {
		case h.Len() < n:
			heap.Push(h, s)
		case s.loss > (*h)[0].loss:
			(*h)[0] = s
			heap.Fix(h, 0)
		}
	}
	out := make([]*key, h.Len())
	for i, s := range *h {
		out[i] = s.k
	}
	return out
}

// countHalved is how many checks of a key its counts keep: then they are
// halved, so that a key's share follows a change of its writes.
const countHalved = 32

// count counts a check of k, and whether it found k written.
func (k *key) count(killed bool) {
	k.checks++
	if killed {
		k.kills++
	}
	if k.checks >= countHalved {
		k.checks, k.kills = k.checks/2, k.kills/2
	}
}

// written is the share of k's checks that found it written, counting one
// more check that did and one that did not (a key not yet checked: 1/2).
func (k *key) written() float64 { return float64(k.kills+1) / float64(k.checks+2) }

// suspect is a key and the gets it is likely to have lost since its check.
type suspect struct {
	k    *key
	loss float64
}

// byLoss is a min-heap of suspects: the n with the most gets stay.
type byLoss []suspect

func (h byLoss) Len() int           { return len(h) }
func (h byLoss) Less(i, j int) bool { return h[i].loss < h[j].loss }
func (h byLoss) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *byLoss) Push(x any)        { *h = append(*h, x.(suspect)) }
func (h *byLoss) Pop() any {
	old := *h
	s := old[len(old)-1]
	*h = old[:len(old)-1]
	return s
}

// A key read again costs the server core about as much as 16 gets
// memcached answers (its generation, an mg, a UDP get, its rule replaced
// in santad): with SETs of the gets' Zipf popularity at 5 % of the
// operations, every key is written once per 19 gets, and reading each
// again at once took the whole server core at 100 k gets a second, more
// than memcached alone (docs/benchmarks.md (j)). So a key whose rule
// answered fewer than relearnGets gets before a write killed it waits
// before it is read again, relearnWait the first time, twice as long each
// time in a row, at most relearnWaitMax; memcached answers it meanwhile.
const (
	relearnGets    = 32
	relearnWait    = time.Second
	relearnWaitMax = 64 * time.Second
)

// writeHot is whether k, found killed, waits before it is read again (its
// rule lived for fewer than relearnGets gets, now or the last time).
// Called with a.mu held.
func (a *agent) writeHot(k *key, now time.Time) bool {
	if k.killedAt.IsZero() {
		k.killedAt = now
		if k.rate*now.Sub(k.learned).Seconds() >= relearnGets {
			k.wait = 0
		} else {
			k.wait = min(max(relearnWait, 2*k.wait), relearnWaitMax)
			a.stats.waits++
		}
	}
	return k.waiting(now)
}

// waiting is whether k, killed, still waits before it is read again: the
// watch does not check it meanwhile.
func (k *key) waiting(now time.Time) bool {
	return !k.killedAt.IsZero() && now.Before(k.killedAt.Add(k.wait))
}
