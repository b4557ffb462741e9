/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/*
 * Learning what a service's clients ask (santa_abi.h, "Learning"): the UDP
 * programs count each passed request of a service with learning on by its
 * key, payload[learn_off:], in a count-min sketch of two rows per CPU, and
 * sample the bytes of a key the first time its estimate on a CPU reaches
 * the threshold. User space (internal/datapath/learn.go) flips the epoch
 * once per window, reads the finished epoch's counters of the keys it was
 * given, and zeroes them.
 */
#ifndef SANTA_LEARN_H
#define SANTA_LEARN_H

#include "santa_abi.h"
#include "maps.h"
#include "parse.h"

/* Written by user space: the current epoch, the threshold, the budget. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct santa_learn_config);
} learn_config SEC(".maps");

struct santa_learn_row {
	__u32 cells[SANTA_LEARN_WIDTH];
};

/* The sketch: row r of epoch e under key 2e + r, one per CPU, so that a
 * count is a plain add to a line no other CPU writes. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2 * SANTA_LEARN_ROWS);
	__type(key, __u32);
	__type(value, struct santa_learn_row);
} learn_sketch SEC(".maps");

/* Samples emitted per CPU in each epoch, against the budget. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u32);
} learn_emitted SEC(".maps");

/* Keys whose estimate reached the threshold: each record is a struct
 * santa_learn_sample cut after its key, rounded up to 8 bytes, so that a
 * DNS query's sample takes about 80 bytes of the ring rather than 280. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 16); /* load time: room for two windows' budget of every CPU */
} learn_samples SEC(".maps");

/* Where a sample is put together before it is copied to the ring: the
 * ring's reservations have a constant size, its copies do not. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct santa_learn_sample);
} learn_sample_buf SEC(".maps");

/* Set at load from a random source, so that no client can aim requests
 * at the counters of another's key. */
volatile const __u64 santa_learn_seed = 0;

#define SANTA_LEARN_MUL 0x9e3779b97f4a7c15ull

/* The key's two cells: a multiply-xorshift over its 8-byte words (the last
 * masked to the key's length, as the scratch holds older bytes after it),
 * seeded with the service's learn id and the length, then finalized as
 * MurmurHash3's fmix64 does. */
static __always_inline __u64 santa_learn_hash(struct santa_scratch *s, __u32 learn, __u32 off, __u32 len)
{
	__u64 h = santa_learn_seed ^ ((((__u64)learn << 32) | len) * SANTA_LEARN_MUL);

	off &= SANTA_LEARN_MAX_OFF;
	for (__u32 at = 0; at < SANTA_LEARN_MAX_KEY; at += 8) {
		__u64 w;

		if (at >= len)
			break;
		w = *(__u64 *)&s->buf[off + at];
		if (len - at < 8)
			w &= (1ull << ((len - at) * 8)) - 1;
		h = (h ^ w) * SANTA_LEARN_MUL;
		h ^= h >> 29;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

/* Puts the key on the ring, within this CPU's budget for the epoch: a
 * record of the sample's header and its key's 8-byte words. */
static __always_inline void santa_learn_sample(struct santa_scratch *s, struct santa_learn_config *cfg, __u32 epoch,
					       __u32 learn, __u32 c0, __u32 c1, __u32 off, __u32 len)
{
	struct santa_learn_sample *smp;
	__u32 zero = 0, size;
	__u32 *emitted = bpf_map_lookup_elem(&learn_emitted, &epoch);

	if (!emitted || *emitted >= cfg->budget)
		return;
	smp = bpf_map_lookup_elem(&learn_sample_buf, &zero);
	if (!smp)
		return;
	*emitted += 1;
	smp->learn = learn;
	smp->cells[0] = c0;
	smp->cells[1] = c1;
	smp->len = len;
	smp->epoch = epoch;
	smp->pad = 0;
	off &= SANTA_LEARN_MAX_OFF;
	for (__u32 at = 0; at < SANTA_LEARN_MAX_KEY; at += 8) {
		if (at >= len)
			break;
		*(__u64 *)&smp->key[at] = *(__u64 *)&s->buf[off + at];
	}
	size = __builtin_offsetof(struct santa_learn_sample, key) + ((len + 7) & ~7u);
	if (size > sizeof(*smp))
		return;
	/* A full ring drops the sample: the budget is spent all the same. */
	bpf_ringbuf_output(&learn_samples, smp, size, 0);
}

/* Counts the key payload[off, off + len) in s for the service learning
 * under learn. The estimate (the smaller of its two cells) grows by one
 * with each count, so it reaches the threshold exactly once per epoch: a
 * key is sampled at most once per CPU and epoch. A global function: the
 * verifier checks it once. */
__noinline int santa_learn_count(struct santa_scratch *s, __u32 learn, __u32 off, __u32 len)
{
	struct santa_learn_row *row0, *row1;
	struct santa_learn_config *cfg;
	__u32 zero = 0, epoch, key, c0, c1, n0, n1;
	__u64 h;

	if (!s || len == 0 || len > SANTA_LEARN_MAX_KEY)
		return 0;
	cfg = bpf_map_lookup_elem(&learn_config, &zero);
	if (!cfg)
		return 0;
	epoch = cfg->epoch & 1;
	key = epoch * SANTA_LEARN_ROWS;
	row0 = bpf_map_lookup_elem(&learn_sketch, &key);
	key++;
	row1 = bpf_map_lookup_elem(&learn_sketch, &key);
	if (!row0 || !row1)
		return 0;
	h = santa_learn_hash(s, learn, off, len);
	c0 = h & (SANTA_LEARN_WIDTH - 1);
	c1 = (h >> 32) & (SANTA_LEARN_WIDTH - 1);
	n0 = ++row0->cells[c0];
	n1 = ++row1->cells[c1];
	if ((n0 < n1 ? n0 : n1) == cfg->threshold)
		santa_learn_sample(s, cfg, epoch, learn, c0, c1, off, len);
	return 0;
}

/* The request's UDP source port, in network order. */
static __always_inline __be16 santa_sport(const struct santa_pkt *pkt)
{
	return pkt->ipv6 ? pkt->tuple.ipv6.sport : pkt->tuple.ipv4.sport;
}

/* Whether the request comes from the port the service's manager probes
 * from: such a request always reaches the application. */
static __always_inline int santa_is_probe(const struct santa_service *svc, const struct santa_pkt *pkt)
{
	return svc->probe_port && santa_sport(pkt) == svc->probe_port;
}

/* Counts a request that no rule answered, read into s, if its service
 * learns: a service that does not pays this one test. Probes and keys
 * that are empty or longer than SANTA_LEARN_MAX_KEY are not counted. */
static __always_inline void santa_learn(const struct santa_service *svc, const struct santa_pkt *pkt,
					struct santa_scratch *s)
{
	__u32 off = svc->learn_off;

	if (!svc->learn || santa_is_probe(svc, pkt))
		return;
	if (off >= pkt->plen || pkt->plen - off > SANTA_LEARN_MAX_KEY || off > SANTA_LEARN_MAX_OFF)
		return;
	santa_learn_count(s, svc->learn, off, pkt->plen - off);
}

#endif /* SANTA_LEARN_H */
