// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * memlat: what one dependent random access to a BPF array costs on
 * this machine (bench/memlat). Each cache line of `lines` names the next
 * one to read, along a random cycle user space lays out; a run follows
 * MEMLAT_STEPS of them, and the next run goes on from where it stopped, so
 * no run finds the lines its predecessor brought into the cache.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#define MEMLAT_STEPS 1000

struct memlat_line {
	__u32 next;
	__u32 pad[15];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* load time */
	__type(key, __u32);
	__type(value, struct memlat_line);
} lines SEC(".maps");

/* Where the chase stands between runs; user space sets it to a line of the
 * cycle. */
__u32 memlat_at;

SEC("xdp")
int memlat_chase(struct xdp_md *ctx)
{
	__u32 at = memlat_at;

	for (int i = 0; i < MEMLAT_STEPS; i++) {
		struct memlat_line *l = bpf_map_lookup_elem(&lines, &at);

		if (!l)
			break;
		at = l->next;
	}
	memlat_at = at;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
