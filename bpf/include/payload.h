/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/* The UDP payloads, for XDP and TC alike: the request's read in and
 * matched, the reply's written out over it. The two hooks differ only in
 * the helpers that read and write packet bytes; `xdp` is a constant at
 * every call site, so after inlining each program keeps one branch and
 * calls only its own. */
#ifndef SANTA_PAYLOAD_H
#define SANTA_PAYLOAD_H

#include "santa_abi.h"
#include "maps.h"
#include "match.h"
#include "parse.h"
#include "guard.h"
#include "reply.h"

static __always_inline long santa_load(void *ctx, int xdp, __u32 off, void *to, __u32 len)
{
	return xdp ? bpf_xdp_load_bytes(ctx, off, to, len) : bpf_skb_load_bytes(ctx, off, to, len);
}

static __always_inline long santa_store(void *ctx, int xdp, __u32 off, void *from, __u32 len)
{
	return xdp ? bpf_xdp_store_bytes(ctx, off, from, len) : bpf_skb_store_bytes(ctx, off, from, len, 0);
}

/* Copies the request's payload to s, where matching, learning and copy
 * processors read it. Returns whether it did. */
static __always_inline int santa_read_payload(void *ctx, int xdp, const struct santa_pkt *pkt, struct santa_scratch *s)
{
	return s && pkt->plen != 0 && pkt->plen <= SANTA_MAX_UDP_REQUEST &&
	       !santa_load(ctx, xdp, pkt->payload_off, s->buf, pkt->plen);
}

/* The rule that answers the request read into s, or NULL: the best match,
 * if its guard (if any) lets it. fresh->len is 0 if the rule answers with
 * its own reply; otherwise it answers with the value of a set of its key,
 * as read into fresh (mc_fresh.h). */
static __always_inline struct santa_rule *santa_answering_rule(struct santa_scratch *s, struct santa_service *svc,
							       __u32 plen, struct santa_fresh_read *fresh)
{
	struct santa_rule *rule = santa_match(s, svc, plen);

	fresh->len = 0;
	fresh->fill = 0;
	if (!rule || rule->reply_len == 0 || rule->reply_len > SANTA_MAX_UDP_REPLY)
		return NULL;
	/* Only SANTA_GUARD_SET sets fresh->len. */
	if (!(rule->flags & SANTA_RULE_GUARDED) || santa_guard_check(rule->slot, fresh) != SANTA_GUARD_REFUSED)
		return rule;
	return NULL;
}

/* The reply payload's length. */
static __always_inline __u32 santa_answer_len(const struct santa_rule *rule, const struct santa_fresh_read *fresh)
{
	return fresh->len ? SANTA_MC_FRAME + fresh->len : rule->reply_len;
}

/* memcached's frame header's sum (sequence 0, 1 datagram, reserved 0; the
 * request id is copied), in native 16-bit words: santad lets only rules
 * whose template has it take a set's value. */
#define SANTA_MC_FRAME_SUM 0x0100

/* The finished reply payload's partial sum. */
static __always_inline __u64 santa_answer_sum(const struct santa_rule *rule, struct santa_scratch *s,
					      const struct santa_fresh_read *fresh)
{
	if (fresh->len)
		return SANTA_MC_FRAME_SUM + santa_sum_copies(rule, s) + fresh->sum;
	return santa_reply_sum(rule, s);
}

/* Stores the reply template of the rule in slot at off. The rule is looked
 * up again in its class's map: only that map's value type tells the
 * verifier how long the template may be. It is the element matching just
 * read, so the lookup hits the cache. */
static __always_inline long santa_store_template(void *ctx, int xdp, __u32 off, __u32 slot, __u32 len)
{
	struct santa_rule *rule;
	__u32 cap;

	rule = santa_rule_at(slot, &cap);
	if (!rule || len == 0 || len > cap)
		return -1;
	return santa_store(ctx, xdp, off, santa_rule_reply(rule), len);
}

/* Writes the rule's copy pieces from the request in s over the reply. */
static __always_inline int santa_store_copies(void *ctx, int xdp, const struct santa_pkt *pkt,
					      struct santa_rule *rule, struct santa_scratch *s)
{
	for (int i = 0; i < SANTA_MAX_COPIES; i++) {
		struct santa_copy *c = &rule->copies[i];
		__u32 src = c->src & (SANTA_MAX_COND_END - 1), len = c->len;

		if (i >= rule->ncopies)
			break;
		if (len == 0 || len > SANTA_MAX_COPY_LEN ||
		    santa_store(ctx, xdp, pkt->payload_off + c->dst, &s->buf[src], len))
			return -1;
	}
	return 0;
}

#define SANTA_STORE_TORN -2 /* a set's value changed while it was copied */

/* Writes a reply with a set's value (santa_answering_rule): the template's
 * frame header and the copies into it, then the value's text, which must
 * not have changed meanwhile. */
static __always_inline int santa_store_fresh(void *ctx, int xdp, const struct santa_pkt *pkt,
					     struct santa_rule *rule, struct santa_scratch *s,
					     const struct santa_fresh_read *fresh)
{
	struct santa_mc_fresh *rec = santa_mc_fresh_of(fresh->slot);
	__u32 len = fresh->len;

	if (!rec || len == 0 || len > SANTA_MC_FRESH_LEN ||
	    santa_store_template(ctx, xdp, pkt->payload_off, rule->slot, SANTA_MC_FRAME) ||
	    santa_store_copies(ctx, xdp, pkt, rule, s) ||
	    santa_store(ctx, xdp, pkt->payload_off + SANTA_MC_FRAME, rec->text, len))
		return -1;
	return santa_mc_fresh_unchanged(fresh) ? 0 : SANTA_STORE_TORN;
}

/* Writes the reply payload over the (already resized) packet: the template,
 * then the copy pieces from the request in s; or a set's value. Returns 0,
 * -1, or SANTA_STORE_TORN (counted for the service's domain). */
static __always_inline int santa_store_payload(void *ctx, int xdp, const struct santa_pkt *pkt,
					       struct santa_rule *rule, struct santa_scratch *s,
					       const struct santa_service *svc, const struct santa_fresh_read *fresh)
{
	int err;

	if (fresh->len) {
		err = santa_store_fresh(ctx, xdp, pkt, rule, s, fresh);
		if (err == SANTA_STORE_TORN)
			santa_mc_count(svc->mc_domain, SANTA_MC_FRESH_TORN);
		return err;
	}
	if (santa_store_template(ctx, xdp, pkt->payload_off, rule->slot, rule->reply_len))
		return -1;
	return santa_store_copies(ctx, xdp, pkt, rule, s);
}

#endif /* SANTA_PAYLOAD_H */
