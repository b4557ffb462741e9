// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * The benchmark's load generator and reply counter (bench/gen).
 *
 * gen_send runs under BPF_PROG_TEST_RUN with BPF_F_TEST_XDP_LIVE_FRAMES: the
 * kernel runs it `repeat` times on frames of its own and transmits every
 * frame it returns XDP_TX for, out of the interface named in the context. Each
 * run writes the next request of a popularity sequence over the frame: a
 * whole, precomputed frame (headers and checksums included), so a request
 * costs one map lookup and one copy, and no syscall.
 *
 * gen_count is attached to the same interface. It counts the replies
 * (UDP to the generator's source port), optionally checks each against the
 * set of expected reply payloads, and drops them: they never reach the
 * stack. It also makes the interface accept XDP_TX frames from its veth peer.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define GEN_MAX_FRAME 256     /* request frames: headers and payload */
#define GEN_MAX_REPLY 1472    /* reply payloads hashed for the check */
#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define FNV_OFFSET 2166136261u
#define FNV_PRIME 16777619u

struct gen_frame {
	__u32 len;
	__u8 data[GEN_MAX_FRAME];
};

/* Requests by index: set by user space before sending. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* load time: the number of requests */
	__type(key, __u32);
	__type(value, struct gen_frame);
} requests SEC(".maps");

/* The order requests are sent in (indices into requests), drawn from the
 * popularity distribution by user space and cycled. Its length is a power of
 * two: gen_seq_mask + 1. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* load time */
	__type(key, __u32);
	__type(value, __u32);
} sequence SEC(".maps");

volatile const __u32 gen_seq_mask = 0;
volatile const __u16 gen_reply_port = 0; /* network order: the requests' source port */
volatile const __u8 gen_check = 0;       /* compare replies with expected */

enum gen_counter {
	GEN_SENT = 0,     /* frames handed to XDP_TX */
	GEN_SEND_ERROR,   /* a request could not be written */
	GEN_REPLIES,      /* replies received */
	GEN_REPLY_BYTES,  /* their UDP payload bytes */
	GEN_REPLY_OK,     /* replies whose payload is an expected one */
	GEN_REPLY_BAD,    /* replies whose payload is not */
	GEN_NCOUNTERS,
};

struct gen_counters {
	__u64 n[GEN_NCOUNTERS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_counters);
} counters SEC(".maps");

/* The sender: where it is in the sequence, and when its next request is
 * due if sending is paced. One for all CPUs: a sending thread the
 * scheduler moves between test runs keeps its place and its pace (a cursor
 * per CPU let each CPU burst to catch up on its own). Only one thread
 * sends at a time (Generator.Run). */
struct gen_cursor {
	__u32 pos;
	__u32 pad;
	__u64 due_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_cursor);
} cursor SEC(".maps");

/* Pacing, set by user space between test runs: a request every interval_ns
 * (0: as fast as the CPU goes). A run that is not due drops its frame, so
 * one long test run paces itself: short runs would each pay the kernel's
 * setup of a page pool, which grows with the pools still draining. */
struct gen_pace {
	__u64 interval_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_pace);
} pace SEC(".maps");

/* How far a paced sender may fall behind before it forgets the debt: it
 * then sends at most this many requests back to back to catch up. */
#define GEN_MAX_BURST 32

/* FNV-1a 32 of every expected reply payload (gen_check). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1); /* load time */
	__type(key, __u32);
	__type(value, __u8);
} expected SEC(".maps");

struct gen_scratch {
	__u8 buf[GEN_MAX_REPLY];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_scratch);
} scratch SEC(".maps");

static __always_inline struct gen_counters *gen_counters(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&counters, &zero);
}

