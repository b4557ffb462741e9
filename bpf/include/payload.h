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
 * if its guard (if any) lets it. */
static __always_inline struct santa_rule *santa_answering_rule(struct santa_scratch *s, struct santa_service *svc,
							       __u32 plen)
{
	struct santa_rule *rule = santa_match(s, svc, plen);

	if (!rule || rule->reply_len == 0 || rule->reply_len > SANTA_MAX_UDP_REPLY || !santa_guard_ok(rule))
		return NULL;
	return rule;
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

/* Writes the reply payload over the (already resized) packet: the template,
 * then the copy pieces from the request in s. */
static __always_inline int santa_store_payload(void *ctx, int xdp, const struct santa_pkt *pkt,
					       struct santa_rule *rule, struct santa_scratch *s)
{
	if (santa_store_template(ctx, xdp, pkt->payload_off, rule->slot, rule->reply_len))
		return -1;
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

#endif /* SANTA_PAYLOAD_H */
