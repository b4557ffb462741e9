// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * santa_udp: UDP requests that match one of their socket's rules are answered
 * here, before the network stack; every other packet passes untouched.
 *  - santa_udp (XDP) answers in place: XDP_TX, or on veth a redirect to the
 *    device itself (veth.h);
 *  - santa_udp_tc (TC ingress) answers what XDP could not (a checksum XDP
 *    cannot verify, replies that do not fit the XDP frame, devices without
 *    XDP, a veth peer that cannot receive XDP frames) by growing the skb
 *    and redirecting it back out of the device it came in on;
 *  - santa_sock_release (cgroup) retires the service of a closed socket;
 *  - santa_mc_udp_reply (cgroup egress) sees memcached's UDP replies, and
 *    santa_mc_settle_domain ends a domain's hold for user space (mc_udp.h,
 *    guard.h).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>

#include "santa_abi.h"
#include "maps.h"
#include "parse.h"
#include "csum.h"
#include "match.h"
#include "reply.h"
#include "payload.h"
#include "deliver.h"
#include "learn.h"
#include "veth.h"
#include "mc_udp.h"
#include "mc_fill.h"

#define TC_ACT_OK 0
#define TC_ACT_SHOT 2

/* Where XDP and TC read the request. Only these two use it: they run in
 * softirqs, which do not interrupt one another on a CPU. (The TCP verdict,
 * which also runs in tasks, has buffers of its own: tcp_maps.h.) */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct santa_scratch);
} scratch SEC(".maps");

static __always_inline struct santa_scratch *santa_scratch(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&scratch, &zero);
}

/* The service owning the socket that would receive this packet, if any. The
 * socket cookie ties rules to the very socket that installed them. */
static __always_inline struct santa_service *santa_find_service(void *ctx, struct santa_pkt *pkt,
								__u32 *path)
{
	struct santa_service *svc;
	struct bpf_sock *sk;
	struct sock *ksk;
	__u64 cookie;

	if (pkt->ipv6)
		sk = bpf_sk_lookup_udp(ctx, &pkt->tuple, sizeof(pkt->tuple.ipv6), BPF_F_CURRENT_NETNS, 0);
	else
		sk = bpf_sk_lookup_udp(ctx, &pkt->tuple, sizeof(pkt->tuple.ipv4), BPF_F_CURRENT_NETNS, 0);
	if (!sk) {
		*path = SANTA_PATH_NO_SOCKET;
		return NULL;
	}
	/* XDP may not call bpf_get_socket_cookie; the cookie is read from the
	 * kernel socket instead (user space creates it at registration). */
	ksk = bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct sock));
	cookie = ksk->__sk_common.skc_cookie.counter;
	bpf_sk_release(sk);

	svc = bpf_map_lookup_elem(&services, &cookie);
	if (!svc)
		*path = SANTA_PATH_NOT_SERVICE;
	return svc;
}

/* pkt's datagram passes to svc's socket: if svc is memcached's, it claims
 * its client and request id until its reply (mc_fill.h), as one whose
 * reply may refill its rule if fresh (NULL: none) says so (s holds it
 * then). */
static __always_inline void santa_mc_passes(void *ctx, int xdp, const struct santa_service *svc,
					    const struct santa_pkt *pkt, const struct santa_scratch *s,
					    const struct santa_fresh_read *fresh)
{
	__u16 id;

	if (svc->parser != SANTA_PARSER_MEMCACHED || pkt->plen < sizeof(id) ||
	    santa_load(ctx, xdp, pkt->payload_off, &id, sizeof(id)))
		return;
	santa_mc_fill_claim(svc, pkt, id, s, fresh);
}

static __always_inline void santa_xdp_mark(struct xdp_md *ctx, __u32 verdict)
{
	struct santa_xdp_meta *meta;

	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(*meta)))
		return;
	meta = (void *)(long)ctx->data_meta;
	if ((void *)(meta + 1) > (void *)(long)ctx->data)
		return;
	meta->verdict = verdict;
}

/* The one exit of the XDP program but for fallbacks: count the path, tell
 * TC that XDP saw what it passes. */
static __always_inline int santa_xdp_exit(struct xdp_md *ctx, __u32 path, int action)
{
	santa_count_path(path);
	if (action == XDP_PASS)
		santa_xdp_mark(ctx, SANTA_META_SEEN);
	return action;
}

/* XDP leaves a matched request to TC, which answers it and counts reason
 * (a SANTA_SVC_TC_* counter) for the service. */
