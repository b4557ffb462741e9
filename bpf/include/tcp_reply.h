/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/* Turning a bounced request (an sk_msg) into its reply. An sk_msg has no
 * store helper: bytes are written directly, a window at a time, into
 * message data made linear by bpf_msg_pull_data. Loops are open-coded
 * iterators, so the verifier checks each body once whatever the reply
 * length (up to SANTA_MAX_TCP_REPLY). */
#ifndef SANTA_TCP_REPLY_H
#define SANTA_TCP_REPLY_H

#include "santa_abi.h"
#include "maps.h"
#include "tcp_maps.h"
#include "iter.h"

/* Copies message bytes [off, off + len) to s, len <= SANTA_SCRATCH_LEN. */
__noinline int santa_msg_read(struct sk_msg_md *msg, __u32 off, struct santa_scratch *s, __u32 len)
{
	__u8 *data;

	if (len == 0 || len > SANTA_SCRATCH_LEN || bpf_msg_pull_data(msg, off, off + len, 0))
		return -1;
	if (!msg || !s)
		return -1;
	data = msg->data;
	if (data + len > (__u8 *)msg->data_end)
		return -1;
	return bpf_probe_read_kernel(s->buf, len, data) ? -1 : 0;
}

/* Copies message bytes [0, len) to s: the request, for matching and for
 * copy processors. One read, not a loop: the message is linear there. */
static __always_inline int santa_msg_load(struct sk_msg_md *msg, struct santa_scratch *s, __u32 len)
{
	return len > SANTA_MAX_TCP_REQUEST ? -1 : santa_msg_read(msg, 0, s, len);
}

/* Overlays w, reply bytes [off, off + len), with the request bytes the
 * rule's copy processors put there. */
__noinline int santa_window_copies(struct santa_window *w, struct santa_rule *rule, struct santa_scratch *s,
				   __u32 off, __u32 len)
{
	int i, k;

	if (!w || !rule || !s)
		return -1;
	santa_for(i, 0, SANTA_MAX_COPIES)
	{
		struct santa_copy *c;
		__u32 lo, hi;

		if (i >= rule->ncopies)
			break;
		c = &rule->copies[i & (SANTA_MAX_COPIES - 1)];
		lo = c->dst > off ? c->dst : off;
		hi = c->dst + c->len < off + len ? c->dst + c->len : off + len;
		santa_for(k, lo, hi)
		{
			__u32 from = (c->src + (k - c->dst)) & (SANTA_SCRATCH_LEN - 1);

			w->buf[(k - off) & (SANTA_REPLY_WINDOW - 1)] = s->buf[from];
		}
	}
	return 0;
}

/* What one step of the store loop writes: 8 stores of 8 bytes. */
#define SANTA_CHUNK_WORDS 8
#define SANTA_CHUNK (SANTA_CHUNK_WORDS * 8)

/* Writes w->buf[0, len) over message bytes [off, off + len), which lie in
 * one scatterlist element: pulling them does not copy. */
__noinline int santa_window_store(struct sk_msg_md *msg, struct santa_window *w, __u32 off, __u32 len)
{
	__u8 *data, *end;
	int i;

	if (!msg || !w || len > SANTA_REPLY_WINDOW || bpf_msg_pull_data(msg, off, off + len, 0))
		return -1;
	data = msg->data;
	end = msg->data_end;
	/* Offsets are masked to the window for the verifier; i < len. A
	 * chunk at a time (one bounds check and one loop step for 64 bytes:
	 * 8 bytes a step cost about 1.3 µs per KiB), then 8 bytes, then
	 * single bytes. */
	santa_for(i, 0, len / SANTA_CHUNK)
	{
		__u32 at = (i * SANTA_CHUNK) & (SANTA_REPLY_WINDOW - SANTA_CHUNK);
		__u64 *p = (__u64 *)(data + at), *q = (__u64 *)&w->buf[at];

		if ((void *)(p + SANTA_CHUNK_WORDS) > (void *)end)
			return -1;
#pragma clang loop unroll(full)
		for (int k = 0; k < SANTA_CHUNK_WORDS; k++)
			p[k] = q[k];
	}
	santa_for(i, len / SANTA_CHUNK * (SANTA_CHUNK / 8), len / 8)
	{
		__u32 at = (i * 8) & (SANTA_REPLY_WINDOW - 8);
		__u64 *p = (__u64 *)(data + at);

		if ((void *)(p + 1) > (void *)end)
			return -1;
		*p = *(__u64 *)&w->buf[at];
	}
	santa_for(i, len & ~7u, len)
	{
		__u32 at = i & (SANTA_REPLY_WINDOW - 1);
		__u8 *p = data + at;

		if (p + 1 > end)
			return -1;
		*p = w->buf[at];
	}
	return 0;
}

/* Writes the rule's reply from byte from on over the message's first bytes,
 * window by window: the template (read with bpf_probe_read_kernel,
 * whichever class's map holds it), the copies over it, then into the
 * message. */
__noinline int santa_msg_write(struct sk_msg_md *msg, struct santa_rule *rule, struct santa_reply_memory *mem,
			       __u32 from)
{
	struct santa_rule *body;
	struct santa_scratch *s;
	struct santa_window *w;
	__u32 cap = 0, to;
	__u8 *tmpl;
	int i;

	if (!msg || !rule || !mem)
		return -1;
	s = &mem->request;
	w = &mem->window;
	to = rule->reply_len;
	/* The same rule, from its class's map: rule may be only its head. */
	body = santa_rule_at(rule->slot, &cap);
	if (!body || to > cap || from >= to)
		return -1;
	tmpl = santa_rule_reply(body);
	santa_for(i, 0, SANTA_MAX_TCP_REPLY / SANTA_REPLY_WINDOW + 1)
	{
		__u32 off = from + i * SANTA_REPLY_WINDOW, len;

		if (off >= to)
			break;
		len = to - off < SANTA_REPLY_WINDOW ? to - off : SANTA_REPLY_WINDOW;
		if (bpf_probe_read_kernel(w->buf, len, tmpl + off) || santa_window_copies(w, rule, s, off, len) ||
		    santa_window_store(msg, w, off - from, len))
			return -1;
	}
	return 0;
}

/*
 * Makes the message, msize bytes of the request (all of it also in s), the
 * rule's reply from byte from on. Returns 1 if the message was left
 * unchanged, -1 if it was changed and is now neither, 0 on success.
 */
static __always_inline int santa_msg_build_reply(struct sk_msg_md *msg, struct santa_rule *rule,
						 struct santa_reply_memory *mem, __u32 from, __u32 msize)
{
	__u32 rlen = rule->reply_len, cap = 0, n;

	if (!santa_rule_at(rule->slot, &cap) || from >= rlen || rlen > cap)
		return 1;
	n = rlen - from;
	/* The reply gets an element of its own in front of the request, whose
	 * elements are then dropped: TCP sends each element with its own
	 * tcp_sendmsg_locked call (with TCP_NODELAY, its own segment), so the
	 * reply leaves as one segment. */
	if (bpf_msg_push_data(msg, 0, n, 0))
		return 1;
	if (bpf_msg_pop_data(msg, n, msize, 0))
		return bpf_msg_pop_data(msg, 0, n, 0) ? -1 : 1;
	return santa_msg_write(msg, rule, mem, from) ? -1 : 0;
}

#endif /* SANTA_TCP_REPLY_H */
