// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
/*
 * santa_tcp: TCP requests that match one of their listener's rules are
 * answered by the kernel on the application's own connection (docs/tcp.md).
 *  - santa_tcp_sockops (cgroup sock_ops) puts connections accepted on a
 *    registered listener into the tcp_conns sockhash, and deletes their
 *    state when they close; santa_tcp_release (cgroup sock_release) does
 *    the latter for connections user space adopted;
 *  - santa_tcp_verdict (sk_skb) matches each received segment: a match goes,
 *    unmodified, to the connection's own egress; everything else passes to
 *    the application, and from then on the whole connection does;
 *  - santa_tcp_reply (sk_msg) turns a bounced request into its reply on the
 *    way out, so that TCP's receive and send bookkeeping stay the kernel's;
 *  - santa_tcp_accepted (cgroup setsockopt) and santa_tcp_get{peer,sock}name
 *    (cgroup sock_addr) run the verdict on what came before accept(), at
 *    the application's first such call on the connection;
 *  - santa_tcp_hold_fin (cgroup skb ingress) keeps a client's FIN from
 *    overtaking the replies the kernel still has to send.
 * Maps shared with santa_udp (services, rules, counters) are the same maps:
 * user space loads this object with them.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>

/* The verdict and reply programs also run in tasks (maps.h, santa_add). */
#define SANTA_TASK_CONTEXT
#include "santa_abi.h"
#include "maps.h"
#include "match.h"
#include "tcp_maps.h"
#include "tcp_reply.h"
#include "mc_tcp.h"
#include "sock_waiters.h"

#define AF_INET 2
#define AF_INET6 10
#define PF_KTHREAD 0x00200000
#define SOL_SOCKET 1
#define SO_RCVLOWAT 18
#define SOL_TCP 6
#define TCP_NODELAY 1
#define TCPHDR_FIN 0x01
#define RCV_SHUTDOWN 1
#define IPPROTO_TCP 6
#define EBUSY 16

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

/* The cookie of the listener that accepted a new connection, or 0: the
 * listener's own storage, which the kernel copied into the connection
 * when it cloned the listener (BPF_F_CLONE), if the listener was
 * registered then. Not an address: another socket on the same address
 * and port (a wildcard one, an IPV6_V6ONLY one, one that listens after a
 * registered one stopped) is another listener. The copy is deleted once
 * read: the connection is no listener (santa_tcp_sockops, listen). */
static __always_inline __u64 santa_listener_of(struct bpf_sock_ops *skops)
{
	struct bpf_sock *sk = skops->sk;
	__u64 *stored, listener;

	if (!sk)
		return 0;
	stored = bpf_sk_storage_get(&registered_listeners, sk, 0, 0);
	if (!stored)
		return 0;
	listener = *stored;
	bpf_sk_storage_delete(&registered_listeners, sk);
	return listener;
}

/* Whether a process holds the socket of a sock_ops callback. */
static __always_inline int santa_sock_held(struct bpf_sock_ops *skops)
{
	struct bpf_sock_ops_kern *k = bpf_cast_to_kern_ctx(skops);
	struct sock *sk = bpf_rdonly_cast(k->sk, bpf_core_type_id_kernel(struct sock));

	return sk->sk_socket != NULL;
}

/* Takes the places a new connection of svc needs from the listener's uid
 * (santa_place_take): its state's, and a memcached one's stream's. 0, and
 * none taken, if the uid holds every place its quota allows. */
static __always_inline int santa_conn_places_take(struct santa_conn *conn)
{
	if (!santa_place_take(conn->owner, 0))
		return 0;
	if (conn->flags & SANTA_CONN_MC && !santa_place_take(conn->owner, 1)) {
		santa_place_give(conn->owner, 0);
		return 0;
	}
	return 1;
}

/* A connection of a registered listener was accepted by the kernel: its
 * segments go through the verdict from the first one on, if the
 * listener's uid has a connection place left (else the application has
 * it alone, as beyond MaxConnections). */