static __always_inline int santa_xdp_fallback(struct xdp_md *ctx, __u32 path, __u32 reason)
{
	santa_count_path(path);
	santa_xdp_mark(ctx, SANTA_META_FALLBACK + reason);
	return XDP_PASS;
}

/* The device the frame came in on. */
static __always_inline struct net_device *santa_xdp_dev(struct xdp_md *ctx)
{
	struct xdp_buff *xdp = bpf_cast_to_kern_ctx(ctx);

	return xdp->rxq->dev;
}

SEC("xdp")
int santa_udp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct santa_pkt pkt = {};
	struct santa_fresh_read fresh;
	struct santa_service *svc;
	struct santa_scratch *s;
	struct santa_rule *rule;
	struct veth_xdp_buff *veth;
	struct net_device *dev;
	__u32 path, reply_len;
	int delta, read, action;
	__u64 sum;

	if (!santa_parse(data, data_end, data_end - data, &pkt, &path))
		return santa_xdp_exit(ctx, path, XDP_PASS);
	svc = santa_find_service(ctx, &pkt, &path);
	if (!svc)
		return santa_xdp_exit(ctx, path, XDP_PASS);

	s = santa_scratch();
	read = santa_read_payload(ctx, 1, &pkt, s);
	rule = read ? santa_answering_rule(s, svc, pkt.plen, &fresh) : NULL;
	/* A memcached datagram's writes end their keys' rules before anything
	 * answers it, unless the rule that matched says the datagram holds no
	 * write (SANTA_RULE_READ_ONLY: most of the GETs, spared the parse). A
	 * rule matched before the parse is matched again: a write it found may
	 * have ended its guard. No rule matched before matches after. */
	if (read && svc->parser == SANTA_PARSER_MEMCACHED && !(rule && (rule->flags & SANTA_RULE_READ_ONLY))) {
		santa_mc_datagram(svc, &pkt, s);
		if (rule)
			rule = santa_answering_rule(s, svc, pkt.plen, &fresh);
	}
	if (!rule) {
		if (read)
			santa_learn(svc, &pkt, s);
		santa_mc_passes(ctx, 1, svc, &pkt, s, read ? &fresh : NULL);
		goto pass;
	}
	if (santa_is_probe(svc, &pkt))
		goto probe;
	/* Checked only now, so that only the packets to be answered pay. */
	dev = santa_xdp_dev(ctx);
	if (!santa_check_delivery(dev, data, data_end, &pkt, &path)) {
		santa_mc_passes(ctx, 1, svc, &pkt, NULL, NULL);
		return santa_xdp_exit(ctx, path, XDP_PASS);
	}
	reply_len = santa_answer_len(rule, &fresh);
	if (!santa_reply_fits(dev, &pkt, reply_len))
		goto over_mtu;
	veth = santa_veth_xdp(ctx, dev);
	if (veth && santa_vlan_tagged(veth->skb)) {
		santa_mc_passes(ctx, 1, svc, &pkt, NULL, NULL);
		return santa_xdp_exit(ctx, SANTA_PATH_NOT_IP, XDP_PASS);
	}
	if (veth && !santa_veth_xmit_ok(dev))
		return santa_xdp_fallback(ctx, SANTA_PATH_FALLBACK_NO_XDP_TX, SANTA_SVC_TC_NO_XDP);
	/* A partial checksum from the peer's stack (veth.h) is what the stack
	 * trusts; any other checksum is verified. Where XDP has no skb to ask
	 * (generic XDP, loopback), TC does. */
	if (!(veth && santa_csum_partial(veth->skb, &pkt)) && !santa_request_csum_ok(&pkt, s))
		return santa_xdp_fallback(ctx, SANTA_PATH_FALLBACK_CSUM, SANTA_SVC_TC_CSUM);

	sum = santa_answer_sum(rule, s, &fresh);
	delta = (int)(pkt.payload_off + reply_len) - (int)(data_end - data);
	if (bpf_xdp_adjust_tail(ctx, delta))
		return santa_xdp_fallback(ctx, SANTA_PATH_FALLBACK_TOO_LONG, SANTA_SVC_TC_TOO_LONG);
	/* From here the request is gone: a failure drops, never passes garbage. */
	if (santa_store_payload(ctx, 1, &pkt, rule, s, svc, &fresh))
		return santa_xdp_exit(ctx, SANTA_PATH_TX_ERROR, XDP_DROP);
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	if (santa_write_headers(data, data_end, &pkt, reply_len, sum))
		return santa_xdp_exit(ctx, SANTA_PATH_TX_ERROR, XDP_DROP);

	/* On veth, XDP_TX would wake the peer only if it runs XDP (veth.h). */
	action = veth ? bpf_redirect(dev->ifindex, 0) : XDP_TX;
	santa_count_service(svc->id, SANTA_SVC_MATCHED);
	santa_count_rule(rule->rule_id, reply_len);
	return santa_xdp_exit(ctx, SANTA_PATH_ANSWERED, action);

