/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/* memcached invalidation (docs/memcached.md, "Invalidation"): what the
 * programs of a memcached service (santa_service.parser) do with the
 * events of its streams (mc_request.h, mc_reply.h).
 *
 * - A write's key (MC_EV_KEY) bumps its slot's generation as it arrives;
 *   a write of unknown keys (MC_EV_ALL) its domain's.
 * - A TCP write is in flight from its line's end (its key's event; its
 *   data may still be to come, SANTA_MC_CONN_PENDING) and, from its
 *   arrival whole (MC_EV_CMD), until memcached's
 *   reply to it, or to a later command of its connection, leaves through
 *   sk_msg (the reply parser's seen against the command's seq): its slot's
 *   in-flight count holds every guard of the slot back meanwhile, and its
 *   end bumps the slot again. One-key writes wait in the connection's ring
 *   (SANTA_MC_RING); the others (flush_all, several or unknown keys, and
 *   one-key writes beyond the ring) hold the whole domain back until the
 *   newest of them is answered, then bump it.
 * - A connection whose stream cannot be followed (lost sync, a parse that
 *   could not run, a connection whose start was not seen) counts in its
 *   domain's unsynced until it closes: nothing of the domain answers.
 * - When a connection ends (its socket released by memcached, or closed
 *   before memcached ever had it), what it has in flight is released:
 *   bumped and no longer counted.
 * - A flush_all with a delay holds its domain, once done, until memcached
 *   has flushed (santa_mc_flush_later).
 * - UDP writes: mc_udp.h.
 * - A set's value may answer its key's rule after it is stored: mc_fresh.h;
 *   so may memcached's reply to a get of the key: mc_fill.h, which only
 *   keys no write may have given an expiry (MC_CF_TTL: mc_mortal) take.
 *
 * The including program defines nothing more: mc_event is here. The
 * TCP programs' parts are mc_tcp.h.
 */
#ifndef SANTA_MC_INVAL_H
#define SANTA_MC_INVAL_H

#include "santa_abi.h"
#include "maps.h"
#include "guard.h"
#include "mc_request.h"
#include "mc_reply.h"
#include "mc_refresh.h"

/* A one-key write in flight: done once the reply side's seen reaches seq. */
struct santa_mc_pending {
	__u32 seq;
	__u32 slot;
	__u32 gen; /* the slot's generation once it was in flight */
};

#define SANTA_MC_CONN_LOST 1 /* its writes cannot be followed: counted in its domain's unsynced */
#define SANTA_MC_CONN_ALL 2  /* a domain-wide write in flight (all_seq): counted in its domain's inflight */
/* A command that may get no reply (a meta command with q) was seen: which
 * reply is whose is not known exactly any more, so no STORED makes a
 * set's value ready (its writes are still followed: a reply ends a write
 * no earlier than its own would). */
#define SANTA_MC_CONN_INEXACT 4
/* A write's line is in, its data not yet (pending): in flight already,
 * since memcached may act on the line alone (it unlinks the key of a
 * value too large as soon as it reads the line). */
#define SANTA_MC_CONN_PENDING 8

/* A memcached connection's parsers and writes in flight, 344 bytes. */
struct santa_mc_conn {
	struct mc_req_state req;
	struct mc_rep_state rep;
	__u32 domain;
	__u32 flags;   /* SANTA_MC_CONN_* */
	__u32 all_seq; /* the newest domain-wide write's seq, while SANTA_MC_CONN_ALL */
	__u32 head;    /* the oldest one-key write in flight (free-running) */
	__u32 tail;    /* past the newest */
	__s32 all_delay; /* the longest flush_all delay (seconds) among the domain-wide writes in flight */
	__u32 pending;   /* while SANTA_MC_CONN_PENDING: the write's slot, SANTA_MC_NO_SLOT for its domain */
	__u32 owner;     /* the slot in conn_owners whose place it holds (tcp_maps.h) */
	__u32 pad;
	struct santa_mc_pending ring[SANTA_MC_RING];
};