static __always_inline void santa_conn_new(struct bpf_sock_ops *skops)
{
	struct santa_conn conn = {};
	struct santa_service *svc;
	__u64 listener, cookie;
	int one = 1;

	listener = santa_listener_of(skops);
	if (!listener)
		return;
	/* Registered still (unregistering leaves the listener's storage:
	 * user space holds no fd of it to delete it with). */
	svc = bpf_map_lookup_elem(&services, &listener);
	if (!svc || svc->proto != IPPROTO_TCP)
		return;
	conn.listener = listener;
	conn.owner = svc->conn_owner;
	if (svc->parser == SANTA_PARSER_MEMCACHED)
		conn.flags |= SANTA_CONN_MC;
	if (!santa_conn_places_take(&conn)) {
		santa_count_tcp_path(SANTA_TCP_CONN_QUOTA);
		return;
	}
	cookie = bpf_get_socket_cookie(skops);
	if (bpf_map_update_elem(&connections, &cookie, &conn, BPF_NOEXIST)) {
		santa_place_give(conn.owner, 0);
		goto full;
	}
	if (bpf_sock_hash_update(skops, &tcp_conns, &cookie, BPF_NOEXIST)) {
		santa_conn_delete(cookie);
		goto full;
	}
	/* The state callback deletes the connection's entry when it closes,
	 * also when the application never accepted it. */
	bpf_sock_ops_cb_flags_set(skops, BPF_SOCK_OPS_STATE_CB_FLAG);
	/* Its stream is parsed from its first byte on. */
	if (conn.flags & SANTA_CONN_MC && santa_mc_conn_start(cookie, svc->mc_domain, 0, conn.owner))
		santa_place_give(conn.owner, 1);
	/* A reply is a whole message: Nagle's algorithm would hold a short
	 * one back until the previous reply is acknowledged, which the client
	 * delays until its next request (40 ms per request). Servers set this
	 * themselves (nginx on keep-alive), but only once they answered. */
	bpf_setsockopt(skops, SOL_TCP, TCP_NODELAY, &one, sizeof(one));
	santa_count_tcp_path(SANTA_TCP_NEW_CONN);
	return;

full:
	if (conn.flags & SANTA_CONN_MC)
		santa_place_give(conn.owner, 1);
	santa_count_tcp_path(SANTA_TCP_CONN_FULL);
}

SEC("sockops")
int santa_tcp_sockops(struct bpf_sock_ops *skops)
{
	struct bpf_sock *sk;
	__u64 cookie;

	switch (skops->op) {
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		santa_conn_new(skops);
		break;
	case BPF_SOCK_OPS_TCP_LISTEN_CB:
		/* A socket that starts listening (again: after shutdown or
		 * connect(AF_UNSPEC) stopped it) is not the listener user
		 * space registered, nor is a connection that inherited a
		 * registered listener's storage without sock_ops seeing it
		 * established: its connections are not Santa's. */
		sk = skops->sk;
		if (sk)
			bpf_sk_storage_delete(&registered_listeners, sk);
		break;
	case BPF_SOCK_OPS_STATE_CB:
		if (skops->args[1] == BPF_TCP_CLOSE) {
			cookie = bpf_get_socket_cookie(skops);
			santa_conn_delete(cookie);
			/* A memcached connection that no process holds (never
			 * accepted, or released already) ends here; one that
			 * memcached holds ends when memcached releases it: until
			 * then it may still act on what it read. */
			if (!santa_sock_held(skops))
				santa_tcp_mc_release(cookie);
		}
		break;
	}
	return 1;
}

/* A socket is being released: if it is a connection under a registered
 * listener, its state goes with it. The state callback above sees the end
 * of every connection sock_ops added, even one never accepted; but one
 * that AdoptConnection added from user space never asked for that callback
 * (only sock_ops may), and is seen here, when the application closes it. */
SEC("cgroup/sock_release")
int santa_tcp_release(struct bpf_sock *sk)
{
	__u64 cookie;

	if (sk->protocol != IPPROTO_TCP)
		return 1;
	cookie = bpf_get_socket_cookie(sk);
	santa_conn_delete(cookie);
	/* The process is done with the connection: so is memcached with its
	 * writes. */
	santa_tcp_mc_release(cookie);
	return 1; /* sock_release cannot veto; 1 is "continue" */
}

/* The rule that answers a segment of plen bytes (in s): the matcher's
 * choice, if its condition ends where the segment ends, so that the
 * segment is exactly one request, and its guard (if any) lets it. Verdict
 * and reply both ask. */
static __always_inline struct santa_rule *santa_tcp_match(struct santa_scratch *s, struct santa_service *svc,
							  __u32 plen)
{
	struct santa_rule *rule = santa_match(s, svc, plen);

	if (!rule || rule->cond_off + rule->cond_len != plen || rule->reply_len == 0 || !santa_guard_ok(rule))
		return NULL;
	return rule;
}

/* The kernel's socket of a segment (read only), or NULL. */
static __always_inline struct sock *santa_skb_sock(struct __sk_buff *skb)
{
	struct sk_buff *kskb = bpf_cast_to_kern_ctx(skb);

	if (!kskb->sk)
		return NULL;
	return bpf_rdonly_cast(kskb->sk, bpf_core_type_id_kernel(struct sock));
}

