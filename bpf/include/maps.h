/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/* Every map of the data plane, declared once. User space sizes the
 * max_entries marked "load time" before loading. */
#ifndef SANTA_MAPS_H
#define SANTA_MAPS_H

#include "santa_abi.h"

/* Registered sockets by socket cookie: which packets belong to a service.
 * Not preallocated: an update then swaps in a new element and frees the old
 * one after an RCU grace period. A preallocated map recycles the old element
 * at once, so a reader switching index generations could see a torn value. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, SANTA_DEFAULT_MAX_SERVICES); /* load time */
	__type(key, __u64);
	__type(value, struct santa_service);
} services SEC(".maps");

/* Cookies of registered sockets that were closed (santa_sock_release):
 * user space drops their rules. The service itself is gone already. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, SANTA_CLOSED_RING_BYTES);
} closed_sockets SEC(".maps");

/* Region-hash index: {index_id, region, prefix end, FNV-1a} -> candidates,
 * in an open-addressing table whose entries user space places
 * (internal/datapath/indextable.go). A probe is one array access, which
 * the verifier inlines; a hash map's bucket would be a dependent cache miss
 * of its own. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* load time: a power of two */
	__type(key, __u32);
	__type(value, struct santa_index_entry);
} rule_index SEC(".maps");

/* rule_index's max_entries - 1, set from user space before loading. */
volatile const __u32 santa_index_mask = 0;

/* Rule bodies by slot, one map per size class (santa_abi.h). The UDP
 * classes are arrays of fixed-size chunks, created by user space as slots
 * are handed out, so that most hosts hold far fewer bodies than the
 * capacity: a slot's number picks the chunk, then the body in it. Both
 * lookups are array lookups, which the verifier inlines, and a body is one
 * memory access away; a hash map's bucket would be one more (a cache miss
 * of its own at a million rules). */
#define SANTA_RULES_CHUNKED(name, body, shift)                        \
	struct name##_chunk {                                         \
		__uint(type, BPF_MAP_TYPE_ARRAY);                     \
		__uint(max_entries, 1u << (shift));                   \
		__type(key, __u32);                                   \
		__type(value, body);                                  \
	};                                                            \
	struct {                                                      \
		__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);             \
		__uint(max_entries, 1); /* load time: chunks for the capacity */ \
		__type(key, __u32);                                   \
		__array(values, struct name##_chunk);                 \
	} name SEC(".maps");                                          \
	/* Clang emits an inner map's value type as a forward         \
	 * declaration only: this keeps the whole of it in BTF. */    \
	const body *name##_value __attribute__((unused))

SANTA_RULES_CHUNKED(rules_small, struct santa_rule_small, SANTA_SMALL_CHUNK_SHIFT);
SANTA_RULES_CHUNKED(rules_medium, struct santa_rule_medium, SANTA_MEDIUM_CHUNK_SHIFT);
SANTA_RULES_CHUNKED(rules_large, struct santa_rule_large, SANTA_LARGE_CHUNK_SHIFT);

/* TCP replies beyond a UDP frame: rare, and a chunk of 64-KiB bodies would
 * be far too large to allocate ahead, so a hash map allocated per rule. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, SANTA_DEFAULT_MAX_RULES); /* load time */
	__type(key, __u32);
	__type(value, struct santa_rule_huge);
} rules_huge SEC(".maps");

/* How many times each rule slot was freed for reuse, written by user space
 * (reclaim.go) before the slot goes back to its pool: a slot whose count
 * is what it was still holds the body it held then. Only the TCP reply
 * program reads it, to build the rest of a reply TCP took part of long
 * after the rule was matched (santa_open_reply). A slot's count is number
 * 4 * its number + its class; two to an element, as a mapped array rounds
 * each element up to 8 bytes. Mapped by user space. */
struct santa_slot_gen_pair {
	__u32 count[2];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 2); /* load time: 2 * (rules + 1) */
	__type(key, __u32);
	__type(value, struct santa_slot_gen_pair);
} slot_gens SEC(".maps");

/* slot's count in slot_gens, or NULL. */
static __always_inline __u32 *santa_slot_gen(__u32 slot)
{
	__u32 at = (slot & ((1u << SANTA_SLOT_CLASS_SHIFT) - 1)) << 2 | slot >> SANTA_SLOT_CLASS_SHIFT, pair = at >> 1;
	struct santa_slot_gen_pair *p = bpf_map_lookup_elem(&slot_gens, &pair);

	return p ? &p->count[at & 1] : NULL;
}

/* After a lookup in one of several maps chosen by a switch: keeps that
 * lookup a call of its own. Written as a plain switch, the compiler merges
 * the calls into one with the map chosen before it, and a call site that
 * sees several maps is not inlined by the verifier: the generic helper's
 * indirect call cost about 40 ns per lookup (dpbench, 1 rule: 741 ns per
 * packet, 611 before the size classes, 681 with this). */
#define santa_own_lookup(p) asm volatile("" : "+r"(p))

/* The body in slot of a chunked class: its chunk, then its place there. */
#define santa_chunked_body(outer, slot, shift)                                           \
	({                                                                                \
		__u32 chunk_ = ((slot) & ((1u << SANTA_SLOT_CLASS_SHIFT) - 1)) >> (shift); \
		__u32 at_ = (slot) & ((1u << (shift)) - 1);                               \
		void *inner_ = bpf_map_lookup_elem(&outer, &chunk_), *body_ = NULL;        \
		santa_own_lookup(inner_);                                                 \
		if (inner_) {                                                             \
			body_ = bpf_map_lookup_elem(inner_, &at_);                        \
			santa_own_lookup(body_);                                          \
		}                                                                         \
		body_;                                                                    \
	})

