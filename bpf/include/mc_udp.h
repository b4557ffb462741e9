/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/* memcached invalidation on UDP (mc_inval.h; docs/memcached.md, "UDP
 * writes in flight"): a write that arrives over a memcached UDP socket is
 * in flight, as a TCP write is, from its arrival (XDP or TC) until
 * memcached's reply to it leaves (santa_mc_udp_reply, on the socket's
 * egress), then bumped again.
 *
 * A reply is known by its destination (the client's address and port)
 * and its frame's request id, which memcached copies from the request.
 * Only a reply no read can get tells that a write was done: a datagram of
 * one text write (set add replace append prepend cas incr decr delete
 * touch) is released by a reply whose first line is STORED, NOT_STORED,
 * EXISTS, NOT_FOUND, DELETED, TOUCHED or a number. Every other write
 * (noreply, meta, flush_all, gat, several commands in a datagram, an
 * error reply) is released SANTA_MC_UDP_HOLD_MS after its arrival, with a
 * bump, by a sweep every SANTA_MC_UDP_SWEEP_MS (one timer for the table,
 * armed while it holds writes: a timer per write would allocate at each
 * write, and kmalloc_nolock fails now and then under a burst). That bound
 * assumes memcached reads and does a datagram within it of its arrival
 * (or never: a dropped datagram).
 *
 * What cannot be held one by one holds the whole domain for as long: a
 * full table, a request id of the client already in flight (a reply
 * with that id may be the other write's).
 */
#ifndef SANTA_MC_UDP_H
#define SANTA_MC_UDP_H

#include "mc_inval.h"

#define SANTA_MC_UDP_LIVE 1  /* released by its reply, or at its deadline */
#define SANTA_MC_UDP_TIMED 2 /* released at its deadline only */
#define SANTA_MC_UDP_DONE 3  /* released: whoever set this released it */

#define SANTA_MS 1000000ULL
#define SANTA_MC_UDP_SWEEP_MS 100
#ifndef CLOCK_MONOTONIC
#define CLOCK_MONOTONIC 1
#endif
#ifndef EBUSY
#define EBUSY 16
#endif

/* A UDP write in flight, by its client and request id. */
struct santa_mc_udp_key {
	__u32 domain;
	__be16 port; /* the client's */
	__u16 id;    /* the frame's request id, as on the wire */
	__u32 addr[4]; /* the client's; IPv4 as ::ffff:a.b.c.d */
};

struct santa_mc_udp_write {
	__u64 deadline; /* bpf_ktime_get_ns: SANTA_MC_UDP_HOLD_MS after its arrival */
	__u32 domain;
	__u32 slot;  /* SANTA_MC_NO_SLOT: domain-wide (several keys, unknown ones) */
	__u32 state; /* SANTA_MC_UDP_* */
	__s32 delay; /* flush_all's delay, in seconds: the domain is held that long after */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SANTA_MC_UDP_WRITES);
	__type(key, struct santa_mc_udp_key);
	__type(value, struct santa_mc_udp_write);
} mc_udp_writes SEC(".maps");

/* The sweep's timer, initialized once and never freed; armed (1) while it
 * may have writes to release. */
struct santa_mc_udp_sweeper {
	struct bpf_timer timer;
	__u32 armed;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct santa_mc_udp_sweeper);
} mc_udp_sweeper SEC(".maps");

/* What santa_mc_start started is done: bumped, released, and a
 * delayed flush's hold starts. */
static __always_inline void santa_mc_udp_end(__u32 domain, __u32 slot, __s32 delay)
{
	if (slot != SANTA_MC_NO_SLOT)
		santa_mc_end_slot(domain, slot);
	else
		santa_mc_end_domain(domain);
	santa_mc_flush_later(domain, delay);
}

/* Whoever moves w to DONE releases it, once. */
static __always_inline int santa_mc_udp_take(struct santa_mc_udp_write *w, __u32 from)
{
	return __sync_val_compare_and_swap(&w->state, from, SANTA_MC_UDP_DONE) == from;
}

struct santa_mc_sweep {
	__u64 now;
	__u32 left; /* 1: writes still held after the sweep */
};