/* memcached connections by socket cookie: created with the connection
 * (santa_tcp_sockops) or at its first segment (then lost), deleted when
 * it ends (santa_mc_release). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, SANTA_DEFAULT_MAX_CONNS); /* load time */
	__type(key, __u64);
	__type(value, struct santa_mc_conn);
} mc_conns SEC(".maps");

/* A UDP request's parser, fresh for each datagram. XDP and TC run in
 * softirqs, which do not interrupt one another: one per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mc_req_state);
} mc_udp_state SEC(".maps");

/* Where a TCP segment's parse is: scalars only, so that the global
 * function it is passed to leaves the user's pointers be. */
struct santa_mc_cursor {
	__u64 cookie; /* the connection's */
	__u32 base;   /* the segment offset of the chunk being parsed */
	__s32 start;  /* the segment offset where the next command starts; -1: in an earlier segment */
};

/* What mc_event gets as user. */
struct santa_mc_user {
	struct santa_mc_conn *conn; /* NULL: a UDP datagram */
	__u32 domain;
	/* A UDP datagram's commands (mc_udp.h): */
	__u32 cmds;   /* how many */
	__u32 writes; /* how many write */
	__u32 slot;   /* the last write's slot, SANTA_MC_NO_SLOT if its keys are unknown */
	__u8 cmd;     /* the last write: enum mc_cmd */
	__u8 reply;   /* and enum mc_reply */
	__u16 pad;
	__s32 delay;  /* the longest flush_all delay among them, seconds */
	struct santa_mc_cursor cur; /* a TCP connection's (mc_tcp.h) */
	struct santa_mc_sets *sets; /* a TCP segment's (the verdict's): its sets whose value may be taken */
};

static __always_inline struct santa_mc_domain *santa_mc_domain_of(__u32 domain)
{
	return bpf_map_lookup_elem(&mc_domains, &domain);
}

static __always_inline void santa_mc_bump_slot(__u32 domain, __u32 slot)
{
	struct santa_mc_slot *ks = bpf_map_lookup_elem(&mc_slots, &slot);

	if (ks)
		__sync_fetch_and_add(&ks->gen, 1);
	santa_mc_count(domain, SANTA_MC_KEY_BUMPS);
}

static __always_inline void santa_mc_bump_domain(__u32 domain)
{
	struct santa_mc_domain *dom = santa_mc_domain_of(domain);

	if (dom)
		__sync_fetch_and_add(&dom->gen, 1);
	santa_mc_count(domain, SANTA_MC_DOMAIN_BUMPS);
}

/* The connection's writes cannot be followed from now on. */
static __always_inline void santa_mc_conn_lose(struct santa_mc_conn *mc)
{
	struct santa_mc_domain *dom;

	if (mc->flags & SANTA_MC_CONN_LOST)
		return;
	mc->flags |= SANTA_MC_CONN_LOST;
	dom = santa_mc_domain_of(mc->domain);
	if (dom)
		__sync_fetch_and_add(&dom->unsynced, 1);
	santa_mc_bump_domain(mc->domain);
	santa_mc_count(mc->domain, SANTA_MC_LOST);
}

/* A write of mc whose reply is the seq-th is in flight: to slot, or, for
 * SANTA_MC_NO_SLOT (keys unknown) and when the ring is full, domain-wide. */
