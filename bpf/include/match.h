/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/* The matcher shared by every hook: region hashing with 32-bit FNV-1a, an
 * index walk from a region's root to deeper prefix nodes, then a full byte
 * compare of each candidate. The loops live in global functions so the
 * verifier checks each once, not once per region and candidate. */
#ifndef SANTA_MATCH_H
#define SANTA_MATCH_H

#include "santa_abi.h"
#include "maps.h"
#include "index_home.h"

#define SANTA_FNV_OFFSET 2166136261u
#define SANTA_FNV_PRIME 16777619u

/* FNV-1a over s->buf[off, off + len), continuing from h. */
__noinline __u32 santa_fnv(struct santa_scratch *s, __u32 off, __u32 len, __u32 h)
{
	if (!s)
		return h;
	off &= SANTA_MAX_COND_END - 1;
	for (__u32 i = 0; i < SANTA_MAX_EXTEND_LEN; i++) {
		if (i >= len)
			break;
		h = (h ^ s->buf[off + i]) * SANTA_FNV_PRIME;
	}
	return h;
}

/* Whether the request (plen bytes in s) satisfies the rule: its length is
 * in the rule's range, the condition's bytes are equal, and every copy
 * source lies inside the request. */
__noinline int santa_rule_applies(struct santa_scratch *s, struct santa_rule *rule, __u32 plen)
{
	__u32 off, len, words;

	if (!s || !rule)
		return 0;
	if (plen < rule->req_min || (rule->req_max && plen > rule->req_max))
		return 0;
	off = rule->cond_off;
	len = rule->cond_len;
	if (len == 0 || len > SANTA_MAX_COND_LEN || off + len > plen || off >= SANTA_MAX_COND_END)
		return 0;
	words = len / 8;
	for (__u32 i = 0; i < SANTA_MAX_COND_LEN / 8; i++) {
		if (i >= words)
			break;
		if (*(__u64 *)&s->buf[off + i * 8] != *(__u64 *)&rule->cond[i * 8])
			return 0;
	}
	if (len & 7) {
		/* Little-endian: the first (len & 7) bytes are the low bits. */
		__u64 mask = (1ull << ((len & 7) * 8)) - 1;
		__u32 at = words * 8;

		if (at > SANTA_MAX_COND_LEN - 8)
			return 0;
		if ((*(__u64 *)&s->buf[off + at] ^ *(__u64 *)&rule->cond[at]) & mask)
			return 0;
	}
	for (int i = 0; i < SANTA_MAX_COPIES; i++) {
		if (i >= rule->ncopies)
			break;
		if (rule->copies[i].src + rule->copies[i].len > plen)
			return 0;
	}
	return 1;
}

/* A rule the walk found, by value: scalars, so that the verifier does not
 * follow a pointer into one of three rule maps through every step of the
 * walk. slot is SANTA_SLOT_NONE while nothing was found. */
struct santa_found {
	__u32 slot;
	__u32 rule_id;
	__u32 cond_len;
};

/* The first candidate of a node that applies (they are sorted best first)
 * goes to *found. Returns whether there was one. */
__noinline int santa_node_best(struct santa_scratch *s, struct santa_index_node *node,
			       __u32 service_id, __u32 plen, struct santa_found *found)
{
	if (!node || !found)
		return 0;
	/* The first candidate usually answers: its body and counters are read
	 * in parallel, not one after another (docs/benchmarks.md, "Reading
	 * ahead"). */
	if (node->slots[0] != SANTA_SLOT_NONE) {
		santa_warm_rule(node->slots[0]);
		santa_warm_rule_stats(node->head_id);
	}
#pragma unroll
	for (int i = 0; i < SANTA_NODE_SLOTS; i++) {
		__u32 slot = node->slots[i];
		struct santa_rule *rule;

		if (slot == SANTA_SLOT_NONE)
			break;
		rule = santa_rule_at(slot, NULL);
		/* A slot read while the node was being replaced may name another
		 * rule: the owner check and the full compare keep that harmless. */
		if (rule && rule->service_id == service_id && santa_rule_applies(s, rule, plen)) {
			found->slot = slot;
			found->rule_id = rule->rule_id;
			found->cond_len = rule->cond_len;
			return 1;
		}
	}
	return 0;
}