/* Sets flags on a connection. Atomically: the verdict (a softirq, or the
 * task that releases the socket's lock) and the reply program (the sockmap
 * worker) run at once on different CPUs, and a plain read-modify-write of
 * one could undo the other's flag (a lost SANTA_CONN_FELL_BACK lets a
 * pending reply overtake the application's). */
static __always_inline void santa_conn_set(struct santa_conn *conn, __u32 flags)
{
	__sync_fetch_and_or(&conn->flags, flags);
}

/* Whether the connection has received data out of order since it was
 * attached: such data (and a retransmission that filled the gap) passes. */
static __always_inline int santa_saw_out_of_order(struct __sk_buff *skb, struct santa_conn *conn)
{
	struct sock *sk = santa_skb_sock(skb);
	struct tcp_sock *tp;

	if (!sk)
		return 1;
	tp = bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct tcp_sock));
	return tp->rcv_ooopack != conn->ooopack;
}

/* Whether the application is inside a receive call on the connection, where
 * a bounce would go wrong (Linux 6.18, tcp_bpf_recvmsg_parser): the call
 * reads copied_seq, then may run the verdict itself (on data that arrived
 * before accept()) or sleep (a blocking receive), and writes copied_seq
 * back at its end, undoing the advance a bounced request made. The request
 * would stay counted as unread for good (Recv-Q, POLLIN while recv finds
 * nothing), and a blocking receive returns EAGAIN. Such a segment passes.
 * Inside the application's call, the socket's lock is owned; the one other
 * way the verdict runs with the lock owned is the lock's release working
 * through the segments that arrived meanwhile (the backlog: its list taken,
 * its length not yet reset), which is after the call wrote copied_seq; the
 * one other call is santa_answer_early_requests's, which does not write it. */
static __always_inline int santa_app_receiving(struct __sk_buff *skb, struct santa_conn *conn)
{
	struct sock *sk = santa_skb_sock(skb);

	if (!sk)
		return 1;
	if (sk->sk_lock.owned && !(sk->sk_backlog.len && !sk->sk_backlog.head) &&
	    !(conn->flags & SANTA_CONN_ACCEPTING))
		return 1;
	return santa_task_blocked_on(sk);
}

/* Whether the segment carries the client's FIN too (a request sent
 * together with shutdown(SHUT_WR)), or the FIN came already (request and
 * FIN both came before accept()): the application sees
 * the end of the stream at once, and may close before a bounce is sent
 * (docs/tcp.md, "Half-close"), so the application answers it. */
static __always_inline int santa_stream_ends(struct __sk_buff *skb)
{
	struct sk_buff *kskb = bpf_cast_to_kern_ctx(skb);
	struct tcp_skb_cb *cb = bpf_rdonly_cast(kskb->cb, bpf_core_type_id_kernel(struct tcp_skb_cb));
	struct sock *sk = santa_skb_sock(skb);

	if (cb->tcp_flags & TCPHDR_FIN || !sk)
		return 1;
	return sk->sk_shutdown & RCV_SHUTDOWN;
}

/* Passes a segment to the application, and with it the rest of the
 * connection: a later request answered here could overtake the
 * application's reply to this one. svc is NULL when the listener's
 * service is gone: no service counts it. */
static __always_inline int santa_verdict_pass(struct santa_conn *conn, struct santa_service *svc, __u32 path)
{
	santa_conn_set(conn, SANTA_CONN_PASSING);
	if (svc)
		santa_count_service(svc->id, SANTA_SVC_PASSED);
	santa_count_tcp_path(path);
	return SK_PASS;
}

/* The verdict on a request the connection may have answered here, read
 * into s. */
static __always_inline int santa_verdict_request(struct __sk_buff *skb, struct santa_conn *conn,
						 struct santa_service *svc, __u64 *cookie, struct santa_scratch *s,
						 __u32 plen)
{
	struct santa_rule *rule;

	if (bpf_skb_load_bytes(skb, 0, s->buf, plen))
		return santa_verdict_pass(conn, svc, SANTA_TCP_ERROR);
	rule = santa_tcp_match(s, svc, plen);
	if (!rule)
		return santa_verdict_pass(conn, svc, SANTA_TCP_NO_MATCH);
	if (conn->pending >= SANTA_MAX_PENDING)
		return santa_verdict_pass(conn, svc, SANTA_TCP_BUSY);
	if (santa_app_receiving(skb, conn))
		return santa_verdict_pass(conn, svc, SANTA_TCP_APP_RECEIVING);
	if (santa_stream_ends(skb))
		return santa_verdict_pass(conn, svc, SANTA_TCP_FIN);
	/* One linear skb is sent in one piece: the reply program sees the
	 * whole request in one message. */
	if (bpf_skb_pull_data(skb, plen))
		return santa_verdict_pass(conn, svc, SANTA_TCP_ERROR);
	if (bpf_sk_redirect_hash(skb, &tcp_conns, cookie, 0) != SK_PASS)
		return santa_verdict_pass(conn, svc, SANTA_TCP_ERROR);
	__sync_fetch_and_add(&conn->pending, 1);
	santa_count_tcp_path(SANTA_TCP_BOUNCED);
	return SK_PASS;
}