over_mtu:
	santa_mc_passes(ctx, 1, svc, &pkt, NULL, NULL);
	santa_count_service(svc->id, SANTA_SVC_PASSED);
	return santa_xdp_exit(ctx, SANTA_PATH_OVER_MTU, XDP_PASS);
probe:
	santa_mc_passes(ctx, 1, svc, &pkt, NULL, NULL);
	santa_count_service(svc->id, SANTA_SVC_PASSED);
	return santa_xdp_exit(ctx, SANTA_PATH_PROBE, XDP_PASS);
pass:
	santa_count_service(svc->id, SANTA_SVC_PASSED);
	return santa_xdp_exit(ctx, SANTA_PATH_SERVICE_PASS, XDP_PASS);
}

/* What XDP said about this packet, or 0 if XDP did not see it. */
static __always_inline __u32 santa_xdp_verdict(struct __sk_buff *skb)
{
	struct santa_xdp_meta *meta = (void *)(long)skb->data_meta;

	if ((void *)(meta + 1) > (void *)(long)skb->data)
		return 0;
	return meta->verdict;
}

/* Why TC answers a request rather than XDP (a SANTA_SVC_TC_* counter):
 * the reason XDP left it with, or, if XDP did not see it, no XDP. */
static __always_inline __u32 santa_tc_reason(__u32 verdict)
{
	if (verdict >= SANTA_META_FALLBACK && verdict < SANTA_META_FALLBACK + SANTA_SVC_NCOUNTERS)
		return verdict - SANTA_META_FALLBACK;
	return SANTA_SVC_TC_NO_XDP;
}

/* The one exit of the TC program: count the path. */
static __always_inline int santa_tc_exit(__u32 path, int action)
{
	santa_count_path(path);
	return action;
}

/* Headers up to the UDP payload must be linear and writable. */
#define SANTA_MAX_HEADERS (sizeof(struct ethhdr) + sizeof(struct ipv6hdr) + sizeof(struct udphdr))

