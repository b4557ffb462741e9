/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/* Refilling from memcached's replies (docs/memcached.md, "Refilled from a
 * get's reply"): a rule whose key was written answers again with
 * memcached's own reply to a get of the key that passed, where it would
 * otherwise stay dead until a set's value (mc_fresh.h) or the agent
 * brought it back. After two sets of a key overlap, which of them
 * memcached applied last is not known; its reply to the next get tells.
 *
 * - Every datagram of a memcached service that passes to memcached claims
 *   its client and request id in mc_fills until the first frame of its
 *   reply leaves (santa_mc_fill_claim, XDP or TC; santa_mc_fill_reply on
 *   the socket's egress). A UDP "get <key>" that matches a guarded rule
 *   (SANTA_GUARD_FRESH) of a key that never expires, refused because its
 *   slot moved on to gen with no write in flight, claims it as one that
 *   may fill, with gen and its key's hash and length.
 * - When memcached's reply to it leaves: if the slot is still at gen with
 *   nothing in flight, memcached read the value after every write the
 *   parser had seen, and no write arrived since; the reply, one frame
 *   "VALUE <key> <flags> <bytes>\r\n<data>\r\nEND\r\n" of the get's key,
 *   becomes the slot's record (mc_fresh), ready at gen. The next write
 *   moves the slot on, and the record no longer answers.
 *
 * Expiry: the reply does not tell the item's. A key is filled only if its
 * rule has no deadline (the agent found none) and no write that may give a
 * key of its slot an expiry was ever seen (mc_mortal, the domain's mortal:
 * a storage command with a nonzero exptime, touch, gat, any meta write).
 *
 * A reply is known by its client and request id only: a datagram that
 * finds its id claimed (a request of the client with that id not yet
 * answered: a reply could be either's) unclaims it for filling, and fills
 * nothing itself. Datagrams that reach memcached without passing XDP or
 * TC as a service's (IP fragments, another device) claim nothing
 * (docs/memcached.md, "Refilled from a get's reply").
 */
#ifndef SANTA_MC_FILL_H
#define SANTA_MC_FILL_H

#include "santa_abi.h"
#include "guard.h"
#include "mc_fresh.h"
#include "iter.h"
#include "mc_udp.h"

/* A datagram waiting for its reply. */
struct santa_mc_fill {
	__u32 fill;       /* its reply may refill (a get): 0 for any other, or once another claimed its id */
	__u32 slot;
	__u32 gen;        /* the slot's generation its reply must find, */
	__u32 domain_gen; /* and the domain's */
	__u32 hash;       /* the get's key: FNV-1a 32, */
	__u32 keylen;     /* and length */
};

/* By client and request id; the least recently used go when full (a
 * datagram memcached dropped is never answered). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SANTA_MC_FILLS);
	__type(key, struct santa_mc_udp_key);
	__type(value, struct santa_mc_fill);
} mc_fills SEC(".maps");

/* pkt's datagram, with request id id, passes to svc's memcached: it
 * claims its client and id until its reply. If fresh says its reply may
 * refill the rule that refused it, s holds it (a get of one key). */
static __always_inline void santa_mc_fill_claim(const struct santa_service *svc, const struct santa_pkt *pkt, __u16 id,
						const struct santa_scratch *s, const struct santa_fresh_read *fresh)
{
	struct santa_mc_fill f = {}, *got;
	struct santa_mc_udp_key k = {};

	if (s && fresh && fresh->fill) {
		/* "get <key>\r\n" after the frame header; hashed as the
		 * parser hashes keys (mc_token_byte). */
		f.hash = MC_FNV_OFFSET;
		for (__u32 i = 0; i < MC_MAX_KEY; i++) {
			__u32 at = SANTA_MC_FRAME + 4 + i;

			if (at + 2 >= pkt->plen || at >= SANTA_MAX_UDP_REQUEST)
				break;
			f.hash = (f.hash ^ s->buf[at]) * MC_FNV_PRIME;
			f.keylen++;
		}
		f.fill = 1;
		f.slot = fresh->fill_slot;
		f.gen = fresh->fill_gen;
		f.domain_gen = fresh->fill_domain_gen;
	}
	if (pkt->ipv6)
		santa_mc_udp_client(&k, svc->mc_domain, 1, (const __u32 *)pkt->tuple.ipv6.saddr, pkt->tuple.ipv6.sport, id);
	else
		santa_mc_udp_client(&k, svc->mc_domain, 0, &pkt->tuple.ipv4.saddr, pkt->tuple.ipv4.sport, id);
	if (!bpf_map_update_elem(&mc_fills, &k, &f, BPF_NOEXIST))
		return;
	got = bpf_map_lookup_elem(&mc_fills, &k);
	if (got) {
		got->fill = 0;
		return;
	}
	/* Its reply took the other claim meanwhile: this datagram still
	 * claims its id, as one that fills nothing. */
	f.fill = 0;
	bpf_map_update_elem(&mc_fills, &k, &f, BPF_NOEXIST);
}

