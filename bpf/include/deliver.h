/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/* Would the kernel itself deliver this request to a local socket? The data
 * plane runs before the stack, so it makes the stack's own checks before it
 * answers: what ip_rcv and the input route lookup drop never gets a reply.
 * Parsing (parse.h) refuses what is not plainly a unicast UDP datagram; this
 * adds what needs the interface or the host's addresses. A packet that fails
 * passes untouched, and the stack then drops it as it would without Santa.
 * See docs/operations.md, "Threat model". */
#ifndef SANTA_DELIVER_H
#define SANTA_DELIVER_H

#include "santa_abi.h"
#include "parse.h"

/* The host's addresses (santa_abi.h, struct santa_addr_key), kept by user
 * space from the kernel's local routing table. Empty until the first sync:
 * then nothing is answered. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SANTA_MAX_LOCAL_ADDRS);
	__type(key, struct santa_addr_key);
	__type(value, __u32); /* enum santa_addr_kind */
} local_addrs SEC(".maps");

/* The kind of addr (an address of the request, 4 or 16 bytes) in
 * local_addrs, or 0 if it is none of the host's. */
static __always_inline __u32 santa_addr_kind(const struct santa_pkt *pkt, const void *addr, __u32 ifindex)
{
	struct santa_addr_key key = {};
	__u32 *kind;

	if (pkt->ipv6) {
		key.family = 6;
		__builtin_memcpy(key.addr, addr, 16);
		/* fe80::/10 is scoped to its link. */
		if (key.addr[0] == 0xfe && (key.addr[1] & 0xc0) == 0x80)
			key.ifindex = ifindex;
	} else {
		key.family = 4;
		__builtin_memcpy(key.addr, addr, 4);
	}
	kind = bpf_map_lookup_elem(&local_addrs, &key);
	return kind ? *kind : 0;
}

/* Addresses no request from the wire may carry, whatever the host's
 * addresses: ip_rcv_core, ip6_rcv_core and the route lookup drop loopback
 * sources and destinations off loopback. A "this network" (0/8) IPv4 source
 * and an IPv4-mapped IPv6 source the kernel may deliver; no host sends
 * from them, and a reply to one would not reach it: refused, stricter than
 * the kernel. */
static __always_inline int santa_martian_pattern(const struct santa_pkt *pkt)
{
	if (pkt->ipv6) {
		const __u32 *s = (const __u32 *)pkt->tuple.ipv6.saddr;
		const __u32 *d = (const __u32 *)pkt->tuple.ipv6.daddr;
		__u32 one = bpf_htonl(1);

		if ((s[0] | s[1] | s[2]) == 0 && s[3] == one)
			return 1;
		if ((d[0] | d[1] | d[2]) == 0 && d[3] == one)
			return 1;
		return (s[0] | s[1]) == 0 && s[2] == bpf_htonl(0xffff);
	}
	__u8 s = ((const __u8 *)&pkt->tuple.ipv4.saddr)[0];
	__u8 d = ((const __u8 *)&pkt->tuple.ipv4.daddr)[0];

	return s == 127 || d == 127 || s == 0;
}

static __always_inline int santa_mac_equal(const __u8 *a, const __u8 *b)
{
	return *(const __u32 *)a == *(const __u32 *)b && *(const __u16 *)(a + 4) == *(const __u16 *)(b + 4);
}

/* Whether the kernel would deliver the request that came in on dev, in the
 * frame at data, to a local socket; if not, *path says why. */
static __always_inline int santa_check_delivery(struct net_device *dev, void *data, void *data_end,
						const struct santa_pkt *pkt, __u32 *path)
{
	int loopback = dev->flags & IFF_LOOPBACK;
	__u32 ifindex = dev->ifindex;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return santa_refuse(path, SANTA_PATH_BAD_LENGTH);

	/* eth_type_trans: ip_rcv drops a frame for another MAC
	 * (PACKET_OTHERHOST). A unicast request in a broadcast or multicast
	 * frame the kernel delivers, but no host sends one: refused, stricter
	 * than the kernel, as is a group source MAC, to which a reply would be
	 * a broadcast. dev_addr is a pointer the verifier will not follow;
	 * dev_addr_shadow is the copy of the same bytes that dev_addr_mod
	 * keeps inside struct net_device. */
	if (!santa_mac_equal(eth->h_dest, dev->dev_addr_shadow) || (eth->h_source[0] & 1))
		return santa_refuse(path, SANTA_PATH_NOT_FOR_HOST);
	if (!loopback && santa_martian_pattern(pkt))
		return santa_refuse(path, SANTA_PATH_MARTIAN);
	/* 127.0.0.0/8 is one local route on loopback, not 2^24 addresses in
	 * the map; off loopback it is a martian, refused above. */
	if (!(loopback && !pkt->ipv6 && ((const __u8 *)&pkt->tuple.ipv4.daddr)[0] == 127) &&
	    santa_addr_kind(pkt, pkt->ipv6 ? (void *)pkt->tuple.ipv6.daddr : (void *)&pkt->tuple.ipv4.daddr,
			    ifindex) != SANTA_ADDR_LOCAL)
		return santa_refuse(path, SANTA_PATH_NOT_LOCAL);
	/* fib_validate_source: a packet from one of the host's own addresses,
	 * or from a broadcast address, is a martian unless it came over
	 * loopback. */
	if (!loopback && santa_addr_kind(pkt, pkt->ipv6 ? (void *)pkt->tuple.ipv6.saddr : (void *)&pkt->tuple.ipv4.saddr,
					 ifindex))
		return santa_refuse(path, SANTA_PATH_MARTIAN);
	return 1;
}

/* Whether a reply of reply_len payload bytes to pkt fits dev's MTU. A
 * frame over the MTU is dropped by the device; the application's own reply
 * of that size the stack fragments. */
static __always_inline int santa_reply_fits(struct net_device *dev, const struct santa_pkt *pkt, __u32 reply_len)
{
	return pkt->payload_off - pkt->l3_off + reply_len <= dev->mtu;
}

#endif /* SANTA_DELIVER_H */