/* The rule in slot, from its class's map, or NULL; *cap (unless cap is
 * NULL) is how many reply bytes the class holds. Every reader of a body
 * goes through here: matching reads the head every class starts with, a
 * reply the template right after it (santa_rule_reply), which the verifier
 * bounds by the value size of the map the pointer came from. */
static __always_inline struct santa_rule *santa_rule_at(__u32 slot, __u32 *cap)
{
	struct santa_rule *rule;
	__u32 bytes;

	switch (slot >> SANTA_SLOT_CLASS_SHIFT) {
	case SANTA_RULE_SMALL:
		rule = santa_chunked_body(rules_small, slot, SANTA_SMALL_CHUNK_SHIFT);
		bytes = SANTA_SMALL_REPLY;
		break;
	case SANTA_RULE_MEDIUM:
		rule = santa_chunked_body(rules_medium, slot, SANTA_MEDIUM_CHUNK_SHIFT);
		bytes = SANTA_MEDIUM_REPLY;
		break;
	case SANTA_RULE_LARGE:
		rule = santa_chunked_body(rules_large, slot, SANTA_LARGE_CHUNK_SHIFT);
		bytes = SANTA_MAX_UDP_REPLY;
		break;
	case SANTA_RULE_HUGE:
		rule = bpf_map_lookup_elem(&rules_huge, &slot);
		santa_own_lookup(rule);
		bytes = SANTA_MAX_TCP_REPLY;
		break;
	default: /* none: a class is two bits; every value is a case */
		return NULL;
	}
	if (cap)
		*cap = bytes;
	return rule;
}

/* The reply template of a rule from santa_rule_at: every class's body has
 * it right after the head (santa_abi.h). */
static __always_inline __u8 *santa_rule_reply(struct santa_rule *rule)
{
	return (__u8 *)(rule + 1);
}

/* Starts reading the body in slot, before matching needs its first byte:
 * at a million rules every line of it is a cache miss, and the reply
 * template's lines would otherwise follow the head's. Each of its cache
 * lines is read, so that their misses are all under way at once instead
 * of one after another as matching and the reply reach them. Huge (TCP)
 * bodies are rare and long: not warmed. */
static __always_inline void santa_warm_rule(__u32 slot)
{
	struct santa_rule *rule;
	__u32 cap, size;

	if (slot >> SANTA_SLOT_CLASS_SHIFT == SANTA_RULE_HUGE)
		return;
	rule = santa_rule_at(slot, &cap);
	if (!rule)
		return;
	size = sizeof(*rule) + cap;
#pragma unroll
	for (__u32 at = 0; at < sizeof(struct santa_rule_large); at += 64)
		if (at < size)
			asm volatile("" : : "r"(*(volatile __u8 *)((void *)rule + at)));
}

/* Hits and reply bytes per rule id. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SANTA_DEFAULT_MAX_RULES); /* load time */
	__type(key, __u32);
	__type(value, struct santa_rule_stats);
} rule_stats SEC(".maps");

/* Matched / passed / fallback packets per service id. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SANTA_DEFAULT_MAX_SERVICES); /* load time */
	__type(key, __u32);
	__type(value, struct santa_service_stats);
} service_stats SEC(".maps");

/* Why each packet left the program the way it did (enum santa_path). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SANTA_PATH_NCOUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} path_stats SEC(".maps");

/* The request payload, copied once so that hashing, comparing and copy
 * processors read plain memory with simple bounds, and so that copies can
 * still read the request after the reply has overwritten the packet. */
struct santa_scratch {
	__u8 buf[SANTA_SCRATCH_LEN];
};

/* Adds v to a per-CPU counter. Programs that can run in a task (the TCP
 * ones, which define SANTA_TASK_CONTEXT) add atomically: a softirq on the
 * same CPU can bump the same counter in the middle of a read-modify-write,
 * and one of the two additions would be lost. XDP and TC programs run only
 * in softirqs, which do not interrupt one another, and add plainly. */
#ifdef SANTA_TASK_CONTEXT
#define santa_add(counter, v) __sync_fetch_and_add(&(counter), (v))
#else
#define santa_add(counter, v) ((counter) += (v))
#endif

/* Adds one to a per-CPU counter of a path-counter map. */
static __always_inline void santa_count_in(void *counters, __u32 key)
{
	__u64 *n = bpf_map_lookup_elem(counters, &key);

	if (n)
		santa_add(*n, 1);
}

static __always_inline void santa_count_path(__u32 path)
{
	santa_count_in(&path_stats, path);
}

static __always_inline void santa_count_service(__u32 service_id, __u32 counter)
{
	struct santa_service_stats *st = bpf_map_lookup_elem(&service_stats, &service_id);

	if (st && counter < SANTA_SVC_NCOUNTERS)
		santa_add(st->packets[counter], 1);
}

static __always_inline void santa_count_rule(__u32 rule_id, __u32 bytes)
{
	struct santa_rule_stats *st = bpf_map_lookup_elem(&rule_stats, &rule_id);

	if (st) {
		santa_add(st->hits, 1);
		santa_add(st->bytes, bytes);
	}
}

/* Starts reading a rule's counters ahead of santa_count_rule. At a million
 * rules they are a cache (and TLB) miss of their own, which would otherwise
 * wait for the rule's: its id is in the rule. */
static __always_inline void santa_warm_rule_stats(__u32 rule_id)
{
	struct santa_rule_stats *st = bpf_map_lookup_elem(&rule_stats, &rule_id);

	if (st)
		asm volatile("" : : "r"(st->hits));
}

#endif /* SANTA_MAPS_H */