/* Whether a reply frame whose first n bytes are head starts "VALUE ". */
static __always_inline int santa_mc_value_reply(const __u8 *head, __u32 n)
{
	const __u8 *t = head + SANTA_MC_FRAME;

	return n >= SANTA_MC_FRAME + 6 && t[0] == 'V' && t[1] == 'A' && t[2] == 'L' && t[3] == 'U' && t[4] == 'E' &&
	       t[5] == ' ';
}

/* Where the reply text's parse is (santa_mc_fill_parse). */
struct santa_mc_fill_text {
	__u32 tok;    /* 0: the key, 1: flags, 2: bytes, 3: the line's LF, 4: past the line */
	__u32 keylen;
	__u32 digits; /* of the current number */
	__u32 bytes;
	__u32 hash;   /* FNV-1a 32 of the key */
	__u32 data;   /* where the data starts */
};

/* Parses text (len bytes, "VALUE " checked) as one value's reply; returns
 * whether it is one, with t filled in. An open-coded loop: as a bounded
 * one, its state machine took the verifier 830,000 of the 860,000
 * instructions santa_mc_udp_reply took (of a million it allows), every
 * key length a path of its own. So nothing here counts bytes: the key's
 * length is where its space is. */
static __always_inline int santa_mc_fill_parse(const __u8 *text, __u32 len, struct santa_mc_fill_text *t)
{
	int i;

	t->hash = MC_FNV_OFFSET;
	santa_for(i, 6, SANTA_MC_FRESH_LEN)
	{
		__u8 b;

		if ((__u32)i >= len)
			return 0;
		b = text[i];
		if (t->tok == 0) {
			if (b == ' ') {
				if (i == 6)
					return 0; /* an empty key */
				t->keylen = i - 6;
				t->tok = 1;
				continue;
			}
			if (b <= ' ' || b == 0x7f)
				return 0;
			t->hash = (t->hash ^ b) * MC_FNV_PRIME;
			continue;
		}
		if (t->tok == 3) {
			if (b != '\n')
				return 0;
			t->data = i + 1;
			t->tok = 4;
			break;
		}
		/* flags, then bytes: plain decimal, as memcached prints them */
		if (b >= '0' && b <= '9' && t->digits < 9) {
			if (t->tok == 2)
				t->bytes = t->bytes * 10 + (b - '0');
			t->digits++;
			continue;
		}
		if (t->digits == 0 || b != (t->tok == 1 ? ' ' : '\r'))
			return 0;
		t->digits = 0;
		t->tok++;
	}
	return t->tok == 4 && t->data + t->bytes + 7 == len;
}

/* Whether text (len bytes, at least 20) ends "\r\nEND\r\n". */
static __always_inline int santa_mc_fill_ends(const __u8 *text, __u32 len)
{
	const char end[] = "\r\nEND\r\n";

	for (int i = 0; i < 7; i++)
		if (text[(len - 7 + i) & (SANTA_MC_FRESH_LEN - 1)] != end[i])
			return 0;
	return 1;
}

/* The first frame of memcached's reply (at off, len bytes with its frame
 * header; value: its text starts "VALUE ") to the client and request id of
 * k left: the claim ends, and if it answers a get that may fill, and
 * nothing was written to its slot since, it refills the slot's record. A
 * global function: verified once. */
