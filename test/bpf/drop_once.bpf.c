// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * drop_once: drops the first IPv4 TCP segment whose payload starts with a
 * marker, once. Attached to an interface's ingress in tests, it makes the
 * next segments of that connection arrive out of order, and the dropped
 * one come later as a retransmission: what a lossy path does, where this
 * kernel has no netem.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define ETH_P_IP 0x0800
#define TC_ACT_OK 0
#define TC_ACT_SHOT 2

volatile const __u8 marker[4];
__u32 dropped; /* segments dropped: one at most */

SEC("tc")
int drop_once(struct __sk_buff *skb)
{
	__u8 vihl, doff, head[4];
	__u32 l4, payload;

	if (dropped || skb->protocol != bpf_htons(ETH_P_IP))
		return TC_ACT_OK;
	if (bpf_skb_load_bytes(skb, sizeof(struct ethhdr), &vihl, 1) ||
	    bpf_skb_load_bytes(skb, sizeof(struct ethhdr) + 9, &head[0], 1) || head[0] != IPPROTO_TCP)
		return TC_ACT_OK;
	l4 = sizeof(struct ethhdr) + (vihl & 0xf) * 4;
	if (bpf_skb_load_bytes(skb, l4 + 12, &doff, 1))
		return TC_ACT_OK;
	payload = l4 + (doff >> 4) * 4;
	if (bpf_skb_load_bytes(skb, payload, head, sizeof(head)))
		return TC_ACT_OK;
	/* Byte by byte: marker is volatile, set at load time. */
	for (int i = 0; i < sizeof(head); i++)
		if (head[i] != marker[i])
			return TC_ACT_OK;
	dropped = 1;
	return TC_ACT_SHOT;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