SEC("sk_skb/verdict")
int santa_tcp_verdict(struct __sk_buff *skb)
{
	__u64 cookie = bpf_get_socket_cookie(skb);
	struct santa_verdict_buffer *buf;
	struct santa_service *svc;
	struct santa_conn *conn;
	__u32 plen = skb->len;
	int verdict;

	conn = bpf_map_lookup_elem(&connections, &cookie);
	if (!conn) {
		santa_count_tcp_path(SANTA_TCP_NOT_CONN);
		return SK_PASS;
	}
	if (plen == 0) {
		santa_count_tcp_path(SANTA_TCP_EMPTY);
		return SK_PASS;
	}
	svc = bpf_map_lookup_elem(&services, &conn->listener);
	if (!svc)
		return santa_verdict_pass(conn, NULL, SANTA_TCP_NO_SERVICE);
	/* A memcached service's writes invalidate before anything else, in
	 * every state of the connection. */
	if (svc->parser == SANTA_PARSER_MEMCACHED)
		santa_mc_request(skb, conn, svc->mc_domain, cookie);
	if (conn->flags & SANTA_CONN_PASSING)
		return santa_verdict_pass(conn, svc, SANTA_TCP_PASSING);
	if (plen > SANTA_MAX_TCP_REQUEST)
		return santa_verdict_pass(conn, svc, SANTA_TCP_TOO_LONG);
	if (santa_saw_out_of_order(skb, conn))
		return santa_verdict_pass(conn, svc, SANTA_TCP_OUT_OF_ORDER);
	buf = santa_take_verdict_buffer();
	if (!buf)
		return santa_verdict_pass(conn, svc, SANTA_TCP_NO_BUFFER);
	verdict = santa_verdict_request(skb, conn, svc, &cookie, &buf->request, plen);
	santa_give(&buf->busy);
	return verdict;
}

/* Whether the message is sent by the socket's sockmap worker, a kernel
 * thread; the application's own sends come from the application. */
static __always_inline int santa_from_worker(void)
{
	struct task_struct *task = bpf_get_current_task_btf();

	return task->flags & PF_KTHREAD;
}

/* Whether the message is a request the verdict bounced. */
static __always_inline int santa_bounced(struct santa_conn *conn)
{
	return conn->pending > 0 && santa_from_worker();
}

/* sk_msg and sockopt programs may not call bpf_get_socket_cookie: the
 * cookie is read from the socket (a connection of Santa's has one: sock_ops
 * or user space asked for it). */
static __always_inline __u64 santa_sock_cookie(struct bpf_sock *sk)
{
	struct sock *ksk;

	if (!sk)
		return 0;
	ksk = bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct sock));
	return ksk->__sk_common.skc_cookie.counter;
}

/* The connection's TCP state, read only. */
static __always_inline struct tcp_sock *santa_msg_tcp_sock(struct sk_msg_md *msg)
{
	return bpf_rdonly_cast(msg->sk, bpf_core_type_id_kernel(struct tcp_sock));
}

/* The verdict on a message made a reply (or the rest of one): sent on the
 * connection, as a redirect to its own egress rather than a pass. The
 * sockmap worker's send does not wait; when TCP takes only part of a
 * passed message, the kernel keeps the pass as its verdict on the
 * connection's next message (tcp_bpf_send_verdict leaves psock->eval set
 * when the send fails): the worker's second try of the same request would
 * go out as it is, unseen by this program. A redirect's verdict is
 * cleared before its send, so that second try comes here, and the rest of
 * the reply is built (santa_reply_rest). */
static __always_inline int santa_send_reply(struct sk_msg_md *msg, __u64 cookie)
{
	return bpf_msg_redirect_hash(msg, &tcp_conns, &cookie, 0);
}

/* Whether the socket's sockmap worker is at work (between the start and
 * the end of a pass over its queue). */