static __always_inline void santa_mc_in_flight(struct santa_mc_conn *mc, __u32 seq, __u32 slot)
{
	struct santa_mc_domain *dom;

	if (slot != SANTA_MC_NO_SLOT) {
		if (mc->tail - mc->head < SANTA_MC_RING) {
			struct santa_mc_slot *ks = bpf_map_lookup_elem(&mc_slots, &slot);
			struct santa_mc_pending *p = &mc->ring[mc->tail & (SANTA_MC_RING - 1)];

			if (!ks)
				return;
			__sync_fetch_and_add(&ks->inflight, 1);
			p->seq = seq;
			p->slot = slot;
			p->gen = *(volatile __u32 *)&ks->gen;
			mc->tail++;
			return;
		}
		santa_mc_count(mc->domain, SANTA_MC_OVERFLOW);
	}
	if (!(mc->flags & SANTA_MC_CONN_ALL)) {
		dom = santa_mc_domain_of(mc->domain);
		if (!dom)
			return;
		__sync_fetch_and_add(&dom->inflight, 1);
		mc->flags |= SANTA_MC_CONN_ALL;
	}
	mc->all_seq = seq;
}

/* A write to slot is no longer in flight: bumped first, so that a reader
 * that sees it no longer in flight sees the new generation. */
static __always_inline void santa_mc_end_slot(__u32 domain, __u32 slot)
{
	struct santa_mc_slot *ks = bpf_map_lookup_elem(&mc_slots, &slot);

	if (!ks)
		return;
	__sync_fetch_and_add(&ks->gen, 1);
	__sync_fetch_and_sub(&ks->inflight, 1);
	santa_mc_count(domain, SANTA_MC_KEY_BUMPS);
}

/* A domain-wide write is no longer in flight: bumped first, as a slot's. */
static __always_inline void santa_mc_end_domain(__u32 domain)
{
	struct santa_mc_domain *dom = santa_mc_domain_of(domain);

	if (!dom)
		return;
	__sync_fetch_and_add(&dom->gen, 1);
	__sync_fetch_and_sub(&dom->inflight, 1);
	santa_mc_count(domain, SANTA_MC_DOMAIN_BUMPS);
}

/* Adds delta to the writes in flight of slot or (SANTA_MC_NO_SLOT) of
 * the domain: returns whether they are counted there. */
static __always_inline int santa_mc_inflight_add(__u32 domain, __u32 slot, __s32 delta)
{
	struct santa_mc_domain *dom;
	struct santa_mc_slot *ks;

	if (slot != SANTA_MC_NO_SLOT) {
		ks = bpf_map_lookup_elem(&mc_slots, &slot);
		if (!ks)
			return 0;
		__sync_fetch_and_add(&ks->inflight, delta);
		return 1;
	}
	dom = santa_mc_domain_of(domain);
	if (!dom)
		return 0;
	__sync_fetch_and_add(&dom->inflight, delta);
	return 1;
}

/* A write in flight, slot's or (SANTA_MC_NO_SLOT) the domain's: returns
 * whether it is counted. */
static __always_inline int santa_mc_start(__u32 domain, __u32 slot)
{
	return santa_mc_inflight_add(domain, slot, 1);
}

/* mc's write whose line is in no longer waits for its data: its command
 * is done (and in flight as every write, nothing to bump: bumped false),
 * or it never will be, its connection ended (bumped true). */
static __always_inline void santa_mc_unpend(struct santa_mc_conn *mc, int bumped)
{
	if (!(mc->flags & SANTA_MC_CONN_PENDING))
		return;
	mc->flags &= ~SANTA_MC_CONN_PENDING;
	if (!bumped)
		santa_mc_inflight_add(mc->domain, mc->pending, -1);
	else if (mc->pending != SANTA_MC_NO_SLOT)
		santa_mc_end_slot(mc->domain, mc->pending);
	else
		santa_mc_end_domain(mc->domain);
}

/* A write of mc to slot (SANTA_MC_NO_SLOT: keys unknown) is in flight
 * from its key's event at its line's end until its command's end, where
 * santa_mc_in_flight takes over: a line whose data is still to come is
 * one memcached may act on already. A line of several keys moves it from
 * key to key; the command's end counts it domain-wide. */
