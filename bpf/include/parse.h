/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/* Cursor-style parsing of Ethernet / IPv4 / IPv6 / UDP. Anything that is not
 * plainly a unicast UDP datagram with consistent lengths is refused with the
 * reason (enum santa_path), and the caller passes it on untouched. */
#ifndef SANTA_PARSE_H
#define SANTA_PARSE_H

#include "santa_abi.h"

#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define IPPROTO_UDP 17
#define IP_MF 0x2000
#define IP_OFFSET 0x1FFF
#define ETH_ALEN 6

struct santa_pkt {
	__u32 l3_off;      /* from the start of the frame */
	__u32 payload_off; /* UDP payload */
	__u32 plen;        /* UDP payload length */
	__u16 udp_check;   /* the request's UDP checksum field */
	__u8 ipv6;
	struct bpf_sock_tuple tuple; /* addresses and ports as in the packet */
};

static __always_inline int santa_v4_unicast(__be32 addr)
{
	__u32 a = bpf_ntohl(addr);

	return (a >> 28) != 0xe && a != 0xffffffff && a != 0;
}

/* ip_rcv_core drops an IPv4 header whose checksum is wrong. The ten words
 * of an option-less header sum to at most 20 bits: two folds suffice. */
static __always_inline int santa_ip_header_ok(const struct iphdr *ip)
{
	const __u16 *w = (const __u16 *)ip;
	__u32 sum = 0;

#pragma unroll
	for (int i = 0; i < sizeof(*ip) / 2; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return sum == 0xffff;
}

/* Refuses a packet: *path says why, and the caller passes the packet on
 * untouched. Returns 0, the "no" of santa_parse and santa_check_delivery. */
static __always_inline int santa_refuse(__u32 *path, __u32 why)
{
	*path = why;
	return 0;
}

/* Whether a request from this source port is the application's to
 * decide: port 0, to which no reply can go (udp_sendmsg refuses it), and
 * the ports of the UDP services that answer anything (echo, daytime,
 * chargen, time), from which a forged request would start a reflection
 * loop or flood; BIND drops requests from them (ns_client_dropport). */
static __always_inline int santa_reflection_port(__be16 port)
{
	switch (bpf_ntohs(port)) {
	case 0:
	case 7:
	case 13:
	case 19:
	case 37:
		return 1;
	}
	return 0;
}

/* Whether the frame holds a request worth matching, then described in *pkt;
 * if not, *path says why. frame_len is the whole frame (XDP: data_end -
 * data; TC: skb->len); only the headers must lie between data and
 * data_end. */
static __always_inline int santa_parse(void *data, void *data_end, __u32 frame_len, struct santa_pkt *pkt,
				       __u32 *path)
{
	struct ethhdr *eth = data;
	struct udphdr *udp;
	__u32 l4_len;

	if ((void *)(eth + 1) > data_end)
		return santa_refuse(path, SANTA_PATH_BAD_LENGTH);
	pkt->l3_off = sizeof(*eth);

	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);

		if ((void *)(ip + 1) > data_end)
			return santa_refuse(path, SANTA_PATH_BAD_LENGTH);
		if (ip->version != 4)
			return santa_refuse(path, SANTA_PATH_NOT_IP);
		if (ip->ihl != 5)
			return santa_refuse(path, SANTA_PATH_IP_OPTIONS);
		if (!santa_ip_header_ok(ip))
			return santa_refuse(path, SANTA_PATH_BAD_IP_CSUM);
		if (ip->frag_off & bpf_htons(IP_MF | IP_OFFSET))
			return santa_refuse(path, SANTA_PATH_FRAGMENT);
		if (ip->protocol != IPPROTO_UDP)
			return santa_refuse(path, SANTA_PATH_NOT_UDP);
		if (bpf_ntohs(ip->tot_len) < sizeof(*ip) + sizeof(*udp) ||
		    pkt->l3_off + bpf_ntohs(ip->tot_len) > frame_len)
			return santa_refuse(path, SANTA_PATH_BAD_LENGTH);
		if (!santa_v4_unicast(ip->daddr) || !santa_v4_unicast(ip->saddr))
			return santa_refuse(path, SANTA_PATH_NOT_UNICAST);
		l4_len = bpf_ntohs(ip->tot_len) - sizeof(*ip);
		udp = (void *)(ip + 1);
		pkt->ipv6 = 0;
		pkt->tuple.ipv4.saddr = ip->saddr;
		pkt->tuple.ipv4.daddr = ip->daddr;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);

		if ((void *)(ip6 + 1) > data_end)
			return santa_refuse(path, SANTA_PATH_BAD_LENGTH);
		if (ip6->version != 6)
			return santa_refuse(path, SANTA_PATH_NOT_IP);
		/* Extension headers (fragments among them) are not followed. */
		if (ip6->nexthdr != IPPROTO_UDP)
			return santa_refuse(path, SANTA_PATH_NOT_UDP);
		/* An unspecified (::) source the kernel delivers, but a reply
		 * to it goes nowhere (the application's would go to ::1). */
		if (ip6->daddr.in6_u.u6_addr8[0] == 0xff || ip6->saddr.in6_u.u6_addr8[0] == 0xff ||
		    !(ip6->saddr.in6_u.u6_addr32[0] | ip6->saddr.in6_u.u6_addr32[1] |
		      ip6->saddr.in6_u.u6_addr32[2] | ip6->saddr.in6_u.u6_addr32[3]))
			return santa_refuse(path, SANTA_PATH_NOT_UNICAST);
		l4_len = bpf_ntohs(ip6->payload_len);
		if (pkt->l3_off + sizeof(*ip6) + l4_len > frame_len)
			return santa_refuse(path, SANTA_PATH_BAD_LENGTH);
		udp = (void *)(ip6 + 1);
		pkt->ipv6 = 1;
		__builtin_memcpy(pkt->tuple.ipv6.saddr, &ip6->saddr, 16);
		__builtin_memcpy(pkt->tuple.ipv6.daddr, &ip6->daddr, 16);
	} else {
		return santa_refuse(path, SANTA_PATH_NOT_IP);
	}

	if ((void *)(udp + 1) > data_end)
		return santa_refuse(path, SANTA_PATH_BAD_LENGTH);
	if (bpf_ntohs(udp->len) != l4_len || l4_len < sizeof(*udp))
		return santa_refuse(path, SANTA_PATH_BAD_LENGTH);
	/* tuple.ipv4 and tuple.ipv6 keep their ports at different places. */
	if (pkt->ipv6) {
		pkt->tuple.ipv6.sport = udp->source;
		pkt->tuple.ipv6.dport = udp->dest;
	} else {
		pkt->tuple.ipv4.sport = udp->source;
		pkt->tuple.ipv4.dport = udp->dest;
	}
	pkt->udp_check = udp->check;
	pkt->payload_off = (void *)(udp + 1) - data;
	pkt->plen = l4_len - sizeof(*udp);
	if (pkt->plen > SANTA_MAX_UDP_REQUEST)
		return santa_refuse(path, SANTA_PATH_TOO_LONG);
	if (santa_reflection_port(udp->source))
		return santa_refuse(path, SANTA_PATH_SOURCE_PORT);
	return 1;
}

static __always_inline __u32 santa_tuple_len(const struct santa_pkt *pkt)
{
	return pkt->ipv6 ? sizeof(pkt->tuple.ipv6) : sizeof(pkt->tuple.ipv4);
}

#endif /* SANTA_PARSE_H */
