/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/* Generations and guards (santa_abi.h, "memcached invalidation";
 * docs/memcached.md, "Invalidation"): the maps the writes of a memcached
 * service bump (mc_inval.h) and the check every answer of a guarded rule
 * passes first, UDP and TCP alike. */
#ifndef SANTA_GUARD_H
#define SANTA_GUARD_H

#include "santa_abi.h"
#include "maps.h"
#include "mc_fresh.h"

/* Every domain's key slots: 8 MiB, preallocated (an array: one inlined
 * access, no bucket). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SANTA_MC_SLOTS);
	__type(key, __u32);
	__type(value, struct santa_mc_slot);
} mc_slots SEC(".maps");

/* Slots for which a write that may give its key an expiry was seen, a
 * bit each, never cleared (mc_fill.h): 128 KiB. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SANTA_MC_SLOTS / 64);
	__type(key, __u32);
	__type(value, __u64);
} mc_mortal SEC(".maps");

/* Domains by id (a service id). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SANTA_DEFAULT_MAX_SERVICES); /* load time */
	__type(key, __u32);
	__type(value, struct santa_mc_domain);
} mc_domains SEC(".maps");

/* Each domain's life, by domain id, user space's alone: the epoch of its
 * current start, 0 once one of its services is no longer parsed (then
 * writes may go unseen, and none of its guards lets a rule answer). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SANTA_DEFAULT_MAX_SERVICES); /* load time */
	__type(key, __u32);
	__type(value, __u32);
} mc_live SEC(".maps");

/* What the writes and guards of each domain did, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SANTA_DEFAULT_MAX_SERVICES); /* load time */
	__type(key, __u32);
	__type(value, struct santa_mc_stats);
} mc_stats SEC(".maps");

/* The slot of a key whose FNV-1a 32 is hash, in domain: the hash mixed
 * with the domain (so that two memcacheds' keys do not share slots by
 * their hash alone) and finalized as MurmurHash3's fmix32 does. Go:
 * internal/datapath's mcSlot. */
static __always_inline __u32 santa_mc_slot_of(__u32 hash, __u32 domain)
{
	__u32 h = hash ^ (domain * 0x9e3779b1u);

	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	return h & (SANTA_MC_SLOTS - 1);
}

static __always_inline void santa_mc_count(__u32 domain, __u32 counter)
{
	struct santa_mc_stats *st = bpf_map_lookup_elem(&mc_stats, &domain);

	if (st && counter < SANTA_MC_NCOUNTERS)
		santa_add(st->n[counter], 1);
}

/* A write that may give the keys of slot (SANTA_MC_NO_SLOT: any key of
 * dom) an expiry was seen. */
static __always_inline void santa_mc_make_mortal(struct santa_mc_domain *dom, __u32 slot)
{
	__u32 at = slot / 64;
	__u64 *bits;

	if (slot == SANTA_MC_NO_SLOT) {
		if (dom)
			*(volatile __u32 *)&dom->mortal = 1;
		return;
	}
	bits = bpf_map_lookup_elem(&mc_mortal, &at);
	if (bits && !(*(volatile __u64 *)bits & (1ULL << (slot & 63))))
		__sync_fetch_and_or(bits, 1ULL << (slot & 63));
}

/* Whether a write that may have given a key of slot in dom an expiry was
 * ever seen. */
static __always_inline int santa_mc_mortal(const struct santa_mc_domain *dom, __u32 slot)
{
	__u32 at = slot / 64;
	__u64 *bits = bpf_map_lookup_elem(&mc_mortal, &at);

	return !bits || *(volatile __u32 *)&dom->mortal || (*(volatile __u64 *)bits & (1ULL << (slot & 63)));
}

/* The domain's hold (santa_mc_domain.hold_until): 0 if none or if it
 * just ended, -1 while it lasts. One that has ended bumps the domain
 * first, then is cleared: a reader that sees no hold sees the new
 * generation. Two readers may both bump: more invalidation, never less. */
static __always_inline int santa_mc_settle(struct santa_mc_domain *dom, __u32 domain)
{
	__u64 until = *(volatile __u64 *)&dom->hold_until;

	if (!until)
		return 0;
	if (bpf_ktime_get_ns() < until)
		return -1;
	__sync_fetch_and_add(&dom->gen, 1);
	santa_mc_count(domain, SANTA_MC_DOMAIN_BUMPS);
	/* A hold raised meanwhile stays. */
	__sync_val_compare_and_swap(&dom->hold_until, until, 0);
	return 0;
}

/* Nothing of the domain answers until at least until (bpf_ktime_get_ns),
 * then its generation is bumped. The hold only grows: a later, shorter
 * one does not shorten it. */
static __always_inline void santa_mc_hold(struct santa_mc_domain *dom, __u64 until)
{
	/* A swap fails only if another CPU changed the hold between our
	 * load and our swap: 32 times in a row does not happen. */
	for (int i = 0; i < 32; i++) {
		__u64 was = *(volatile __u64 *)&dom->hold_until;

		if (was >= until || __sync_val_compare_and_swap(&dom->hold_until, was, until) == was)
			return;
	}
}

