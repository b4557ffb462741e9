/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/*
 * Answering in XDP on veth, the device of every container network and of
 * every client in another namespace of the host. Two things differ there
 * from a NIC (docs/architecture.md, "Local clients: veth"):
 *
 *  - A request built by the peer's stack carries only a partial UDP
 *    checksum when the peer's TX checksum offload is on, as it is by
 *    default (CHECKSUM_PARTIAL: the field holds the pseudo-header seed).
 *    The stack trusts such a frame, which never crossed a wire
 *    (skb_csum_unnecessary); XDP cannot verify it from the bytes. But veth's
 *    native XDP runs on a struct veth_xdp_buff, which holds the skb, and
 *    the skb's ip_summed says what the stack would conclude.
 *  - XDP_TX puts the reply on the peer's NAPI ring but schedules the peer's
 *    NAPI only when the peer runs an XDP program itself (veth_xdp_flush):
 *    a peer with NAPI from GRO alone leaves the replies in its ring until
 *    something else wakes it, and one without NAPI drops them. A redirect
 *    to the device itself goes through ndo_xdp_xmit, which wakes the
 *    peer's NAPI whenever there is one, and the kernel says whether there
 *    is: NETDEV_XDP_ACT_NDO_XMIT in the device's xdp_features.
 */
#ifndef SANTA_VETH_H
#define SANTA_VETH_H

#include "parse.h"

#define CHECKSUM_PARTIAL 3

extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;
extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

/* veth's ndo_start_xmit, from kallsyms: a device is a veth exactly when its
 * netdev_ops transmit with it. Weak: without veth (a module not loaded when
 * santad started) it is 0 and no device is taken for one. */
extern void veth_xmit __ksym __weak;

static __always_inline int santa_is_veth(struct net_device *dev)
{
	return &veth_xmit && (void *)dev->netdev_ops->ndo_start_xmit == &veth_xmit;
}

/* The frame's struct veth_xdp_buff if veth's native XDP runs this program,
 * else NULL (another device, generic XDP, BPF_PROG_TEST_RUN). The buffer is
 * one exactly when its receive queue is one of the veth's own (rq[i] of its
 * struct veth_priv); generic XDP and the test runs use others. */
static __always_inline struct veth_xdp_buff *santa_veth_xdp(struct xdp_md *ctx, struct net_device *dev)
{
	struct xdp_buff *xdp = bpf_cast_to_kern_ctx(ctx);
	struct xdp_rxq_info *rxq = xdp->rxq;
	struct veth_priv *priv;
	__u32 queue;
	__u64 rq;

	if (!bpf_core_type_exists(struct veth_xdp_buff) || !santa_is_veth(dev))
		return NULL;
	queue = rxq->queue_index;
	if (queue >= dev->num_rx_queues)
		return NULL;
	priv = bpf_rdonly_cast(dev->priv, bpf_core_type_id_kernel(struct veth_priv));
	rq = (__u64)priv->rq + (__u64)queue * bpf_core_type_size(struct veth_rq);
	if ((__u64)rxq != rq + bpf_core_field_offset(struct veth_rq, xdp_rxq))
		return NULL;
	return bpf_rdonly_cast(xdp, bpf_core_type_id_kernel(struct veth_xdp_buff));
}

/* Whether frames sent through dev's ndo_xdp_xmit reach its veth peer: the
 * peer has NAPI (an XDP program or GRO), which the kernel records here. */
static __always_inline int santa_veth_xmit_ok(struct net_device *dev)
{
	return dev->xdp_features & NETDEV_XDP_ACT_NDO_XMIT;
}

/* Whether the stack takes the request's UDP checksum without verifying it,
 * as skb_csum_unnecessary() does: CHECKSUM_PARTIAL (a local sender left it
 * to offload) with the checksum starting at or after the UDP header. skb's
 * data is at the frame's start (mac_header). IPv6 refuses a zero checksum
 * whatever the skb says. */
static __always_inline int santa_csum_partial(struct sk_buff *skb, const struct santa_pkt *pkt)
{
	if (!skb || BPF_CORE_READ_BITFIELD(skb, ip_summed) != CHECKSUM_PARTIAL)
		return 0;
	if (pkt->ipv6 && pkt->udp_check == 0)
		return 0;
	return skb->csum_start >= skb->mac_header + pkt->payload_off - sizeof(struct udphdr);
}

/* Whether the frame carries a VLAN tag beside its bytes (veth's default
 * tx-vlan-offload, a NIC's rx-vlan-offload): it then reaches a socket, if
 * at all, through a VLAN device, not the one XDP or TC runs on, and its
 * reply would need the tag. Not answered: NOT_IP, as a tag in the frame. */
static __always_inline int santa_vlan_tagged(struct sk_buff *skb)
{
	return skb && BPF_CORE_READ(skb, vlan_all) != 0;
}

#endif /* SANTA_VETH_H */