/* One write of the sweep: released, with a bump, if past its deadline. */
static long santa_mc_udp_expire(void *map, struct santa_mc_udp_key *key, struct santa_mc_udp_write *w,
				struct santa_mc_sweep *sw)
{
	if (w->deadline > sw->now) {
		sw->left = 1;
		return 0;
	}
	if (santa_mc_udp_take(w, SANTA_MC_UDP_LIVE) || santa_mc_udp_take(w, SANTA_MC_UDP_TIMED)) {
		santa_mc_udp_end(w->domain, w->slot, w->delay);
		santa_mc_count(w->domain, SANTA_MC_UDP_TIMED_OUT);
	}
	bpf_map_delete_elem(map, key);
	return 0;
}

static int santa_mc_udp_sweep(void *map, __u32 *key, struct santa_mc_udp_sweeper *sweeper);

/* The sweep runs within SANTA_MC_UDP_SWEEP_MS: 0, or -1 if it cannot be
 * armed. The timer is made at the first arming and stays. */
static __always_inline int santa_mc_udp_arm(void)
{
	struct santa_mc_udp_sweeper *sw;
	__u32 zero = 0;
	long err;

	sw = bpf_map_lookup_elem(&mc_udp_sweeper, &zero);
	if (!sw)
		return -1;
	if (__sync_val_compare_and_swap(&sw->armed, 0, 1) != 0)
		return 0;
	err = bpf_timer_init(&sw->timer, &mc_udp_sweeper, CLOCK_MONOTONIC);
	if ((!err || err == -EBUSY) && !bpf_timer_set_callback(&sw->timer, santa_mc_udp_sweep) &&
	    !bpf_timer_start(&sw->timer, SANTA_MC_UDP_SWEEP_MS * SANTA_MS, 0))
		return 0;
	__sync_lock_test_and_set(&sw->armed, 0);
	return -1;
}

/* The sweep: disarmed first, so that a write held meanwhile either is
 * seen by it or arms it again. */
static int santa_mc_udp_sweep(void *map, __u32 *key, struct santa_mc_udp_sweeper *sweeper)
{
	struct santa_mc_sweep sw = { .now = bpf_ktime_get_ns() };

	__sync_lock_test_and_set(&sweeper->armed, 0);
	bpf_for_each_map_elem(&mc_udp_writes, santa_mc_udp_expire, &sw, 0);
	if (sw.left)
		santa_mc_udp_arm();
	return 0;
}

/* Whether a datagram whose commands were u's is released by its reply. */
static __always_inline int santa_mc_udp_by_reply(const struct santa_mc_user *u)
{
	return u->cmds == 1 && u->reply == MC_REPLY_ONE &&
	       (mc_req_storage(u->cmd) || (u->cmd >= MC_CMD_INCR && u->cmd <= MC_CMD_TOUCH));
}

/* The client of a datagram, as key of its writes. */
static __always_inline void santa_mc_udp_client(struct santa_mc_udp_key *k, __u32 domain, int ipv6,
						const __u32 *addr, __be16 port, __u16 id)
{
	k->domain = domain;
	k->port = port;
	k->id = id;
	if (ipv6) {
		k->addr[0] = addr[0];
		k->addr[1] = addr[1];
		k->addr[2] = addr[2];
		k->addr[3] = addr[3];
	} else {
		k->addr[0] = 0;
		k->addr[1] = 0;
		k->addr[2] = bpf_htonl(0xffff);
		k->addr[3] = addr[0];
	}
}

/* The writes of a datagram (u), from pkt's client with request id id, are
 * in flight until their reply or their deadline. A global function: its
 * timer calls are verified once, not in each caller. */
__noinline int santa_mc_udp_hold(const struct santa_mc_user *u, const struct santa_pkt *pkt, __u16 id)
{
	struct santa_mc_udp_write w = {}, *got;
	struct santa_mc_udp_key k = {};
	struct santa_mc_domain *dom;

	if (!u || !pkt)
		return 0;
	w.deadline = bpf_ktime_get_ns() + SANTA_MC_UDP_HOLD_MS * SANTA_MS;
	w.domain = u->domain;
	w.slot = u->writes == 1 ? u->slot : SANTA_MC_NO_SLOT;
	w.state = santa_mc_udp_by_reply(u) ? SANTA_MC_UDP_LIVE : SANTA_MC_UDP_TIMED;
	w.delay = u->delay;
	if (pkt->ipv6)
		santa_mc_udp_client(&k, u->domain, 1, (const __u32 *)pkt->tuple.ipv6.saddr, pkt->tuple.ipv6.sport, id);
	else
		santa_mc_udp_client(&k, u->domain, 0, &pkt->tuple.ipv4.saddr, pkt->tuple.ipv4.sport, id);

	santa_mc_start(w.domain, w.slot);
	if (!bpf_map_update_elem(&mc_udp_writes, &k, &w, BPF_NOEXIST)) {
		if (!santa_mc_udp_arm()) {
			santa_mc_count(w.domain, SANTA_MC_UDP_HELD);
			return 0;
		}
		/* No sweep would release it: not held one by one after all. */
		got = bpf_map_lookup_elem(&mc_udp_writes, &k);
		if (!got || !santa_mc_udp_take(got, w.state))
			return 0; /* released already, by its reply */
		bpf_map_delete_elem(&mc_udp_writes, &k);
	}
	/* The table is full, or the client has a write with this request id
	 * in flight: the domain is held for as long as this write would be,
	 * then bumped (santa_mc_settle). */
	dom = santa_mc_domain_of(w.domain);
	if (dom)
		santa_mc_hold(dom, w.deadline + santa_mc_flush_hold(w.delay));
	santa_mc_udp_end(w.domain, w.slot, 0);
	santa_mc_count(w.domain, SANTA_MC_UDP_DOMAIN);
	return 0;
}