SEC("tc")
int santa_udp_tc(struct __sk_buff *skb)
{
	struct santa_pkt pkt = {};
	struct santa_fresh_read fresh;
	struct santa_service *svc;
	struct santa_scratch *s;
	struct santa_rule *rule;
	struct sk_buff *kskb;
	__u32 path, reply_len, verdict, headers;
	int partial, read;
	__u64 sum;

	verdict = santa_xdp_verdict(skb);
	if (verdict == SANTA_META_SEEN)
		return santa_tc_exit(SANTA_PATH_SEEN_BY_XDP, TC_ACT_OK);
	/* Several datagrams GRO merged for a socket that takes them so
	 * (UDP_GRO), their lengths summed in the headers: the stack splits
	 * them again for any other socket. Not one request. */
	if (skb->gso_segs > 1)
		return santa_tc_exit(SANTA_PATH_BAD_LENGTH, TC_ACT_OK);

	headers = skb->len < SANTA_MAX_HEADERS ? skb->len : SANTA_MAX_HEADERS;
	if (bpf_skb_pull_data(skb, headers))
		return santa_tc_exit(SANTA_PATH_BAD_LENGTH, TC_ACT_OK);
	if (!santa_parse((void *)(long)skb->data, (void *)(long)skb->data_end, skb->len, &pkt, &path))
		return santa_tc_exit(path, TC_ACT_OK);
	svc = santa_find_service(skb, &pkt, &path);
	if (!svc)
		return santa_tc_exit(path, TC_ACT_OK);

	s = santa_scratch();
	read = santa_read_payload(skb, 0, &pkt, s);
	if (read && !verdict && svc->parser == SANTA_PARSER_MEMCACHED)
		santa_mc_datagram(svc, &pkt, s);
	rule = read ? santa_answering_rule(s, svc, pkt.plen, &fresh) : NULL;
	if (!rule) {
		/* A request XDP saw it counted there already, if it passed. */
		if (read && !verdict)
			santa_learn(svc, &pkt, s);
		santa_mc_passes(skb, 0, svc, &pkt, s, read ? &fresh : NULL);
		goto pass;
	}
	if (santa_is_probe(svc, &pkt)) {
		santa_mc_passes(skb, 0, svc, &pkt, NULL, NULL);
		santa_count_service(svc->id, SANTA_SVC_PASSED);
		return santa_tc_exit(SANTA_PATH_PROBE, TC_ACT_OK);
	}
	kskb = bpf_cast_to_kern_ctx(skb);
	if (skb->vlan_present) { /* veth.h, santa_vlan_tagged */
		santa_mc_passes(skb, 0, svc, &pkt, NULL, NULL);
		return santa_tc_exit(SANTA_PATH_NOT_IP, TC_ACT_OK);
	}
	if (!santa_check_delivery(kskb->dev, (void *)(long)skb->data, (void *)(long)skb->data_end, &pkt, &path)) {
		santa_mc_passes(skb, 0, svc, &pkt, NULL, NULL);
		return santa_tc_exit(path, TC_ACT_OK);
	}
	reply_len = santa_answer_len(rule, &fresh);
	if (!santa_reply_fits(kskb->dev, &pkt, reply_len)) {
		santa_mc_passes(skb, 0, svc, &pkt, NULL, NULL);
		santa_count_service(svc->id, SANTA_SVC_PASSED);
		return santa_tc_exit(SANTA_PATH_OVER_MTU, TC_ACT_OK);
	}

	/* A locally sent request (loopback, veth) may carry only a partial
	 * checksum, which the stack trusts; so do we (veth.h). Its reply keeps
	 * the partial state, so it carries the pseudo-header seed, not a sum. */
	partial = santa_csum_partial(kskb, &pkt);
	if (!partial && !santa_request_csum_ok(&pkt, s)) {
		santa_count_service(svc->id, SANTA_SVC_BAD_CSUM);
		goto pass;
	}
	sum = santa_answer_sum(rule, s, &fresh);

	if (bpf_skb_change_tail(skb, pkt.payload_off + reply_len, 0))
		goto pass;
	if (santa_store_payload(skb, 0, &pkt, rule, s, svc, &fresh))
		return santa_tc_exit(SANTA_PATH_TX_ERROR, TC_ACT_SHOT);
	if (bpf_skb_pull_data(skb, pkt.payload_off) ||
	    santa_write_headers((void *)(long)skb->data, (void *)(long)skb->data_end, &pkt, reply_len, sum))
		return santa_tc_exit(SANTA_PATH_TX_ERROR, TC_ACT_SHOT);
	if (partial)
		santa_seed_partial((void *)(long)skb->data, (void *)(long)skb->data_end, &pkt, reply_len);

	santa_count_service(svc->id, SANTA_SVC_MATCHED);
	santa_count_service(svc->id, santa_tc_reason(verdict));
	santa_count_rule(rule->rule_id, reply_len);
	return santa_tc_exit(SANTA_PATH_ANSWERED, bpf_redirect(skb->ifindex, 0));

pass:
	santa_count_service(svc->id, SANTA_SVC_PASSED);
	return santa_tc_exit(SANTA_PATH_SERVICE_PASS, TC_ACT_OK);
}

/* A registered socket is being closed (by its owner, or because the process
 * died): its service stops answering now, before the socket is gone, and
 * user space hears of it to drop the rules. Attached to the root cgroup, so
 * it sees every socket of the host. */
SEC("cgroup/sock_release")
int santa_sock_release(struct bpf_sock *sk)
{
	__u64 cookie = bpf_get_socket_cookie(sk);

	if (bpf_map_lookup_elem(&services, &cookie) && !bpf_map_delete_elem(&services, &cookie))
		bpf_ringbuf_output(&closed_sockets, &cookie, sizeof(cookie), 0);
	return 1; /* sock_release cannot veto; 1 is "continue" */
}

/* Bytes of a UDP reply read: the frame header and a write's reply line. */
#define SANTA_MC_REPLY_HEAD 20

/* A packet a socket of the cgroup sends: if it is a reply of a memcached
 * UDP service, the write it answers is done (mc_udp.h), or the get it
 * answers may refill its rule (mc_fill.h), before the reply leaves. On the cgroup's egress, not on a device's: every reply of the
 * socket passes here, in memcached's sending thread, whatever the device
 * it leaves by; a device Santa is not attached to would leave its writes
 * held to their deadline. Other sockets pay a load and a lookup. */
