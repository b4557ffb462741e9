// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * santa_tcp_handover: a starting santad takes the TCP connections an
 * earlier process's data plane served into its own (docs/tcp.md,
 * "Restarts"). Without it they would stay in the earlier sockhash, run the
 * earlier programs and be answered by the earlier rules for as long as they
 * live: rules changed or deleted later would not reach them. The same
 * program releases an unregistered listener's connections from the
 * sockhash.
 *
 * A TCP iterator (iter/tcp) runs this program on every TCP socket of one
 * network namespace, with the socket's lock owned: meanwhile no segment is
 * received (they wait in the backlog), the verdict does not run and the
 * sockmap worker cannot send. Leaving a sockhash drops the socket's psock
 * with whatever its queues hold, so a connection moves only when they are
 * empty: no bounced request waiting for its reply, no passed data unread,
 * no task blocked in a call that holds the old psock.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "santa_abi.h"
#include "maps.h"
#include "tcp_maps.h"
#include "sock_waiters.h"

/* The earlier process's maps (user space passes them in). Of an entry of
 * prev_connections only its head is read or written (SANTA_CONN_HEAD_SIZE):
 * user space sets the map's value size to the earlier one's. */
SANTA_CONNECTIONS_MAP(prev_connections);
SANTA_TCP_CONNS_MAP(prev_tcp_conns);

/* Set by user space to take only the connections of one listener (its
 * cookie), 0 for all: a listener that is unregistered releases its
 * connections through this program with its own maps as the "earlier"
 * ones. */
volatile const __u64 santa_only_listener;

/* Set by user space for its last pass: a connection still busy stays in the
 * earlier data plane, but passes everything from then on, so that it is
 * never answered by rules that may have changed since. */
volatile const __u8 santa_give_up;

/* Set by user space when the "earlier" maps are this data plane's own (a
 * listener's release): a connection that leaves them gives its place back
 * to its owner here. An earlier process's places are its own. */
volatile const __u8 santa_own_maps;

/* Whether the socket's psock, if any, holds nothing: no request waiting for
 * the sockmap worker, no message waiting for the application. */
static __always_inline int santa_psock_empty(struct sock *sk)
{
	struct sk_psock *psock = santa_psock(sk);

	if (!psock)
		return 1;
	return psock->ingress_skb.qlen == 0 && (__u64)psock->ingress_msg.next == (__u64)&psock->ingress_msg;
}

/* Moves an idle connection: out of the earlier sockhash (its psock goes),
 * into this one's with its state, if its listener is registered here, the
 * kernel still answers it and the listener's uid has a connection place
 * left. Otherwise it is the application's alone. */
static __always_inline __u8 santa_move(struct sock *sk, __u64 cookie, struct santa_conn *prev)
{
	struct santa_conn conn = {};
	struct santa_service *svc;

	/* Only the head: the earlier process's entries may be shorter. The
	 * rest, its open reply, is none: the connection is idle (its last
	 * reply was sent whole), and a slot is the earlier data plane's. */
	__builtin_memcpy(&conn, prev, SANTA_CONN_HEAD_SIZE);

	bpf_map_delete_elem(&prev_tcp_conns, &cookie);
	if (!bpf_map_delete_elem(&prev_connections, &cookie) && santa_own_maps)
		santa_place_give(conn.owner, 0);
	svc = bpf_map_lookup_elem(&services, &conn.listener);
	if (conn.flags & SANTA_CONN_PASSING || !svc)
		return SANTA_HANDOVER_RELEASED;
	conn.owner = svc->conn_owner;
	if (!santa_place_take(conn.owner, 0))
		return SANTA_HANDOVER_RELEASED;
	if (bpf_map_update_elem(&connections, &cookie, &conn, BPF_NOEXIST)) {
		santa_place_give(conn.owner, 0);
		return SANTA_HANDOVER_RELEASED;
	}
	if (bpf_map_update_elem(&tcp_conns, &cookie, sk, BPF_NOEXIST)) {
		/* Full, or no longer established. */
		santa_conn_delete(cookie);
		return SANTA_HANDOVER_RELEASED;
	}
	return SANTA_HANDOVER_MOVED;
}

SEC("iter/tcp")
int santa_tcp_handover(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	struct santa_conn *prev;
	struct tcp_sock *tp;
	struct sock *sk;
	__u64 cookie;
	__u8 result;

	if (!skc)
		return 0;
	tp = bpf_skc_to_tcp_sock(skc);
	if (!tp)
		return 0;
	sk = (struct sock *)tp;
	cookie = bpf_get_socket_cookie(sk);
	prev = bpf_map_lookup_elem(&prev_connections, &cookie);
	if (!prev || (santa_only_listener && prev->listener != santa_only_listener))
		return 0;
	if (!prev->pending && santa_psock_empty(sk) && !santa_task_blocked_on(sk)) {
		result = santa_move(sk, cookie, prev);
	} else if (santa_give_up) {
		prev->flags |= SANTA_CONN_PASSING;
		result = SANTA_HANDOVER_LEFT;
	} else {
		result = SANTA_HANDOVER_BUSY;
	}
	bpf_seq_write(ctx->meta->seq, &result, sizeof(result));
	return 0;
}

/* Keep the enum in BTF, so bpf2go generates its Go constants. */
const enum santa_handover_result *unused_santa_handover_result __attribute__((unused));

char LICENSE[] SEC("license") = "Dual BSD/GPL";