static __always_inline void santa_mc_pend(struct santa_mc_conn *mc, __u32 slot)
{
	santa_mc_unpend(mc, 0);
	if (!santa_mc_start(mc->domain, slot))
		return;
	mc->pending = slot;
	mc->flags |= SANTA_MC_CONN_PENDING;
}

/* memcached reads a flush_all delay above 30 days as a unix time
 * (realtime()); one of 9 digits (the most the parser takes, as a delay) is
 * then before memcached started, which makes oldest_live 0: no flush. */
#define SANTA_MC_REALTIME_MAXDELTA (60 * 60 * 24 * 30)

/* How long (ns) a domain is held after a flush_all with delay (seconds)
 * is done: 0 if it flushes at once or never. */
static __always_inline __u64 santa_mc_flush_hold(__s32 delay)
{
	if (delay <= 0 || delay > SANTA_MC_REALTIME_MAXDELTA)
		return 0;
	return ((__u64)delay * 1000 + SANTA_MC_CLOCK_SLACK_MS) * 1000000ULL;
}

/* memcached has done a flush_all with a delay of delay seconds (if
 * positive): it sets oldest_live to its clock plus delay, less 1, and
 * items stored until then are flushed when its clock, which ticks once a
 * second, gets there. Nothing of the domain answers until the delay and
 * the clock's slack have passed, and then the domain is bumped: no rule
 * built before outlives the flush. memcached keeps only its last
 * flush_all's time; holding until the latest of them is safe whichever
 * came last. */
static __always_inline void santa_mc_flush_later(__u32 domain, __s32 delay)
{
	struct santa_mc_domain *dom;
	__u64 hold = santa_mc_flush_hold(delay);

	if (!hold)
		return;
	dom = santa_mc_domain_of(domain);
	if (!dom)
		return;
	santa_mc_hold(dom, bpf_ktime_get_ns() + hold);
	santa_mc_count(domain, SANTA_MC_DELAYED_FLUSH);
}

/* mc's domain-wide writes are no longer in flight. */
static __always_inline void santa_mc_end_all(struct santa_mc_conn *mc)
{
	mc->flags &= ~SANTA_MC_CONN_ALL;
	santa_mc_end_domain(mc->domain);
	santa_mc_flush_later(mc->domain, mc->all_delay);
	mc->all_delay = 0;
}

/* The writes of mc that its replies so far answered are done. */
static __always_inline void santa_mc_complete(struct santa_mc_conn *mc)
{
	__u32 seen = mc->rep.seen;

	for (int i = 0; i < SANTA_MC_RING; i++) {
		struct santa_mc_pending *p;

		if (mc->head == mc->tail)
			break;
		p = &mc->ring[mc->head & (SANTA_MC_RING - 1)];
		if ((__s32)(seen - p->seq) < 0)
			break;
		santa_mc_end_slot(mc->domain, p->slot);
		santa_mc_count(mc->domain, SANTA_MC_COMPLETED);
		mc->head++;
	}
	if ((mc->flags & SANTA_MC_CONN_ALL) && (__s32)(seen - mc->all_seq) >= 0) {
		santa_mc_end_all(mc);
		santa_mc_count(mc->domain, SANTA_MC_COMPLETED);
	}
}

/* A UDP datagram that lost sync: memcached may read writes in it that the
 * parser did not see (it answers an unknown command with ERROR and goes
 * on with the next line). The domain is bumped now and held as long as a
 * write of it would be (mc_udp.h), then bumped again. */
static __always_inline void santa_mc_datagram_lost(__u32 domain)
{
	struct santa_mc_domain *dom = santa_mc_domain_of(domain);

	santa_mc_bump_domain(domain);
	santa_mc_count(domain, SANTA_MC_LOST);
	if (dom)
		santa_mc_hold(dom, bpf_ktime_get_ns() + SANTA_MC_UDP_HOLD_MS * 1000000ULL);
}