static __always_inline int santa_worker_busy(struct sk_msg_md *msg)
{
	struct sk_psock *psock = santa_psock(bpf_rdonly_cast(msg->sk, bpf_core_type_id_kernel(struct sock)));

	return psock && psock->work_mutex.owner.counter;
}

/* Notes the reply just built into the message, which TCP may take only
 * part of (santa_open_reply). Nothing else is written to the connection
 * before TCP has taken all of it: a message the application sends
 * meanwhile carries the rest in front of it (santa_tcp_reply), also in
 * the moment the redirect drops the socket's lock before its send. */
static __always_inline void santa_reply_opened(struct sk_msg_md *msg, struct santa_conn *conn,
					       struct santa_rule *rule, __u32 plen)
{
	__u32 *gen = santa_slot_gen(rule->slot);

	conn->reply.seq = santa_msg_tcp_sock(msg)->write_seq;
	conn->reply.slot = rule->slot;
	conn->reply.gen = gen ? *(volatile __u32 *)gen : 0;
	conn->reply.request_len = plen;
	conn->reply.rest_by_app = 0;
	conn->reply.sending = 1;
	conn->reply.len = rule->reply_len;
}

/* Makes the message empty and sends it: nothing leaves, and the worker
 * counts the request it held as sent. */
static __always_inline int santa_send_nothing(struct sk_msg_md *msg)
{
	if (bpf_msg_pop_data(msg, 0, msg->size, 0)) {
		santa_count_tcp_path(SANTA_TCP_REPLY_BROKEN);
		return SK_DROP;
	}
	return SK_PASS;
}

/* How many bytes of the connection's last reply TCP has not taken: the
 * send that queued it ended part way. 0 once it took all of them (and the
 * record is closed, before anything else is written: write_seq cannot
 * wrap around back into the reply). */
static __always_inline __u32 santa_reply_unsent(struct sk_msg_md *msg, struct santa_conn *conn)
{
	__u32 taken;

	if (!conn->reply.len)
		return 0;
	taken = santa_msg_tcp_sock(msg)->write_seq - conn->reply.seq;
	if (taken < conn->reply.len)
		return conn->reply.len - taken;
	conn->reply.len = 0;
	return 0;
}

/* Copies the request whose reply is open, len bytes, to s: the head of the
 * socket's sockmap queue, where it stays until the worker has sent all of
 * it, made linear by the verdict (bpf_skb_pull_data). The message itself
 * may hold only its end, or be the application's. */
static __always_inline int santa_worker_request(struct sk_msg_md *msg, __u32 len, struct santa_scratch *s)
{
	struct sk_psock *psock = santa_psock(bpf_rdonly_cast(msg->sk, bpf_core_type_id_kernel(struct sock)));
	struct sk_buff *skb;

	if (!psock || !psock->ingress_skb.qlen || len == 0 || len > SANTA_MAX_TCP_REQUEST)
		return -1;
	skb = bpf_rdonly_cast(psock->ingress_skb.next, bpf_core_type_id_kernel(struct sk_buff));
	if (skb->len != len || skb->data_len)
		return -1;
	return bpf_probe_read_kernel(s->buf, len, skb->data) ? -1 : 0;
}

/* The sockmap worker sends a request again whose reply TCP took only part
 * of (santa_open_reply), or the application sends a message first: the
 * message becomes the rest of that reply, from the same rule body (the
 * application's with its own bytes after it). If the body's slot was
 * freed since (its rule replaced or deleted, and a grace period over), the
 * rest cannot be known: the message is dropped, and so is every later one
 * (the kernel keeps the verdict), and the worker ends the connection with
 * an error (the client has part of a reply; nothing it reads after could
 * be trusted). */
static __always_inline int santa_reply_rest(struct sk_msg_md *msg, struct santa_conn *conn, __u64 cookie,
					    __u32 unsent, struct santa_reply_memory *mem, int worker)
{
	struct santa_open_reply *open = &conn->reply;
	__u32 *gen = santa_slot_gen(open->slot), cap = 0;
	struct santa_rule *body;

	if (!mem || !gen || *(volatile __u32 *)gen != open->gen)
		goto broken;
	body = santa_rule_at(open->slot, &cap);
	if (!body || body->reply_len != open->len || open->len > cap || unsent > open->len)
		goto broken;
	if (body->ncopies && santa_worker_request(msg, open->request_len, &mem->request))
		goto broken;
	/* The worker's message (the request, or its end) is replaced; the
	 * application's is kept, after the rest. */
	if (santa_msg_build_reply(msg, body, mem, open->len - unsent, worker ? msg->size : 0))
		goto broken;
	/* Read again: the slot may have been freed and written while the
	 * body was copied. */
	if (*(volatile __u32 *)gen != open->gen)
		goto broken;
	santa_count_tcp_path(worker ? SANTA_TCP_REPLY_REST : SANTA_TCP_REST_BEFORE_APP);
	if (worker)
		conn->reply.sending = 1;
	return santa_send_reply(msg, cookie);

broken:
	santa_count_tcp_path(SANTA_TCP_REPLY_BROKEN);
	return SK_DROP;
}