/* A UDP request of a memcached service, read into s: parsed from a fresh
 * state after its 8-byte frame header; its writes held. A datagram that
 * does not end between commands counts as lost sync (docs/memcached.md,
 * "UDP"): its domain is held. */
static __always_inline void santa_mc_datagram(const struct santa_service *svc, const struct santa_pkt *pkt,
					      struct santa_scratch *s)
{
	struct santa_mc_user user = { .domain = svc->mc_domain };
	struct mc_req_state *st;
	__u32 zero = 0, plen = pkt->plen;

	st = bpf_map_lookup_elem(&mc_udp_state, &zero);
	if (!st || !s || plen <= 8 || plen > SANTA_MAX_UDP_REQUEST)
		return;
	__builtin_memset(st, 0, sizeof(*st));
	if (mc_req_parse_at(st, s->buf, 8, plen - 8, &user) == 0 && !mc_req_idle(st))
		santa_mc_datagram_lost(user.domain);
	if (user.writes)
		santa_mc_udp_hold(&user, pkt, *(__u16 *)s->buf);
}

/* Whether a reply whose payload (after the frame header) starts with
 * line[0, n) is one only a write gets (santa_mc_udp_by_reply). */
static __always_inline int santa_mc_write_reply(const __u8 *line, __u32 n)
{
	struct mc_token t;

	mc_token_start(&t);
	for (int i = 0; i < 12; i++) {
		if (i >= n)
			return 0;
		if (line[i] == ' ' || line[i] == '\r')
			break;
		mc_token_byte(&t, line[i], 1);
	}
	switch (t.word) {
	case MC_W6('S', 'T', 'O', 'R', 'E', 'D'): case MC_W10('N', 'O', 'T', '_', 'S', 'T', 'O', 'R', 'E', 'D'):
	case MC_W6('E', 'X', 'I', 'S', 'T', 'S'): case MC_W9('N', 'O', 'T', '_', 'F', 'O', 'U', 'N', 'D'):
	case MC_W7('D', 'E', 'L', 'E', 'T', 'E', 'D'): case MC_W7('T', 'O', 'U', 'C', 'H', 'E', 'D'):
		return 1;
	}
	return mc_token_number(&t, 0, 20); /* incr/decr's new value */
}

/* A frame memcached's UDP socket of domain sends to the client at (ipv6,
 * addr, port): if it starts a reply only a write gets, the write its
 * request id names is done. frame: its first bytes (n of them, n >= 8). */
static __always_inline void santa_mc_udp_reply_frame(__u32 domain, int ipv6, const __u32 *addr, __be16 port,
						     const __u8 *frame, __u32 n)
{
	struct santa_mc_udp_write *w;
	struct santa_mc_udp_key k = {};

	/* Sequence 0: a reply's first frame (memcached sends each reply in
	 * frames of its own). */
	if (frame[2] || frame[3] || !santa_mc_write_reply(frame + 8, n - 8))
		return;
	santa_mc_udp_client(&k, domain, ipv6, addr, port, *(__u16 *)frame);
	w = bpf_map_lookup_elem(&mc_udp_writes, &k);
	if (!w || !santa_mc_udp_take(w, SANTA_MC_UDP_LIVE))
		return;
	santa_mc_udp_end(w->domain, w->slot, w->delay);
	santa_mc_count(w->domain, SANTA_MC_COMPLETED);
	bpf_map_delete_elem(&mc_udp_writes, &k);
}

#endif /* SANTA_MC_UDP_H */