/* A command of TCP connection mc was fully received: where the next one
 * starts, and whether it is a set whose value santa_mc_capture may take
 * (one key, a reply, all of it in this segment, the connection's replies
 * known exactly), listed in sets. A global function: verified once, not
 * at each event. */
__noinline int santa_mc_note_command(struct santa_mc_cursor *cur, struct santa_mc_conn *mc, struct santa_mc_sets *sets,
				     const struct mc_event *ev)
{
	struct santa_mc_set *set;
	__u32 end;

	if (!cur || !mc || !sets || !ev)
		return 0;
	end = cur->base + ev->off;
	if (ev->reply == MC_REPLY_MAYBE)
		mc->flags |= SANTA_MC_CONN_INEXACT;
	if (ev->cmd == MC_CMD_SET && ev->reply == MC_REPLY_ONE && (ev->flags & (MC_CF_WRITE | MC_CF_ALL)) == MC_CF_WRITE &&
	    cur->start >= 0 && !(mc->flags & SANTA_MC_CONN_INEXACT) && sets->n < SANTA_MC_SETS) {
		set = &sets->set[sets->n++ & (SANTA_MC_SETS - 1)];
		set->cookie = cur->cookie;
		set->domain = mc->domain;
		set->slot = santa_mc_slot_of(ev->hash, mc->domain);
		set->seq = ev->seq;
		set->off = cur->start;
		set->len = end - cur->start;
	}
	cur->start = end;
	return 0;
}

/* A STORED of TCP connection mc left: it may make its set's value ready,
 * if the set is in flight in the ring (santa_mc_fresh_ready). A global
 * function, as santa_mc_note_command. */
__noinline int santa_mc_note_stored(struct santa_mc_conn *mc, __u64 cookie, const struct mc_event *ev)
{
	if (!mc || !ev || (mc->flags & SANTA_MC_CONN_INEXACT))
		return 0;
	for (int i = 0; i < SANTA_MC_RING; i++) {
		struct santa_mc_pending *p;

		if (mc->head + i == mc->tail)
			break;
		p = &mc->ring[(mc->head + i) & (SANTA_MC_RING - 1)];
		if (p->seq == ev->seq)
			return santa_mc_fresh_ready(p->slot, p->gen, mc->domain, cookie, ev->seq);
	}
	return 0;
}

static void mc_event(void *user, const struct mc_event *ev)
{
	struct santa_mc_user *u = user;
	__u32 domain = u->domain;

	switch (ev->type) {
	case MC_EV_KEY: {
		__u32 slot = santa_mc_slot_of(ev->hash, domain);

		santa_mc_bump_slot(domain, slot);
		if (u->conn)
			santa_mc_pend(u->conn, slot);
		break;
	}
	case MC_EV_ALL:
		santa_mc_bump_domain(domain);
		if (u->conn)
			santa_mc_pend(u->conn, SANTA_MC_NO_SLOT);
		break;
	case MC_EV_CMD: {
		__s32 *delay;
		__u32 slot;

		u->cmds++;
		if (u->conn)
			santa_mc_note_command(&u->cur, u->conn, u->sets, ev);
		if (!(ev->flags & MC_CF_WRITE))
			break;
		slot = (ev->flags & MC_CF_ALL) ? SANTA_MC_NO_SLOT : santa_mc_slot_of(ev->hash, domain);
		delay = u->conn ? &u->conn->all_delay : &u->delay;
		santa_mc_count(domain, SANTA_MC_WRITES);
		if (ev->flags & MC_CF_TTL)
			santa_mc_make_mortal(santa_mc_domain_of(domain), slot);
		if (ev->cmd == MC_CMD_FLUSH_ALL && ev->arg > *delay)
			*delay = ev->arg;
		if (u->conn) {
			santa_mc_in_flight(u->conn, ev->seq, slot);
			santa_mc_unpend(u->conn, 0);
		} else {
			u->writes++;
			u->slot = slot;
			u->cmd = ev->cmd;
			u->reply = ev->reply;
		}
		break;
	}
	case MC_EV_REPLY:
		if (u->conn && (ev->flags & MC_RF_STORED))
			santa_mc_note_stored(u->conn, u->cur.cookie, ev);
		break;
	case MC_EV_LOST:
		if (u->conn) {
			santa_mc_conn_lose(u->conn);
		} else {
			santa_mc_datagram_lost(domain);
		}
		break;
	}
}