/* The request, bounced by the verdict, becomes its reply; or, if that
 * cannot be, goes to the application after all. */
static __always_inline int santa_reply(struct sk_msg_md *msg, struct santa_conn *conn, __u64 cookie,
				       struct santa_reply_memory *mem)
{
	struct santa_service *svc;
	struct santa_rule *rule;
	__u32 plen = msg->size;
	int built;

	/* Matched again, not taken from the verdict: the rules may have
	 * changed since, and a slot read now may hold another rule. A request
	 * bounced before this one went to the application: so does this one,
	 * behind it. */
	svc = bpf_map_lookup_elem(&services, &conn->listener);
	if (!svc || conn->flags & SANTA_CONN_FELL_BACK || !mem || santa_msg_load(msg, &mem->request, plen))
		goto fallback;
	rule = santa_tcp_match(&mem->request, svc, plen);
	if (!rule)
		goto fallback;
	built = santa_msg_build_reply(msg, rule, mem, 0, plen);
	if (built > 0)
		goto fallback;
	if (built < 0) {
		/* Neither request nor reply: nothing can be sent. The sockmap
		 * worker reports the error on the socket, as for any failed
		 * redirect. Not seen in testing; counted. */
		santa_count_tcp_path(SANTA_TCP_REPLY_BROKEN);
		return SK_DROP;
	}
	santa_reply_opened(msg, conn, rule, plen);
	santa_count_service(svc->id, SANTA_SVC_MATCHED);
	santa_count_rule(rule->rule_id, rule->reply_len);
	santa_count_tcp_path(SANTA_TCP_ANSWERED);
	if (conn->flags & SANTA_CONN_MC)
		santa_mc_kernel_reply(cookie);
	return santa_send_reply(msg, cookie);

fallback:
	/* The request, unchanged, goes to the application after all, in its
	 * place in the stream; the connection is the application's from now. */
	santa_conn_set(conn, SANTA_CONN_PASSING | SANTA_CONN_FELL_BACK);
	if (svc)
		santa_count_service(svc->id, SANTA_SVC_PASSED);
	santa_count_tcp_path(SANTA_TCP_REPLY_FALLBACK);
	return bpf_msg_redirect_hash(msg, &tcp_conns, &cookie, BPF_F_INGRESS);
}

/* The reply program's per-CPU memory, now taken, or NULL if a program
 * this one preempted is using it. */
static __always_inline struct santa_reply_memory *santa_take_reply_memory(void)
{
	struct santa_reply_memory *mem;
	__u32 zero = 0;

	mem = bpf_map_lookup_elem(&reply_memory, &zero);
	if (mem && !santa_take(&mem->busy))
		mem = NULL;
	return mem;
}

SEC("sk_msg")
int santa_tcp_reply(struct sk_msg_md *msg)
{
	__u64 cookie = santa_sock_cookie(msg->sk);
	struct santa_reply_memory *mem;
	struct santa_conn *conn;
	int verdict = SK_PASS, worker;
	__u32 unsent;

	conn = bpf_map_lookup_elem(&connections, &cookie);
	if (!conn)
		return SK_PASS;
	worker = santa_from_worker();
	if (worker)
		conn->reply.sending = 0; /* its last message's send has ended */
	unsent = santa_reply_unsent(msg, conn);
	if (unsent && !worker && conn->reply.sending && santa_worker_busy(msg)) {
		/* The worker may hold the reply (or its rest) between the
		 * redirect's dropping of the socket's lock and its send: a
		 * rest here would be sent twice, and the application's bytes
		 * alone would land inside the reply. Its message is dropped,
		 * and with it the connection's later ones (the kernel keeps
		 * the verdict): the client gets the reply, then the end. */
		santa_count_tcp_path(SANTA_TCP_REPLY_BROKEN);
		return SK_DROP;
	}
	if (unsent) {
		/* The worker's next try of the request becomes the rest of
		 * the reply; a message the application sends first (cut by
		 * the send buffer, or in the moment the redirect drops the
		 * socket's lock) gets it in front of its own bytes, which
		 * would otherwise land inside the reply. A refusal cannot be
		 * had: the kernel would keep a drop as its verdict on every
		 * later message (as it keeps a pass, santa_send_reply). */
		conn->reply.rest_by_app = !worker;
		mem = santa_take_reply_memory();
		verdict = santa_reply_rest(msg, conn, cookie, unsent, mem, worker);
		if (mem)
			santa_give(&mem->busy);
		return verdict;
	}
	if (worker && conn->reply.rest_by_app) {
		/* The application's message carried the rest: the request
		 * whose reply it was, which the worker still holds, is sent
		 * as nothing. */
		conn->reply.rest_by_app = 0;
		return santa_send_nothing(msg);
	}
	if (!santa_bounced(conn)) {
		/* The application's own message: memcached's replies are
		 * parsed, the rest leaves untouched. */
		if (conn->flags & SANTA_CONN_MC) {
			mem = santa_take_reply_memory();
			santa_mc_reply(msg, cookie, mem ? &mem->request : NULL);
			if (mem)
				santa_give(&mem->busy);
		}
		return SK_PASS;
	}
	__sync_fetch_and_sub(&conn->pending, 1);
	mem = santa_take_reply_memory();
	verdict = santa_reply(msg, conn, cookie, mem);
	if (mem)
		santa_give(&mem->busy);
	return verdict;
}

