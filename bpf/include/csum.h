/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/* Internet checksums as sums of native 16-bit words (see santa_abi.h): the
 * reply's payload sum is precomputed at install time, so per packet only the
 * copied bytes, the UDP header and the addresses are added. */
#ifndef SANTA_CSUM_H
#define SANTA_CSUM_H

#include "santa_abi.h"

static __always_inline __u16 santa_fold(__u64 sum)
{
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return sum;
}

/* Sum of the 16-bit words of a 16-byte IPv6 or 4-byte IPv4 address. */
static __always_inline __u64 santa_sum_addr6(const __u32 *a)
{
	return (__u64)a[0] + a[1] + a[2] + a[3];
}

/* Pseudo header: both addresses, the protocol and the UDP length. */
static __always_inline __u64 santa_pseudo_sum(const struct santa_pkt *pkt, __u16 ulen_be)
{
	__u64 sum;

	if (pkt->ipv6)
		sum = santa_sum_addr6((const __u32 *)pkt->tuple.ipv6.saddr) +
		      santa_sum_addr6((const __u32 *)pkt->tuple.ipv6.daddr);
	else
		sum = (__u64)pkt->tuple.ipv4.saddr + pkt->tuple.ipv4.daddr;
	return sum + bpf_htons(IPPROTO_UDP) + ulen_be;
}

/* Pseudo header + UDP header (ports, length, checksum field as given). The
 * sum does not depend on which address or port is the source. */
static __always_inline __u64 santa_udp_header_sum(const struct santa_pkt *pkt, __u16 ulen_be,
						  __u16 check)
{
	__u16 sport = pkt->ipv6 ? pkt->tuple.ipv6.sport : pkt->tuple.ipv4.sport;
	__u16 dport = pkt->ipv6 ? pkt->tuple.ipv6.dport : pkt->tuple.ipv4.dport;

	return santa_pseudo_sum(pkt, ulen_be) + sport + dport + ulen_be + check;
}

/* Partial sum of s->buf[0, len), treating bytes past len as zero. Zeroing the
 * pad is safe: nothing reads the scratch past the request. */
static __always_inline __u64 santa_sum_request(struct santa_scratch *s, __u32 len)
{
	__u32 rounded = (len + 3) & ~3u;
	__u64 sum = 0;
	__s64 part;

#pragma unroll
	for (int i = 0; i < 3; i++) /* pad up to a 4-byte multiple */
		if (len + i < rounded)
			s->buf[(len + i) & (SANTA_SCRATCH_LEN - 1)] = 0;
	/* bpf_csum_diff takes at most 512 bytes (128 words) per call. */
#pragma unroll
	for (int chunk = 0; chunk < (SANTA_MAX_UDP_REQUEST + 511) / 512; chunk++) {
		__u32 from = chunk * 512, n;

		if (rounded <= from)
			break;
		n = rounded - from;
		if (n > 512)
			n = 512;
		part = bpf_csum_diff(NULL, 0, (void *)&s->buf[from], n, 0);
		if (part < 0)
			return (__u64)-1;
		sum += (__u32)part;
	}
	return sum;
}

/* Native-word sum of s->buf[off, off + len) as if it started at an even
 * offset. Verified once as a global function, whatever the caller. */
__noinline __u32 santa_sum_bytes(struct santa_scratch *s, __u32 off, __u32 len)
{
	__u64 sum = 0;

	if (!s || len > SANTA_MAX_COPY_LEN)
		return 0;
	off &= SANTA_MAX_COND_END - 1;
	for (__u32 i = 0; i < SANTA_MAX_COPY_LEN; i += 2) {
		if (i + 1 < len)
			sum += *(__u16 *)&s->buf[off + i];
		else if (i < len)
			sum += s->buf[off + i]; /* a lone last byte is the low byte */
		else
			break;
	}
	return santa_fold(sum);
}

/* What the copied bytes add to the reply's payload sum: bytes at an odd
 * reply offset land in the other half of their 16-bit words. */
static __always_inline __u64 santa_sum_copies(const struct santa_rule *rule,
					      struct santa_scratch *s)
{
	__u64 sum = 0;

#pragma unroll
	for (int i = 0; i < SANTA_MAX_COPIES; i++) {
		const struct santa_copy *c = &rule->copies[i];
		__u16 part;

		if (i >= rule->ncopies)
			break;
		part = santa_sum_bytes(s, c->src, c->len);
		if (c->dst & 1)
			part = (part << 8) | (part >> 8);
		sum += part;
	}
	return sum;
}

static __always_inline __u16 santa_ipv4_check(struct iphdr *ip)
{
	__u16 *w = (__u16 *)ip;
	__u64 sum = 0;

	ip->check = 0;
#pragma unroll
	for (int i = 0; i < (int)sizeof(*ip) / 2; i++)
		sum += w[i];
	return ~santa_fold(sum);
}

#endif /* SANTA_CSUM_H */