/* What a guard lets a rule answer with (santa_guard_check). */
enum santa_guard_answer {
	SANTA_GUARD_REFUSED = 0,
	SANTA_GUARD_TEMPLATE = 1, /* its own reply */
	SANTA_GUARD_SET = 2,      /* the value a set of its key stored (mc_fresh.h), as read into fresh */
};

/* What the guard of the rule in slot lets it answer now (enum
 * santa_guard_answer); a refusal is counted. Its guard ends its class's
 * reply area. fresh, if not NULL, may take a set's value (UDP only). A
 * global function: the verifier checks it once. */
__noinline int santa_guard_check(__u32 slot, struct santa_fresh_read *fresh)
{
	struct santa_mc_domain *dom;
	struct santa_mc_slot *ks;
	struct santa_rule *rule;
	struct santa_guard *g;
	__u32 cap, refused, *live;

	rule = santa_rule_at(slot, &cap);
	if (!rule || cap < sizeof(*g))
		return SANTA_GUARD_REFUSED;
	g = (struct santa_guard *)(santa_rule_reply(rule) + cap - sizeof(*g));
	live = bpf_map_lookup_elem(&mc_live, &g->domain);
	dom = bpf_map_lookup_elem(&mc_domains, &g->domain);
	if (!live || !dom)
		return SANTA_GUARD_REFUSED;
	/* The hold first: once it ends, the domain's generation has moved. */
	if (santa_mc_settle(dom, g->domain)) {
		refused = SANTA_MC_GUARD_INFLIGHT;
		goto refuse;
	}
	if (*(volatile __u32 *)live != g->epoch || *(volatile __u32 *)&dom->gen != g->domain_gen) {
		refused = SANTA_MC_GUARD_STALE;
		goto refuse;
	}
	if (*(volatile __u32 *)&dom->inflight || *(volatile __u32 *)&dom->unsynced) {
		refused = SANTA_MC_GUARD_INFLIGHT;
		goto refuse;
	}
	if (g->slot != SANTA_MC_NO_SLOT) {
		__u32 at = g->slot, gen;

		ks = bpf_map_lookup_elem(&mc_slots, &at);
		if (!ks)
			return SANTA_GUARD_REFUSED;
		gen = *(volatile __u32 *)&ks->gen;
		if (gen != g->gen) {
			/* A set's value, read from its record (which has its
			 * own deadline), if nothing is in flight. */
			if (fresh && (g->flags & SANTA_GUARD_FRESH) && !*(volatile __u32 *)&ks->inflight) {
				if (santa_mc_fresh_usable(fresh, g, gen, santa_rule_reply(rule), cap))
					return SANTA_GUARD_SET;
				/* Or memcached's reply to this very get, once
				 * it leaves (mc_fill.h): for a key that never
				 * expires, while its slot stays at gen. */
				if (!g->deadline && !santa_mc_mortal(dom, g->slot)) {
					fresh->fill = 1;
					fresh->fill_slot = g->slot;
					fresh->fill_gen = gen;
					fresh->fill_domain_gen = g->domain_gen;
				}
			}
			refused = SANTA_MC_GUARD_STALE;
			goto refuse;
		}
		if (*(volatile __u32 *)&ks->inflight) {
			refused = SANTA_MC_GUARD_INFLIGHT;
			goto refuse;
		}
	}
	if (g->deadline && bpf_ktime_get_ns() >= g->deadline) {
		refused = SANTA_MC_GUARD_EXPIRED;
		goto refuse;
	}
	return SANTA_GUARD_TEMPLATE;
refuse:
	santa_mc_count(g->domain, refused);
	return SANTA_GUARD_REFUSED;
}

/* Whether rule may answer with its own reply: an unguarded one always; a
 * guarded one if its guard says so. */
static __always_inline int santa_guard_ok(const struct santa_rule *rule)
{
	return !(rule->flags & SANTA_RULE_GUARDED) || santa_guard_check(rule->slot, NULL) == SANTA_GUARD_TEMPLATE;
}

/* Keep what user space reads and writes in BTF, so bpf2go generates its
 * Go types and constants. */
const enum santa_parser *unused_santa_parser __attribute__((unused));
const enum santa_rule_flag *unused_santa_rule_flag __attribute__((unused));
const enum santa_mc_layout *unused_santa_mc_layout __attribute__((unused));
const enum santa_mc_counter *unused_santa_mc_counter __attribute__((unused));
const struct santa_guard *unused_santa_guard __attribute__((unused));
const enum santa_guard_flag *unused_santa_guard_flag __attribute__((unused));
const struct santa_mc_fresh *unused_santa_mc_fresh __attribute__((unused));

#endif /* SANTA_GUARD_H */