/* Whether the kernel still has requests of the connection in hand:
 * segments waiting behind the socket's lock for the verdict; requests
 * that came before accept(), while a call that owns the lock may be
 * running the verdict on them (santa_answer_early_requests: a FIN let into
 * the backlog now would be seen right after that call bounced them);
 * bounced requests not yet turned into replies; the sockmap worker at
 * work on its queue (replies being sent, passed requests behind them).
 * The early-request call sets SANTA_CONN_ACCEPTING, takes the request off
 * the receive queue, counts it pending, clears the flag: read here in
 * the reverse order, so that a FIN that arrives meanwhile sees one. */
static __always_inline int santa_requests_in_hand(struct sock *sk, struct santa_conn *conn)
{
	struct sk_psock *psock;

	if (sk->sk_lock.owned &&
	    (*(volatile __u32 *)&conn->flags & SANTA_CONN_ACCEPTING || sk->sk_receive_queue.qlen || sk->sk_backlog.len))
		return 1;
	if (*(volatile __u32 *)&conn->pending)
		return 1;
	psock = santa_psock(sk);
	return psock && (psock->ingress_skb.qlen || psock->work_mutex.owner.counter);
}

/* The client's FIN, dropped before TCP sees it while the kernel still has
 * requests of the connection in hand: TCP would make the end of the stream
 * visible to the application at once (tcp_bpf_recvmsg checks the socket,
 * not the sockmap worker's queue), and an application that closes on it
 * would drop the replies not yet sent (docs/tcp.md, "Half-close"). The
 * client sends the FIN again (its retransmission timer, 200 ms or more on
 * a fast path), and then it passes. Held for SANTA_FIN_HOLD_MS at most. */
SEC("cgroup_skb/ingress")
int santa_tcp_hold_fin(struct __sk_buff *skb)
{
	struct sk_buff *kskb = bpf_cast_to_kern_ctx(skb);
	struct sock *sk = santa_skb_sock(skb);
	struct santa_conn *conn;
	struct tcphdr *th;
	__u64 cookie;
	__u32 now;

	/* Read through the kernel's skb, not with helper calls: this runs on
	 * every packet a socket of the host receives. TCP has set the
	 * transport header by now. */
	if (!sk || sk->sk_protocol != IPPROTO_TCP)
		return 1;
	th = bpf_rdonly_cast(kskb->head + kskb->transport_header, bpf_core_type_id_kernel(struct tcphdr));
	if (!th->fin)
		return 1;
	cookie = bpf_get_socket_cookie(skb);
	conn = bpf_map_lookup_elem(&connections, &cookie);
	if (!conn || !santa_requests_in_hand(sk, conn))
		return 1;
	now = (__u32)(bpf_ktime_get_ns() / 1000000) | 1;
	if (!conn->fin_held)
		conn->fin_held = now;
	else if (now - conn->fin_held > SANTA_FIN_HOLD_MS)
		return 1;
	santa_count_tcp_path(SANTA_TCP_FIN_HELD);
	return 0;
}

