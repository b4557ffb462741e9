/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/* Values taken from sets (docs/memcached.md, "Answering after a set"): a
 * rule whose key a set has written answers with the set's value once
 * memcached stored it, where it would otherwise stay dead until the agent
 * read the key again.
 *
 * - When a "set <key> <flags> <exptime> <bytes>" that gets a reply arrives
 *   over TCP whole in one segment, the verdict writes the GET reply text it
 *   makes into mc_fresh, owned by the set (its connection and reply
 *   number), not ready (mc_capture.h).
 * - When memcached's reply to that very set is STORED (sk_msg,
 *   mc_refresh.h) and nothing else wrote the slot since the set arrived
 *   (the slot's generation is the one it had when the set was put in
 *   flight, and the set is its only write in flight), the record is ready
 *   at the generation the set's completion leaves the slot at: memcached
 *   holds exactly the set's value then.
 * - A guarded rule marked SANTA_GUARD_FRESH whose slot moved on answers
 *   from a ready record of its key at the slot's generation, its domain's
 *   checks as every guard's; the record's deadline (from the set's
 *   exptime) replaces the rule's.
 *
 * A record is written in place: a seqlock (seq odd while written) tells a
 * reader whose copy overlapped a write, which then drops its reply (the
 * packet holds it already). Readers and writers order their accesses as
 * x86 does (TSO): loads are not reordered with loads, nor stores with
 * stores; the compiler is kept from reordering with barriers.
 *
 * Records are indexed by slot modulo SANTA_MC_FRESH: two slots that share
 * an index take turns, each set evicting the other's value.
 */
#ifndef SANTA_MC_FRESH_H
#define SANTA_MC_FRESH_H

#include "santa_abi.h"

#define santa_barrier() asm volatile("" ::: "memory")

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SANTA_MC_FRESH);
	__type(key, __u32);
	__type(value, struct santa_mc_fresh);
} mc_fresh SEC(".maps");

/* A set whose value may be taken (mc_capture.h), where it is in its
 * segment. */
struct santa_mc_set {
	__u64 cookie; /* its connection */
	__u32 domain;
	__u32 slot;
	__u32 seq;    /* its reply number */
	__u32 off;    /* where it starts in the segment */
	__u32 len;    /* its bytes, line and data */
	__u32 pad;
};

/* The sets of a segment whose value may be taken; more are not. */
#define SANTA_MC_SETS 16
struct santa_mc_sets {
	__u32 n;
	__u32 pad;
	struct santa_mc_set set[SANTA_MC_SETS];
};

static __always_inline struct santa_mc_fresh *santa_mc_fresh_of(__u32 slot)
{
	__u32 at = slot & (SANTA_MC_FRESH - 1);

	return bpf_map_lookup_elem(&mc_fresh, &at);
}

/* What a reader took of a record: the answer's text length and sum, and
 * the seq its copy must still find. Or, when the rule was refused, whether
 * memcached's reply to the get may refill it (fill, mc_fill.h): its slot
 * then, and the generation the reply must find. */
struct santa_fresh_read {
	__u32 slot;
	__u32 seq;
	__u32 len;
	__u32 sum;
	__u32 fill;
	__u32 fill_slot;
	__u32 fill_gen;
	__u32 fill_domain_gen;
};

/* Whether f's record of slot answers rule now: ready at the slot's
 * generation gen, of the rule's domain, not past its deadline, and of the
 * rule's key, the one in its template's VALUE line (template holds cap
 * bytes). f is filled in. */
static __always_inline int santa_mc_fresh_usable(struct santa_fresh_read *f, const struct santa_guard *g, __u32 gen,
						 const __u8 *template, __u32 cap)
{
	struct santa_mc_fresh *rec = santa_mc_fresh_of(g->slot);
	__u32 keylen, i;

	if (!rec)
		return 0;
	f->seq = *(volatile __u32 *)&rec->seq;
	if (f->seq & 1)
		return 0;
	santa_barrier();
	if (!rec->ready || rec->slot != g->slot || rec->domain != g->domain || rec->gen != gen)
		return 0;
	if (rec->deadline && bpf_ktime_get_ns() >= rec->deadline)
		return 0;
	/* "VALUE <key> ": the template's key (santad checked its shape) is
	 * the record's if the bytes agree and a space follows both. */
	keylen = rec->keylen;
	if (keylen == 0 || keylen > SANTA_MC_FRESH_LEN - 8)
		return 0;
	for (i = 0; i < SANTA_MC_FRESH_LEN - 8; i++) {
		__u32 at = SANTA_MC_FRAME + 6 + i;

		if (i >= keylen)
			break;
		if (at >= cap || rec->text[6 + i] != template[at])
			return 0;
	}
	i = SANTA_MC_FRAME + 6 + keylen;
	if (i >= cap || template[i] != ' ' || rec->text[6 + keylen] != ' ')
		return 0;
	f->slot = g->slot;
	f->len = rec->len;
	f->sum = rec->sum;
	santa_barrier();
	return *(volatile __u32 *)&rec->seq == f->seq && f->len > 0 && f->len <= SANTA_MC_FRESH_LEN;
}

/* Whether the record f read is still as read: checked after its text was
 * copied into a reply. */
static __always_inline int santa_mc_fresh_unchanged(const struct santa_fresh_read *f)
{
	struct santa_mc_fresh *rec = santa_mc_fresh_of(f->slot);

	santa_barrier();
	return rec && *(volatile __u32 *)&rec->seq == f->seq;
}

#endif /* SANTA_MC_FRESH_H */