/* Where key's entry lies in rule_index, or SANTA_INDEX_TOMB if it has none:
 * probes from the key's home up to a free position. An entry rewritten
 * under the probe may be read torn; santa_node_best's owner check and full
 * compare keep that harmless. A global function: the verifier checks the
 * loop once, not at every region and depth. */
__noinline __u32 santa_index_find(struct santa_index_key *key)
{
	__u32 home;

	if (!key)
		return SANTA_INDEX_TOMB;
	home = santa_index_home(key);
	for (__u32 i = 0; i < SANTA_INDEX_PROBES; i++) {
		__u32 pos = (home + i) & santa_index_mask;
		struct santa_index_entry *e = bpf_map_lookup_elem(&rule_index, &pos);

		if (!e || e->key.index_id == 0)
			break;
		if (e->key.hash == key->hash && e->key.index_id == key->index_id && e->key.end == key->end &&
		    e->key.region == key->region)
			return pos;
	}
	return SANTA_INDEX_TOMB;
}

static __always_inline struct santa_index_node *santa_index_lookup(struct santa_index_key *key)
{
	__u32 pos = santa_index_find(key);
	struct santa_index_entry *e;

	if (pos == SANTA_INDEX_TOMB)
		return NULL;
	e = bpf_map_lookup_elem(&rule_index, &pos);
	return e ? &e->node : NULL;
}

/* The best rule of one region: the deepest node's applicable candidate,
 * because a deeper node only holds longer conditions. */
static __always_inline void santa_match_region(struct santa_scratch *s, struct santa_service *svc,
					       __u32 r, __u32 plen, struct santa_found *best)
{
	struct santa_index_key key = {};
	struct santa_index_node *node;
	struct santa_found found;
	__u32 end, off, len;

	best->slot = SANTA_SLOT_NONE;
	if (r >= SANTA_MAX_REGIONS)
		return;
	off = svc->regions[r].off;
	len = svc->regions[r].len;
	end = off + len;
	if (len == 0 || len > SANTA_MAX_REGION_LEN || end > plen || end > SANTA_MAX_COND_END)
		return;

	key.index_id = svc->index_id;
	key.region = r;
	key.end = end;
	key.hash = santa_fnv(s, off, len, SANTA_FNV_OFFSET);
	for (int depth = 0; depth <= SANTA_MAX_DEPTH; depth++) {
		__u32 next;

		node = santa_index_lookup(&key);
		if (!node)
			break;
		if (santa_node_best(s, node, svc->id, plen, &found))
			*best = found;
		next = node->next_end;
		if (next <= key.end || next > plen || next - key.end > SANTA_MAX_EXTEND_LEN)
			break;
		key.hash = santa_fnv(s, key.end, next - key.end, key.hash);
		key.end = next;
	}
}

/* Most specific first: the longer condition, then the lower rule id. */
static __always_inline int santa_more_specific(const struct santa_found *a, const struct santa_found *b)
{
	return a->cond_len > b->cond_len || (a->cond_len == b->cond_len && a->rule_id < b->rule_id);
}

/* The rule that answers this request, or NULL. */
static __always_inline struct santa_rule *santa_match(struct santa_scratch *s,
						      struct santa_service *svc, __u32 plen)
{
	struct santa_found best = { .slot = SANTA_SLOT_NONE }, found;

	for (__u32 r = 0; r < SANTA_MAX_REGIONS; r++) {
		if (r >= svc->nregions)
			break;
		santa_match_region(s, svc, r, plen, &found);
		if (found.slot != SANTA_SLOT_NONE &&
		    (best.slot == SANTA_SLOT_NONE || santa_more_specific(&found, &best)))
			best = found;
	}
	if (best.slot == SANTA_SLOT_NONE)
		return NULL;
	return santa_rule_at(best.slot, NULL);
}

#endif /* SANTA_MATCH_H */