__noinline int santa_mc_fill_reply(struct __sk_buff *skb, const struct santa_mc_udp_key *k, __u32 off, __u32 len,
				   __u32 value)
{
	struct santa_mc_fill_text t = {};
	struct santa_mc_domain *dom;
	struct santa_mc_fresh *rec;
	struct santa_mc_slot *ks;
	struct santa_mc_fill *w;
	__u32 slot, gen, domain_gen, hash, keylen, s, sum = 0, ok;
	__u8 frame[SANTA_MC_FRAME];

	if (!k)
		return 0;
	w = bpf_map_lookup_elem(&mc_fills, k);
	if (!w)
		return 0;
	slot = w->slot;
	gen = w->gen;
	domain_gen = w->domain_gen;
	hash = w->hash;
	keylen = w->keylen;
	ok = w->fill && value;
	bpf_map_delete_elem(&mc_fills, k);
	/* One frame (sequence 0 of 1) whose text fits a record. */
	len -= SANTA_MC_FRAME;
	if (!ok || len > SANTA_MC_FRESH_LEN || bpf_skb_load_bytes(skb, off, frame, sizeof(frame)) || frame[2] ||
	    frame[3] || frame[4] || frame[5] != 1)
		return 0;
	ks = bpf_map_lookup_elem(&mc_slots, &slot);
	dom = santa_mc_domain_of(k->domain);
	/* Nothing written since the get arrived, nothing in flight: neither
	 * its key's slot nor its whole domain. (Read in the other order than
	 * writers change them, gen before inflight: a write that starts
	 * between them bumps gen past the claim's, whose gen the record
	 * takes.) */
	if (!ks || !dom || *(volatile __u32 *)&ks->gen != gen || *(volatile __u32 *)&ks->inflight ||
	    *(volatile __u32 *)&dom->gen != domain_gen || *(volatile __u32 *)&dom->inflight ||
	    *(volatile __u32 *)&dom->unsynced || *(volatile __u64 *)&dom->hold_until || santa_mc_mortal(dom, slot))
		return 0;
	rec = santa_mc_fresh_of(slot);
	if (!rec)
		return 0;
	s = *(volatile __u32 *)&rec->seq;
	if ((s & 1) || __sync_val_compare_and_swap(&rec->seq, s, s + 1) != s)
		return 0; /* being written */
	santa_barrier();
	/* Inert until filled: a set taking the record meanwhile
	 * (santa_mc_capture) fails its seqlock; its STORED must not find
	 * its own owner here (santa_mc_fresh_ready). */
	rec->ready = 0;
	rec->slot = SANTA_MC_NO_SLOT;
	rec->cookie = 0;
	rec->cmd_seq = 0;
	rec->len = 0;
	__builtin_memset(rec->text, 0, SANTA_MC_FRESH_LEN);
	/* Its text ("VALUE " seen by the caller) is taken as it is, once it
	 * parses as one value of a key of the slot. */
	if (len < 6 || bpf_skb_load_bytes(skb, off + SANTA_MC_FRAME, rec->text, len) ||
	    !santa_mc_fill_parse(rec->text, len, &t) || t.hash != hash || t.keylen != keylen ||
	    santa_mc_slot_of(t.hash, k->domain) != slot || !santa_mc_fill_ends(rec->text, len))
		goto out;
	/* Its native-word sum (santa_mc_capture's): the zeros past it add
	 * nothing. */
	for (int i = 0; i < SANTA_MC_FRESH_LEN; i += 2)
		sum += *(__u16 *)&rec->text[i];
	rec->slot = slot;
	rec->domain = k->domain;
	rec->cookie = 0;
	rec->cmd_seq = 0;
	rec->gen = gen;
	rec->keylen = t.keylen;
	rec->len = len;
	rec->ttl = 0;
	rec->deadline = 0;
	rec->sum = sum;
	rec->ready = 1;
	santa_mc_count(k->domain, SANTA_MC_FILLED);
out:
	santa_barrier();
	*(volatile __u32 *)&rec->seq = s + 2;
	return 0;
}

#endif /* SANTA_MC_FILL_H */