/* A connection of domain without state (its connections map is full, or
 * its uid holds every place its quota allows): no one counts for it until
 * it ends, so the domain is unsynced for good. */
static __always_inline void santa_mc_conn_untracked(__u32 domain)
{
	struct santa_mc_domain *dom = santa_mc_domain_of(domain);

	if (dom)
		__sync_fetch_and_add(&dom->unsynced, 1);
	santa_mc_bump_domain(domain);
	santa_mc_count(domain, SANTA_MC_LOST);
}

/* Starts the state of a memcached connection of domain, zeroed, on a place
 * of owner's (taken already); lost if its start was not seen. A global
 * function: its 344-byte value is on a stack of its own, not on the
 * verdict's, which parses. Returns 0 if this call created the state: else
 * the place is the caller's to give back. */
__noinline int santa_mc_conn_start(__u64 cookie, __u32 domain, __u32 lost, __u32 owner)
{
	struct santa_mc_conn mc = {};

	mc.domain = domain;
	mc.owner = owner;
	if (bpf_map_update_elem(&mc_conns, &cookie, &mc, BPF_NOEXIST)) {
		santa_mc_conn_untracked(domain);
		return -1;
	}
	if (lost) {
		struct santa_mc_conn *got = bpf_map_lookup_elem(&mc_conns, &cookie);

		if (got)
			santa_mc_conn_lose(got);
	}
	return 0;
}

/* The kernel answered a request of a memcached connection: one reply. */
static __always_inline void santa_mc_kernel_reply(__u64 cookie)
{
	struct santa_mc_conn *mc = bpf_map_lookup_elem(&mc_conns, &cookie);

	if (!mc || (mc->flags & SANTA_MC_CONN_LOST))
		return;
	mc->rep.seen++;
	santa_mc_complete(mc);
}

/* A memcached connection ended: memcached released its socket, or it
 * closed before memcached ever had it. Whoever deletes its state releases
 * what it had in flight, once, and returns 1 with the owner of the place
 * the state held (to give back); else 0. */
static __always_inline int santa_mc_release(__u64 cookie, __u32 *owner)
{
	struct santa_mc_conn *mc = bpf_map_lookup_elem(&mc_conns, &cookie);
	struct santa_mc_domain *dom;

	if (!mc || bpf_map_delete_elem(&mc_conns, &cookie))
		return 0;
	/* Still readable: an element goes after an RCU grace period. */
	*owner = mc->owner;
	dom = santa_mc_domain_of(mc->domain);
	for (int i = 0; i < SANTA_MC_RING; i++) {
		if (mc->head == mc->tail)
			break;
		santa_mc_end_slot(mc->domain, mc->ring[mc->head & (SANTA_MC_RING - 1)].slot);
		santa_mc_count(mc->domain, SANTA_MC_RELEASED);
		mc->head++;
	}
	if (mc->flags & SANTA_MC_CONN_ALL) {
		santa_mc_end_all(mc);
		santa_mc_count(mc->domain, SANTA_MC_RELEASED);
	}
	santa_mc_unpend(mc, 1);
	if (mc->flags & SANTA_MC_CONN_LOST) {
		if (dom)
			__sync_fetch_and_sub(&dom->unsynced, 1);
		/* Its writes were never followed: whatever it changed. */
		santa_mc_bump_domain(mc->domain);
	}
	return 1;
}

#endif /* SANTA_MC_INVAL_H */
