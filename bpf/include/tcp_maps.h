/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/* The maps only the TCP programs use. */
#ifndef SANTA_TCP_MAPS_H
#define SANTA_TCP_MAPS_H

#include "santa_abi.h"
#include "maps.h"
#include "mc_fresh.h"

/* TCP connections under a registered listener, by socket cookie
 * (santa_abi.h). Deleted when the socket closes (santa_tcp.bpf.c: the
 * sock_ops state callback, santa_tcp_release). An earlier process's map
 * has the same shape (santa_handover). */
#define SANTA_CONNECTIONS_MAP(name)                                   \
	struct {                                                      \
		__uint(type, BPF_MAP_TYPE_HASH);                      \
		__uint(map_flags, BPF_F_NO_PREALLOC);                 \
		__uint(max_entries, SANTA_DEFAULT_MAX_CONNS); /* load time */ \
		__type(key, __u64);                                   \
		__type(value, struct santa_conn);                     \
	} name SEC(".maps")

SANTA_CONNECTIONS_MAP(connections);

/* Connections under registered listeners, by socket cookie: the verdict
 * and reply programs are attached to this map. An earlier process's map
 * has the same shape (santa_handover). */
#define SANTA_TCP_CONNS_MAP(name)                                     \
	struct {                                                      \
		__uint(type, BPF_MAP_TYPE_SOCKHASH);                  \
		__uint(max_entries, SANTA_DEFAULT_MAX_CONNS); /* load time */ \
		__type(key, __u64);                                   \
		__type(value, __u64);                                 \
	} name SEC(".maps")

SANTA_TCP_CONNS_MAP(tcp_conns);

/* The connection places each uid holds (santa_abi.h, santa_conn_owner),
 * by the slot user space gives the uid (santa_service.conn_owner; slot 0
 * is no uid's, and has no limit). Sized with the services map at load
 * time: a uid holds a slot while it has listeners or places. Mmapable:
 * user space takes a place as the programs do when it adopts a
 * connection, sets the limits and reads the counts, all atomically. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, SANTA_DEFAULT_MAX_SERVICES + 1); /* load time */
	__type(key, __u32);
	__type(value, struct santa_conn_owner);
} conn_owners SEC(".maps");

/* Registered listening sockets: each one's own cookie, in the socket's
 * own storage, set by user space when it registers the listener (the
 * listener's fd as the key). BPF_F_CLONE: the kernel copies it into each
 * connection the listener accepts (sk_clone_lock), where sock_ops reads it,
 * so that a connection is attributed to exactly the socket that accepted
 * it (santa_listener_of). The map is reused by the next santad
 * (Options.KeepLinks): its restored listeners keep their storage. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC | BPF_F_CLONE);
	__type(key, int);
	__type(value, __u64);
} registered_listeners SEC(".maps");

/* Why each segment and message left the TCP programs as it did. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SANTA_TCP_NPATHS);
	__type(key, __u32);
	__type(value, __u64);
} tcp_path_stats SEC(".maps");

/* One window of a reply, assembled (template, then copied request bytes)
 * before it is written into the message. */
#define SANTA_REPLY_WINDOW 1024

struct santa_window {
	__u8 buf[SANTA_REPLY_WINDOW];
};

/* The reply program's per-CPU memory, its own. It runs in the sockmap
 * worker, a task, with softirqs enabled: a softirq on its CPU (another
 * connection's verdict, a UDP program) can run in the middle of it, and
 * would overwrite the scratch those programs use, so that the reply was
 * built from another request's bytes. And on a preemptible kernel another
 * task's reply program can run in the middle of it: busy tells. */
struct santa_reply_memory {
	__u32 busy;
	struct santa_scratch request;
	struct santa_window window;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct santa_reply_memory);
} reply_memory SEC(".maps");

/* Where the verdict reads a request. It runs in a softirq, and also in a
 * task: when a socket's lock is released, the segments that waited behind
 * it go through the verdict with softirqs enabled, and so do requests that
 * came before accept() (santa_answer_early_requests). A softirq on the same
 * CPU (another connection's verdict) can run in the middle of a task's
 * verdict, and on a preemptible kernel another task can: when the verdict
 * read requests into the UDP programs' scratch, such a run overwrote the
 * request under the verdict it interrupted, which then passed the request,
 * and its connection, to the application. Each run takes the first free
 * buffer; nesting deeper than this passes. */
#define SANTA_VERDICT_BUFFERS 3

struct santa_verdict_buffer {
	__u32 busy;
	struct santa_scratch request;
	struct santa_mc_sets sets; /* a memcached segment's sets (mc_capture.h) */
};

struct santa_verdict_memory {
	struct santa_verdict_buffer buffers[SANTA_VERDICT_BUFFERS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct santa_verdict_memory);
} verdict_memory SEC(".maps");

/* Per-CPU memory guarded by a busy flag: santa_take says whether it was
 * free (and takes it), santa_give gives it back once every access to it is
 * done. Both exchange: a plain store could become visible before the
 * reads it follows on some architectures. */
static __always_inline int santa_take(__u32 *busy)
{
	return !__sync_lock_test_and_set(busy, 1);
}

static __always_inline void santa_give(__u32 *busy)
{
	__sync_lock_test_and_set(busy, 0);
}

/* A free request buffer of this CPU, now taken, or NULL. */
static __always_inline struct santa_verdict_buffer *santa_take_verdict_buffer(void)
{
	struct santa_verdict_memory *m;
	__u32 zero = 0;

	m = bpf_map_lookup_elem(&verdict_memory, &zero);
	if (!m)
		return NULL;
#pragma unroll
	for (int i = 0; i < SANTA_VERDICT_BUFFERS; i++)
		if (santa_take(&m->buffers[i].busy))
			return &m->buffers[i];
	return NULL;
}

static __always_inline void santa_count_tcp_path(__u32 path)
{
	santa_count_in(&tcp_path_stats, path);
}

/* Takes one of owner's places: for a connection's state (connections),
 * or, with mc, for a memcached stream's (mc_conns). 0 if it holds every
 * one its limit allows. Counted first, then checked: two takes at the
 * limit may both fail, never both succeed. */
static __always_inline int santa_place_take(__u32 owner, int mc)
{
	struct santa_conn_owner *o = bpf_map_lookup_elem(&conn_owners, &owner);
	__u32 limit, *n;

	if (!o)
		return 0;
	n = mc ? &o->mc : &o->conns;
	limit = *(volatile __u32 *)&o->limit;
	if (__sync_fetch_and_add(n, 1) < limit || !limit)
		return 1;
	__sync_fetch_and_sub(n, 1);
	return 0;
}

/* Gives back a place santa_place_take took. */
static __always_inline void santa_place_give(__u32 owner, int mc)
{
	struct santa_conn_owner *o = bpf_map_lookup_elem(&conn_owners, &owner);

	if (o)
		__sync_fetch_and_sub(mc ? &o->mc : &o->conns, 1);
}

/* Deletes a connection's state from connections, and gives its place back
 * if this call deleted it: whichever of the paths that end a connection
 * comes first (its close, its socket's release, its service's end). */
static __always_inline void santa_conn_delete(__u64 cookie)
{
	struct santa_conn *conn = bpf_map_lookup_elem(&connections, &cookie);
	__u32 owner;

	if (!conn)
		return;
	owner = conn->owner;
	if (!bpf_map_delete_elem(&connections, &cookie))
		santa_place_give(owner, 0);
}

#endif /* SANTA_TCP_MAPS_H */
