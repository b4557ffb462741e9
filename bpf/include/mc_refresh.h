/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/* The reply program's part of mc_fresh (mc_fresh.h): a set's value, taken
 * as it arrived (mc_capture.h), is made ready when memcached's STORED for
 * that set leaves. */
#ifndef SANTA_MC_REFRESH_H
#define SANTA_MC_REFRESH_H

#include "santa_abi.h"
#include "maps.h"
#include "guard.h"
#include "mc_fresh.h"

/* memcached's STORED for the set that is the seq-th reply of connection
 * cookie has left: if the set's value was taken, and nothing but the set
 * wrote the slot since it arrived (gen: the slot's generation then; the
 * set the one write in flight), the record is ready at the generation the
 * set's end leaves (santa_mc_end_slot bumps next). A global function:
 * verified once. */
__noinline int santa_mc_fresh_ready(__u32 slot, __u32 gen, __u32 domain, __u64 cookie, __u32 seq)
{
	struct santa_mc_fresh *rec = santa_mc_fresh_of(slot);
	struct santa_mc_slot *ks = bpf_map_lookup_elem(&mc_slots, &slot);
	__u32 s;

	if (!rec || !ks)
		return 0;
	s = *(volatile __u32 *)&rec->seq;
	if (s & 1)
		return 0;
	santa_barrier();
	if (rec->ready || rec->slot != slot || rec->domain != domain || rec->cookie != cookie || rec->cmd_seq != seq)
		return 0;
	if (*(volatile __u32 *)&ks->gen != gen || *(volatile __u32 *)&ks->inflight != 1)
		return 0;
	if (__sync_val_compare_and_swap(&rec->seq, s, s + 1) != s)
		return 0;
	santa_barrier();
	rec->gen = gen + 1;
	/* memcached's clock is the whole seconds of a monotonic clock, read
	 * at ticks a little over a second apart: after a tick just before a
	 * whole second it is nearly 2 s behind until the next one. The item
	 * expires when that clock reaches its value at the set plus ttl: as
	 * early as ttl - 2 s after the set arrived (SANTA_MC_CLOCK_LAG_MS
	 * adds 100 ms for a late tick and the set's handling). */
	rec->deadline = rec->ttl ? bpf_ktime_get_ns() + ((__u64)rec->ttl * 1000 - SANTA_MC_CLOCK_LAG_MS) * 1000000ULL : 0;
	rec->ready = 1;
	santa_barrier();
	*(volatile __u32 *)&rec->seq = s + 2;
	santa_mc_count(domain, SANTA_MC_REFRESHED);
	return 0;
}

#endif /* SANTA_MC_REFRESH_H */
