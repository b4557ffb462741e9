/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/*
 * Learning what a service's clients ask (santa_abi.h, "Learning"): the UDP
 * programs count each passed request of a service with learning on by its
 * key, payload[learn_off:], exactly: a key user space watches in
 * learn_passes, at its slot in learn_watch; any other in an LRU
 * hash, by window, where its count brings a sample of its bytes when it
 * reaches the threshold.
 * User space (internal/datapath/learn.go) watches the sampled keys, reads
 * their counts once per window and starts the next window, which renews
 * each CPU's sample budget.
 */
#ifndef SANTA_LEARN_H
#define SANTA_LEARN_H

#include "santa_abi.h"
#include "maps.h"
#include "parse.h"

/* Written by user space: the window, the threshold, the budget. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct santa_learn_config);
} learn_config SEC(".maps");

/* The keys user space watches, by hash: each one's slot in
 * learn_passes. User space adds and removes them. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SANTA_DEFAULT_LEARN_WATCH);
	__type(key, __u64);
	__type(value, __u32);
} learn_watch SEC(".maps");

/* The watched keys' passes, by slot: user space maps the array and reads
 * it whole once per window, with no syscall and no walk of a hash (a
 * batch lookup of learn_watch's 2^17 buckets took 1.6 % of the server
 * core at 1M names). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SANTA_DEFAULT_LEARN_WATCH);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, __u64);
} learn_passes SEC(".maps");

/* The passes of the other keys in the window they last passed in, by
 * hash, until they bring a sample. An LRU, so that a flood of keys seen
 * once evicts the keys not seen for longest, never the busy ones; one
 * list for every CPU (not BPF_F_NO_COMMON_LRU, which would give a CPU
 * that receives all the traffic a share of the entries only). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SANTA_DEFAULT_LEARN_ENTRIES); /* load time: the learn_entries option */
	__type(key, __u64);
	__type(value, struct santa_learn_entry);
} learn_counts SEC(".maps");

/* Each CPU's samples and counts in the window it last learned in: under
 * overload, counting every passed request would cost the server core
 * most when it has least to spare, so a CPU counts at most
 * learn_config.counts a window and user space scales the counts up by
 * passed / counted. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct santa_learn_cpu);
} learn_cpu SEC(".maps");

/* Keys whose count reached the threshold: each record is a
 * struct santa_learn_sample cut after its key, rounded up to 8 bytes, so
 * that a DNS query's sample takes about 80 bytes of the ring rather than
 * 280. */
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

/* The key's 8-byte word at `at` (< len), the last masked to the key's
 * length: the scratch holds older bytes after the key, an earlier
 * request's, perhaps another service's. off is already bounded. */
static __always_inline __u64 santa_learn_word(struct santa_scratch *s, __u32 off, __u32 at, __u32 len)
{
	__u64 w = *(__u64 *)&s->buf[off + at];

	if (len - at < 8)
		w &= (1ull << ((len - at) * 8)) - 1;
	return w;
}

/* The key's two cells: a multiply-xorshift over its 8-byte words, seeded
 * with the service's learn id and the length, then finalized as
 * MurmurHash3's fmix64 does. */
static __always_inline __u64 santa_learn_hash(struct santa_scratch *s, __u32 learn, __u32 off, __u32 len)
{
	__u64 h = santa_learn_seed ^ ((((__u64)learn << 32) | len) * SANTA_LEARN_MUL);

	off &= SANTA_LEARN_MAX_OFF;
	for (__u32 at = 0; at < SANTA_LEARN_MAX_KEY; at += 8) {
		if (at >= len)
			break;
		h = (h ^ santa_learn_word(s, off, at, len)) * SANTA_LEARN_MUL;
		h ^= h >> 29;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

/* Puts the key on the ring, within this CPU's budget for the window: a
 * record of the sample's header and its key's 8-byte words. */
static __always_inline void santa_learn_sample(struct santa_scratch *s, const struct santa_learn_config *cfg,
					       struct santa_learn_cpu *cpu, __u32 learn, __u64 hash, __u32 passes,
					       __u32 off, __u32 len)
{
	struct santa_learn_sample *smp;
	__u32 zero = 0, size;

	if (cpu->samples >= cfg->budget)
		return;
	smp = bpf_map_lookup_elem(&learn_sample_buf, &zero);
	if (!smp)
		return;
	cpu->samples++;
	smp->hash = hash;
	smp->passes = passes;
	smp->learn = learn;
	smp->len = len;
	smp->pad = 0;
	smp->pad2 = 0;
	off &= SANTA_LEARN_MAX_OFF;
	for (__u32 at = 0; at < SANTA_LEARN_MAX_KEY; at += 8) {
		if (at >= len)
			break;
		*(__u64 *)&smp->key[at] = santa_learn_word(s, off, at, len);
	}
	size = __builtin_offsetof(struct santa_learn_sample, key) + ((len + 7) & ~7u);
	if (size > sizeof(*smp))
		return;
	/* A full ring drops the sample: the budget is spent all the same. */
	bpf_ringbuf_output(&learn_samples, smp, size, 0);
}

/* This CPU's learning in cfg's window, started anew if it last learned
 * in another. */
static __always_inline struct santa_learn_cpu *santa_learn_cpu(const struct santa_learn_config *cfg)
{
	__u32 zero = 0;
	struct santa_learn_cpu *cpu = bpf_map_lookup_elem(&learn_cpu, &zero);

	if (cpu && cpu->window != cfg->window) {
		cpu->window = cfg->window;
		cpu->samples = 0;
		cpu->passed = 0;
		cpu->counted = 0;
	}
	return cpu;
}

/* Counts the key payload[off, off + len) in s for the service learning
 * under learn. A global function: the verifier checks it once. */
__noinline int santa_learn_count(struct santa_scratch *s, __u32 learn, __u32 off, __u32 len)
{
	struct santa_learn_config *cfg;
	struct santa_learn_cpu *cpu;
	struct santa_learn_entry *count, first;
	__u64 h, *watched;
	__u32 *slot;
	__u32 zero = 0;

	if (!s || len == 0 || len > SANTA_LEARN_MAX_KEY)
		return 0;
	cfg = bpf_map_lookup_elem(&learn_config, &zero);
	if (!cfg)
		return 0;
	cpu = santa_learn_cpu(cfg);
	if (!cpu)
		return 0;
	cpu->passed++;
	if (cpu->counted >= cfg->counts)
		return 0;
	cpu->counted++;
	h = santa_learn_hash(s, learn, off, len);
	slot = bpf_map_lookup_elem(&learn_watch, &h);
	if (slot) {
		watched = bpf_map_lookup_elem(&learn_passes, slot);
		if (watched)
			__sync_fetch_and_add(watched, 1);
		return 0;
	}
	first.passes = 1;
	first.window = cfg->window;
	count = bpf_map_lookup_elem(&learn_counts, &h);
	if (count) {
		/* A count is the window's: a key is sampled when it passes
		 * threshold times in one window, whatever it did before. Two
		 * CPUs may both start it anew: a pass is lost. */
		if (count->window != cfg->window) {
			count->window = cfg->window;
			count->passes = 0;
		}
		first.passes = __sync_fetch_and_add(&count->passes, 1) + 1;
	} else if (bpf_map_update_elem(&learn_counts, &h, &first, BPF_NOEXIST) != 0) {
		return 0; /* another CPU added it first: this pass is not counted */
	}
	if (first.passes == cfg->threshold)
		santa_learn_sample(s, cfg, cpu, learn, h, first.passes, off, len);
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