SEC("cgroup_skb/egress")
int santa_mc_udp_reply(struct __sk_buff *skb)
{
	struct sk_buff *kskb = bpf_cast_to_kern_ctx(skb);
	__u8 head[SANTA_MC_REPLY_HEAD];
	struct santa_service *svc;
	struct udphdr udp;
	struct sock *sk;
	__u32 addr[4], off, n;
	__u64 cookie;
	int ipv6;

	if (!kskb->sk)
		return 1;
	sk = bpf_rdonly_cast(kskb->sk, bpf_core_type_id_kernel(struct sock));
	if (sk->sk_protocol != IPPROTO_UDP)
		return 1;
	cookie = sk->__sk_common.skc_cookie.counter;
	svc = bpf_map_lookup_elem(&services, &cookie);
	if (!svc || svc->parser != SANTA_PARSER_MEMCACHED)
		return 1;
	ipv6 = skb->protocol == bpf_htons(ETH_P_IPV6);
	if (ipv6) {
		struct ipv6hdr ip6;

		if (bpf_skb_load_bytes(skb, 0, &ip6, sizeof(ip6)) || ip6.nexthdr != IPPROTO_UDP)
			return 1;
		__builtin_memcpy(addr, &ip6.daddr, sizeof(addr));
		off = sizeof(ip6);
	} else {
		struct iphdr ip;

		if (bpf_skb_load_bytes(skb, 0, &ip, sizeof(ip)) || ip.protocol != IPPROTO_UDP)
			return 1;
		addr[0] = ip.daddr;
		off = ip.ihl * 4;
	}
	if (bpf_skb_load_bytes(skb, off, &udp, sizeof(udp)))
		return 1;
	off += sizeof(udp);
	n = skb->len;
	if (n < off + 8 + 3) /* a frame header and at least "1\r\n" */
		return 1;
	n -= off;
	if (n > sizeof(head))
		n = sizeof(head);
	if (n < 11 || bpf_skb_load_bytes(skb, off, head, n))
		return 1;
	santa_mc_udp_reply_frame(svc->mc_domain, ipv6, addr, udp.dest, head, n);
	if (!head[2] && !head[3]) { /* a reply's first frame ends its request's claim */
		struct santa_mc_udp_key k = {};

		santa_mc_udp_client(&k, svc->mc_domain, ipv6, addr, udp.dest, *(__u16 *)head);
		santa_mc_fill_reply(skb, &k, off, skb->len - off, santa_mc_value_reply(head, n));
	}
	return 1;
}

/* What user space passes santa_mc_settle_domain. */
struct santa_mc_settle_args {
	__u32 domain;
};

/* Ends the hold of a domain whose time has passed (guard.h,
 * santa_mc_settle), for user space: Generation runs it (a test run) when
 * it finds a hold past, so that a domain no guard was read of since does
 * not stay held. */
SEC("syscall")
int santa_mc_settle_domain(struct santa_mc_settle_args *args)
{
	struct santa_mc_domain *dom = santa_mc_domain_of(args->domain);

	if (dom)
		santa_mc_settle(dom, args->domain);
	return 0;
}

/* Keep the enums in BTF, so bpf2go generates their Go constants. */
const enum santa_path *unused_santa_path __attribute__((unused));
const enum santa_service_counter *unused_santa_service_counter __attribute__((unused));
const enum santa_meta_verdict *unused_santa_meta_verdict __attribute__((unused));
const enum santa_rule_class *unused_santa_rule_class __attribute__((unused));
const enum santa_slot_layout *unused_santa_slot_layout __attribute__((unused));
const enum santa_index_layout *unused_santa_index_layout __attribute__((unused));
const enum santa_addr_kind *unused_santa_addr_kind __attribute__((unused));
const enum santa_limit *unused_santa_limit __attribute__((unused));
const enum santa_learn_layout *unused_santa_learn_layout __attribute__((unused));
/* And the learning structures user space reads (the config is a map value). */
const struct santa_learn_sample *unused_santa_learn_sample __attribute__((unused));
const enum santa_default_capacity *unused_santa_default_capacity __attribute__((unused));
/* santa_tcp's, but every object shares santa_abi.h and one Go file has them all. */
const enum santa_sockopt *unused_santa_sockopt __attribute__((unused));
const struct santa_mc_settle_args *unused_santa_mc_settle_args __attribute__((unused));

char LICENSE[] SEC("license") = "Dual BSD/GPL";
