/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/* What the kernel holds for a socket, as Santa's programs read it: whether
 * a task sleeps in a blocking call on it (the verdict passes what arrives
 * meanwhile, the handover leaves such a connection alone), and its sockmap
 * psock (what the FIN hold and the handover look into). */
#ifndef SANTA_SOCK_WAITERS_H
#define SANTA_SOCK_WAITERS_H

#include <bpf/bpf_core_read.h>

extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;
/* The wake function of a task blocked in a receive (or send) call. */
extern void woken_wake_function __ksym;

/* How many waiters of a socket are looked at; beyond, a blocked task is
 * assumed (nginx has one: its epoll instance). */
#define SANTA_MAX_WAITERS 8

/* Whether a task sleeps on the socket's wait queue in a blocking call
 * (woken_wake_function; epoll and poll waiters have their own). */
static __always_inline int santa_task_blocked_on(struct sock *sk)
{
	struct socket_wq *wq = bpf_rdonly_cast(sk->sk_wq, bpf_core_type_id_kernel(struct socket_wq));
	struct list_head *head, *pos;
	struct wait_queue_entry *w;
	int i;

	if (!wq)
		return 0;
	head = &wq->wait.head;
	pos = head->next;
	for (i = 0; i < SANTA_MAX_WAITERS; i++) {
		if ((__u64)pos == (__u64)head)
			return 0;
		w = bpf_rdonly_cast(container_of(pos, struct wait_queue_entry, entry),
				    bpf_core_type_id_kernel(struct wait_queue_entry));
		if ((__u64)w->func == (__u64)&woken_wake_function)
			return 1;
		pos = pos->next;
	}
	return 1;
}

/* The socket's psock (read only), or NULL: sk_user_data without its flag
 * bits (SK_USER_DATA_NOCOPY, _BPF, _PSOCK). */
static __always_inline struct sk_psock *santa_psock(struct sock *sk)
{
	__u64 addr = (__u64)sk->sk_user_data & ~7ULL;

	if (!addr)
		return NULL;
	return bpf_rdonly_cast((void *)addr, bpf_core_type_id_kernel(struct sk_psock));
}

#endif /* SANTA_SOCK_WAITERS_H */
