// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * mc_parse: runs the data plane's memcached parsers (bpf/include/mc_request.h,
 * mc_reply.h) on the segment it is run on (BPF_PROG_TEST_RUN), the way the
 * data plane does: value data skipped unread, the rest read MC_CHUNK bytes
 * at a time into a per-CPU buffer. The frame is one direction byte
 * (MC_TEST_REQUEST or MC_TEST_REPLY), the segment's length (2 bytes,
 * little-endian), the segment, and padding up to the 14 bytes a test run
 * takes at least. The parsers' states
 * live in req_state and rep_state across runs; the events of a run are in
 * out. Returns 1 if sync is lost, 0 if not, 2 if the frame is malformed.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "mc_request.h"
#include "mc_reply.h"

#define MC_TEST_REQUEST 0
#define MC_TEST_REPLY 1
#define MC_OUT_MAX 1024 /* events of one run: a run carries fewer than 4096 bytes, 4 or more a command */
#define MC_TEST_CHUNKS 8 /* parse calls of one run: more than a run's bytes need */

struct mc_chunk {
	__u8 buf[MC_CHUNK];
};

struct mc_out {
	__u32 n;        /* events recorded */
	__u32 overflow; /* events beyond MC_OUT_MAX, not recorded */
	struct mc_event ev[MC_OUT_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mc_req_state);
} req_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mc_rep_state);
} rep_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mc_chunk);
} chunk SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mc_out);
} out SEC(".maps");

/* What mc_event gets as user: where to record, and the chunk's offset in
 * the segment, so that events count from the segment's start. */
struct mc_test_user {
	struct mc_out *out;
	__u32 base;
};

static void mc_event(void *user, const struct mc_event *ev)
{
	struct mc_test_user *u = user;
	struct mc_out *o = u->out;
	__u32 n = o->n;

	if (n >= MC_OUT_MAX) {
		o->overflow++;
		return;
	}
	o->ev[n] = *ev;
	o->ev[n].off += u->base;
	o->n = n + 1;
}

SEC("xdp")
int mc_parse(struct xdp_md *ctx)
{
	__u32 zero = 0, end, off = 3;
	struct mc_test_user user = {};
	struct mc_req_state *req;
	struct mc_rep_state *rep;
	struct mc_chunk *c;
	__u8 head[3];
	__u16 seglen;
	int lost = 0;

	req = bpf_map_lookup_elem(&req_state, &zero);
	rep = bpf_map_lookup_elem(&rep_state, &zero);
	c = bpf_map_lookup_elem(&chunk, &zero);
	user.out = bpf_map_lookup_elem(&out, &zero);
	if (!req || !rep || !c || !user.out || bpf_xdp_load_bytes(ctx, 0, head, 3) || head[0] > MC_TEST_REPLY)
		return 2;
	seglen = head[1] | (__u16)head[2] << 8;
	end = off + seglen;
	if (end > ctx->data_end - ctx->data)
		return 2;
	for (int k = 0; k < MC_TEST_CHUNKS && off < end && !lost; k++) {
		__u32 len;

		off += head[0] == MC_TEST_REQUEST ? mc_req_skip(req, end - off) : mc_rep_skip(rep, end - off);
		len = end - off < MC_CHUNK ? end - off : MC_CHUNK;
		if (len == 0)
			break;
		if (bpf_xdp_load_bytes(ctx, off, c->buf, len))
			return 2;
		user.base = off - 3;
		if (head[0] == MC_TEST_REQUEST)
			lost = mc_req_parse(req, c->buf, len, &user);
		else
			lost = mc_rep_parse(rep, c->buf, len, req->mn_mark, &user);
		off += len;
	}
	if (!lost && off < end)
		return 2;
	return lost ? 1 : 0;
}

/* Keep the enums in BTF, so bpf2go generates their Go constants. */
const enum mc_event_type *unused_mc_event_type __attribute__((unused));
const enum mc_cmd *unused_mc_cmd __attribute__((unused));
const enum mc_reply *unused_mc_reply __attribute__((unused));
const enum mc_family *unused_mc_family __attribute__((unused));
const enum mc_lost *unused_mc_lost __attribute__((unused));
const enum mc_cmd_flag *unused_mc_cmd_flag __attribute__((unused));

char LICENSE[] SEC("license") = "Dual BSD/GPL";