/* Requests that arrived before accept() wait in the connection's receive
 * queue, unseen: the verdict cannot run on a socket without a struct
 * socket, and the application's first receive call, which runs it then,
 * must pass them (santa_app_receiving). A call of the application on the
 * connection before that, one that owns the socket's lock and may call
 * bpf_setsockopt, gets them answered: setting SO_RCVLOWAT to its own value
 * runs tcp_data_ready, hence the verdict, in a call that does not write
 * copied_seq back; SANTA_CONN_ACCEPTING tells the verdict whose call it is.
 * setsockopt_on is what bpf_setsockopt takes in the calling program (its
 * socket, or its context). Anywhere else the receive queue of a Santa
 * connection is empty (the verdict takes every segment off it), so the
 * check costs a few loads on the calls of every other socket. */
static __always_inline void santa_answer_early_requests(void *setsockopt_on, struct bpf_sock *sk)
{
	struct santa_conn *conn;
	struct sock *ksk;
	__u64 cookie;
	int lowat;

	if (!sk)
		return;
	ksk = bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct sock));
	if (ksk->sk_protocol != IPPROTO_TCP || !ksk->sk_receive_queue.qlen)
		return;
	cookie = santa_sock_cookie(sk);
	conn = bpf_map_lookup_elem(&connections, &cookie);
	if (!conn)
		return; /* not Santa's */
	lowat = ksk->sk_rcvlowat;
	santa_conn_set(conn, SANTA_CONN_ACCEPTING);
	bpf_setsockopt(setsockopt_on, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof(lowat));
	__sync_fetch_and_and(&conn->flags, ~SANTA_CONN_ACCEPTING);
}

/* santad asks before it adopts a connection (SANTA_SO_ADOPTABLE): EBUSY
 * if a task sleeps in a blocking call on it. A receive that began before
 * the socket joined the sockhash waits in tcp_recvmsg on the receive
 * queue, while the verdict passes what arrives meanwhile (a task is
 * blocked: santa_app_receiving) into the psock's queue, where that
 * receive never looks: the request would be neither answered nor read.
 * The kernel never sees the option. */
static __always_inline int santa_adoptable(struct bpf_sockopt *ctx)
{
	struct bpf_sock *sk = ctx->sk;

	ctx->optlen = -1;
	if (sk && santa_task_blocked_on(bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct sock)))) {
		bpf_set_retval(-EBUSY);
		return 0;
	}
	return 1;
}

/* Any setsockopt: servers set options on a connection they have just
 * accepted (Go's runtime, Redis, asyncio: TCP_NODELAY), before the first
 * receive. SANTA_SO_ACCEPTED is the same for applications that set
 * nothing else: Santa's own option, which the kernel never sees. */
SEC("cgroup/setsockopt")
int santa_tcp_accepted(struct bpf_sockopt *ctx)
{
	if (ctx->level == SANTA_SOL && ctx->optname == SANTA_SO_ADOPTABLE)
		return santa_adoptable(ctx);
	if (ctx->level == SANTA_SOL && ctx->optname == SANTA_SO_ACCEPTED)
		ctx->optlen = -1;
	else
		/* Not ours: the kernel takes the caller's own buffer, as if no
		 * program ran (not a copy, which options over a page would not
		 * fit). */
		ctx->optlen = 0;
	santa_answer_early_requests(ctx->sk, ctx->sk);
	return 1;
}

/* getpeername and getsockname, and above all accept() itself: an accept()
 * that asks for the peer's address (nginx, Go, memcached, Python) gets it
 * from the new socket's getname, which runs the getpeername hooks with the
 * socket locked and its struct socket set. Servers also ask themselves
 * (memcached, asyncio). One program per hook and address family: the
 * kernel attaches a program to the hook it was loaded for only. */
SEC("cgroup/getpeername4")
int santa_tcp_getpeername4(struct bpf_sock_addr *ctx)
{
	santa_answer_early_requests(ctx, ctx->sk);
	return 1;
}

SEC("cgroup/getpeername6")
int santa_tcp_getpeername6(struct bpf_sock_addr *ctx)
{
	santa_answer_early_requests(ctx, ctx->sk);
	return 1;
}

SEC("cgroup/getsockname4")
int santa_tcp_getsockname4(struct bpf_sock_addr *ctx)
{
	santa_answer_early_requests(ctx, ctx->sk);
	return 1;
}

SEC("cgroup/getsockname6")
int santa_tcp_getsockname6(struct bpf_sock_addr *ctx)
{
	santa_answer_early_requests(ctx, ctx->sk);
	return 1;
}

/* Keep the enums in BTF, so bpf2go generates their Go constants. */
const enum santa_tcp_path *unused_santa_tcp_path __attribute__((unused));
const enum santa_conn_flag *unused_santa_conn_flag __attribute__((unused));
const enum santa_tcp_probe *unused_santa_tcp_probe __attribute__((unused));

char LICENSE[] SEC("license") = "Dual BSD/GPL";
