/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/* memcached invalidation on TCP (mc_inval.h): the verdict parses every
 * segment of a memcached connection, the reply program every message
 * memcached sends on it. */
#ifndef SANTA_MC_TCP_H
#define SANTA_MC_TCP_H

#include "mc_inval.h"
#include "mc_capture.h"
#include "tcp_maps.h"
#include "tcp_reply.h"

#define SANTA_MC_SEGMENT_CHUNKS 64 /* 128 KiB of lines in one segment or message; more is lost sync */

/* Parses a segment (reply 0: ctx is the verdict's skb) or a message (1:
 * the reply program's msg) of mc's streams, len bytes: value data skipped
 * unread, the rest read MC_CHUNK bytes at a time into buf. Returns -1 if
 * sync is lost. reply is a constant at each call: each program keeps one
 * branch and calls only its own helpers. */
static __always_inline int santa_mc_stream(void *ctx, int reply, struct santa_mc_conn *mc, __u64 cookie,
					   struct santa_scratch *buf, struct santa_mc_sets *sets, __u32 len)
{
	struct santa_mc_user user = { .conn = mc, .domain = mc->domain, .sets = sets };
	__u32 off = 0;
	int k;

	user.cur.cookie = cookie;
	if (sets)
		sets->n = 0;
	user.cur.start = !reply && mc_req_idle(&mc->req) ? 0 : -1;

	santa_for(k, 0, SANTA_MC_SEGMENT_CHUNKS)
	{
		__u32 n;

		off += reply ? mc_rep_skip(&mc->rep, len - off) : mc_req_skip(&mc->req, len - off);
		if (off >= len)
			break;
		n = len - off < MC_CHUNK ? len - off : MC_CHUNK;
		if (n == 0) /* for the verifier: off < len */
			break;
		user.cur.base = off;
		if (reply ? santa_msg_read(ctx, off, buf, n) || mc_rep_parse(&mc->rep, buf->buf, n, mc->req.mn_mark, &user)
			  : bpf_skb_load_bytes(ctx, off, buf->buf, n) || mc_req_parse(&mc->req, buf->buf, n, &user))
			return -1;
		off += n;
	}
	/* The segment's sets whole in it may have their values taken: the
	 * buffer is free now. */
	if (!reply && sets) {
		for (int i = 0; i < SANTA_MC_SETS; i++) {
			if (i >= sets->n)
				break;
			santa_mc_capture(ctx, &sets->set[i], buf);
		}
	}
	return off < len ? -1 : 0;
}

/* A segment of a memcached connection: parsed, before anything else of
 * the verdict and before the socket's receive queue, in every state of
 * the connection, into a request buffer of the verdict's. Returns -1 if
 * the connection has no state. A function of its own (static: verified
 * with its callers' pointers), so that its stack is not the verdict's,
 * whose matching needs its own. */
static __noinline int santa_mc_parse_segment(struct __sk_buff *skb, __u64 cookie)
{
	struct santa_verdict_buffer *buf;
	struct santa_mc_conn *mc;

	mc = bpf_map_lookup_elem(&mc_conns, &cookie);
	if (!mc)
		return -1;
	if (mc->flags & SANTA_MC_CONN_LOST)
		return 0;
	buf = santa_take_verdict_buffer();
	if (!buf) {
		santa_mc_conn_lose(mc);
		return 0;
	}
	if (santa_mc_stream(skb, 0, mc, cookie, &buf->request, &buf->sets, skb->len))
		santa_mc_conn_lose(mc);
	santa_give(&buf->busy);
	return 0;
}

/* The verdict's part: the segment parsed; a connection without state is
 * one from before its service was a memcached one's: what was said on it
 * before is not known, so it is lost from the start. Its state takes a
 * place of the connection's owner; without one it has none. */
static __always_inline void santa_mc_request(struct __sk_buff *skb, struct santa_conn *conn, __u32 domain,
					     __u64 cookie)
{
	__u32 owner = conn->owner;

	if (santa_mc_parse_segment(skb, cookie) == 0)
		return;
	__sync_fetch_and_or(&conn->flags, SANTA_CONN_MC);
	if (!santa_place_take(owner, 1))
		santa_mc_conn_untracked(domain);
	else if (santa_mc_conn_start(cookie, domain, 1, owner))
		santa_place_give(owner, 1);
}

/* santa_mc_release, and the place the state held given back. */
static __always_inline void santa_tcp_mc_release(__u64 cookie)
{
	__u32 owner;

	if (santa_mc_release(cookie, &owner))
		santa_place_give(owner, 1);
}

/* A message memcached sends on a memcached connection: its replies are
 * parsed, and the writes they answer are done, before it leaves. buf is
 * the reply program's memory, NULL if it was taken. */
static __noinline void santa_mc_reply(struct sk_msg_md *msg, __u64 cookie, struct santa_scratch *buf)
{
	struct santa_mc_conn *mc;

	mc = bpf_map_lookup_elem(&mc_conns, &cookie);
	if (!mc || (mc->flags & SANTA_MC_CONN_LOST))
		return;
	if (!buf || santa_mc_stream(msg, 1, mc, cookie, buf, NULL, msg->size))
		santa_mc_conn_lose(mc);
	else
		santa_mc_complete(mc);
}

#endif /* SANTA_MC_TCP_H */