SEC("xdp")
int gen_send(struct xdp_md *ctx)
{
	struct gen_counters *c = gen_counters();
	struct gen_cursor *cur;
	struct gen_pace *p;
	struct gen_frame *f;
	__u32 zero = 0, *idx, at, len;

	if (!c)
		return XDP_DROP;
	cur = bpf_map_lookup_elem(&cursor, &zero);
	p = bpf_map_lookup_elem(&pace, &zero);
	if (!cur || !p)
		return XDP_DROP;
	if (p->interval_ns) {
		__u64 now = bpf_ktime_get_ns(), late = GEN_MAX_BURST * p->interval_ns;

		if (now < cur->due_ns)
			return XDP_DROP; /* not due: no request this run */
		cur->due_ns = (now - cur->due_ns > late ? now - late : cur->due_ns) + p->interval_ns;
	}
	at = cur->pos & gen_seq_mask;
	cur->pos += 1;
	idx = bpf_map_lookup_elem(&sequence, &at);
	if (!idx)
		goto fail;
	f = bpf_map_lookup_elem(&requests, idx);
	if (!f)
		goto fail;
	len = f->len;
	if (len < 14 || len > GEN_MAX_FRAME)
		goto fail;
	/* The page may hold the previous request: set the length first. */
	if (bpf_xdp_adjust_tail(ctx, (int)len - (int)bpf_xdp_get_buff_len(ctx)))
		goto fail;
	if (bpf_xdp_store_bytes(ctx, 0, f->data, len))
		goto fail;
	c->n[GEN_SENT] += 1;
	return XDP_TX;
fail:
	c->n[GEN_SEND_ERROR] += 1;
	return XDP_DROP;
}

/* FNV-1a over the first len bytes of s. A global function: verified once. */
__noinline __u32 gen_fnv(struct gen_scratch *s, __u32 len)
{
	__u32 h = FNV_OFFSET;

	if (!s)
		return h;
	for (__u32 i = 0; i < GEN_MAX_REPLY; i++) {
		if (i >= len)
			break;
		h = (h ^ s->buf[i]) * FNV_PRIME;
	}
	return h;
}

SEC("xdp")
int gen_count(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct gen_counters *c;
	struct gen_scratch *s;
	struct udphdr *udp;
	__u32 zero = 0, off, plen;

	if ((void *)(eth + 1) > data_end)
		return XDP_PASS;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);

		if ((void *)(ip + 1) > data_end || ip->ihl != 5 || ip->protocol != IPPROTO_UDP)
			return XDP_PASS;
		udp = (void *)(ip + 1);
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);

		if ((void *)(ip6 + 1) > data_end || ip6->nexthdr != IPPROTO_UDP)
			return XDP_PASS;
		udp = (void *)(ip6 + 1);
	} else {
		return XDP_PASS;
	}
	if ((void *)(udp + 1) > data_end || udp->dest != gen_reply_port)
		return XDP_PASS;
	c = gen_counters();
	if (!c || bpf_ntohs(udp->len) < sizeof(*udp))
		return XDP_PASS;
	plen = bpf_ntohs(udp->len) - sizeof(*udp);
	c->n[GEN_REPLIES] += 1;
	c->n[GEN_REPLY_BYTES] += plen;
	if (!gen_check)
		return XDP_DROP;
	off = (void *)(udp + 1) - data;
	s = bpf_map_lookup_elem(&scratch, &zero);
	if (s && plen > 0 && plen <= GEN_MAX_REPLY && !bpf_xdp_load_bytes(ctx, off, s->buf, plen)) {
		__u32 h = gen_fnv(s, plen);

		if (bpf_map_lookup_elem(&expected, &h)) {
			c->n[GEN_REPLY_OK] += 1;
			return XDP_DROP;
		}
	}
	c->n[GEN_REPLY_BAD] += 1;
	return XDP_DROP;
}

/* Keep the counter enum in BTF, so bpf2go generates its Go constants. */
const enum gen_counter *unused_gen_counter __attribute__((unused));

char LICENSE[] SEC("license") = "Dual BSD/GPL";
