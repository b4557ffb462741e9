/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/* Turning a request's headers into the reply's, in place: the payload has
 * already been written; here addresses and ports swap, lengths are set and
 * both checksums are completed from the rule's precomputed payload sum. */
#ifndef SANTA_REPLY_H
#define SANTA_REPLY_H

#include "santa_abi.h"
#include "csum.h"
#include "parse.h"

/* Set from user space before loading. */
volatile const __u8 santa_reply_ttl = 64;

#define IP_DF 0x4000

static __always_inline void santa_swap_mac(struct ethhdr *eth)
{
	__u8 tmp[ETH_ALEN];

	__builtin_memcpy(tmp, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, tmp, ETH_ALEN);
}

/* pkt describes the request; payload_sum is the reply payload's partial sum.
 * Returns 0, or -1 if the headers are not where parsing found them. */
static __always_inline int santa_write_headers(void *data, void *data_end, const struct santa_pkt *pkt,
					       __u32 reply_len, __u64 payload_sum)
{
	struct ethhdr *eth = data;
	struct udphdr *udp;
	__u16 ulen = bpf_htons(sizeof(*udp) + reply_len);

	if ((void *)(eth + 1) > data_end)
		return -1;
	santa_swap_mac(eth);

	if (pkt->ipv6) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);

		if ((void *)(ip6 + 1) > data_end)
			return -1;
		*(__be32 *)ip6 = bpf_htonl(0x60000000); /* version 6, no class, no flow label */
		ip6->payload_len = ulen;
		ip6->hop_limit = santa_reply_ttl;
		__builtin_memcpy(&ip6->saddr, pkt->tuple.ipv6.daddr, 16);
		__builtin_memcpy(&ip6->daddr, pkt->tuple.ipv6.saddr, 16);
		udp = (void *)(ip6 + 1);
	} else {
		struct iphdr *ip = (void *)(eth + 1);

		if ((void *)(ip + 1) > data_end)
			return -1;
		ip->tos = 0;
		ip->tot_len = bpf_htons(sizeof(*ip) + sizeof(*udp) + reply_len);
		ip->id = 0;
		ip->frag_off = bpf_htons(IP_DF);
		ip->ttl = santa_reply_ttl;
		ip->saddr = pkt->tuple.ipv4.daddr;
		ip->daddr = pkt->tuple.ipv4.saddr;
		ip->check = santa_ipv4_check(ip);
		udp = (void *)(ip + 1);
	}
	if ((void *)(udp + 1) > data_end)
		return -1;
	udp->source = pkt->ipv6 ? pkt->tuple.ipv6.dport : pkt->tuple.ipv4.dport;
	udp->dest = pkt->ipv6 ? pkt->tuple.ipv6.sport : pkt->tuple.ipv4.sport;
	udp->len = ulen;
	/* The pseudo header sum does not depend on which address is which. */
	udp->check = ~santa_fold(santa_udp_header_sum(pkt, ulen, 0) + payload_sum);
	if (udp->check == 0)
		udp->check = 0xffff;
	return 0;
}

/* For an skb whose checksum is left to offload (CHECKSUM_PARTIAL), the
 * checksum field holds the folded pseudo-header sum that the device or the
 * stack completes, as udp4_hwcsum() leaves it. */
static __always_inline void santa_seed_partial(void *data, void *data_end, const struct santa_pkt *pkt,
					       __u32 reply_len)
{
	struct udphdr *udp = data + (pkt->ipv6 ? sizeof(struct ethhdr) + sizeof(struct ipv6hdr)
					       : sizeof(struct ethhdr) + sizeof(struct iphdr));

	if ((void *)(udp + 1) > data_end)
		return;
	udp->check = santa_fold(santa_pseudo_sum(pkt, bpf_htons(sizeof(*udp) + reply_len)));
}

/* A request whose UDP checksum is wrong is never answered. IPv4 may omit the
 * checksum (0); IPv6 may not. */
static __always_inline int santa_request_csum_ok(const struct santa_pkt *pkt, struct santa_scratch *s)
{
	__u64 payload;

	if (pkt->udp_check == 0)
		return !pkt->ipv6;
	payload = santa_sum_request(s, pkt->plen);
	if (payload == (__u64)-1)
		return 0;
	return santa_fold(santa_udp_header_sum(pkt, bpf_htons(sizeof(struct udphdr) + pkt->plen),
					       pkt->udp_check) + payload) == 0xffff;
}

/* The finished reply payload's partial sum. */
static __always_inline __u64 santa_reply_sum(const struct santa_rule *rule, struct santa_scratch *s)
{
	return (__u64)rule->reply_csum + santa_sum_copies(rule, s);
}

#endif /* SANTA_REPLY_H */
