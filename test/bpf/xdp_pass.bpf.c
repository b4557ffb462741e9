// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * xdp_pass: passes every frame. Attached to the client end of a veth pair so
 * that the frames santa_udp sends with XDP_TX are received: veth delivers
 * XDP_TX frames only to a peer that has an XDP program.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
