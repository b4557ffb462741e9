/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * libsanta: the C client of santad, protocol versions 1 to 7
 * (docs/protocol.md): version 2 adds a rule's length condition, 7 pages
 * LIST_SERVICES; 3 to 6 change only messages the library does not speak.
 *
 * Conventions, as in libbpf:
 *  - Objects are opaque; `object__method()` names act on one object.
 *  - Functions returning int return 0 (or a positive count where said) on
 *    success and a negative errno on failure.  Errors the daemon reports
 *    arrive as -code of its ERROR reply; its text and the offending batch
 *    index stay available through santa_client__last_error().
 *  - Functions returning pointers return NULL on failure and set errno.
 *  - Memory the library returns through an out-parameter is one malloc()
 *    block: release it with free().  Pointers a client hands out by accessor
 *    (santa_client__info(), santa_client__last_error()) belong to the client.
 *  - A client is not thread-safe: one thread at a time per client.
 */
#ifndef SANTA_SANTA_H
#define SANTA_SANTA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef SANTA_API
#define SANTA_API __attribute__((visibility("default")))
#endif

#define SANTA_PROTOCOL_VERSION 7     /* the newest version the library speaks */
#define SANTA_PROTOCOL_VERSION_MIN 1 /* the oldest: a daemon of version 1 is served too */
#define SANTA_DEFAULT_SOCKET "/run/santa/santa.sock"
#define SANTA_SOCKET_ENV "SANTA_SOCKET" /* names the socket when path is NULL */
#define SANTA_MSG_MAX 131072       /* one message, header included */
#define SANTA_NO_INDEX 0xffffffffu /* santa_error.index when no item is named */

struct santa_client;
struct santa_rule;

/* What HELLO told us (santa_client__info). */
struct santa_client_info {
	uint16_t version;     /* protocol version agreed: 7, or older with an older santad */
	uint32_t uid, gid, pid; /* the peer credentials santad recorded */
	uint8_t admin;        /* 1: may manage every service */
	uint32_t quota_rules; /* 0 = unlimited */
	uint64_t quota_bytes; /* 0 = unlimited */
	const char *daemon;   /* santad's version text, NUL-terminated */
};

/* The last failure of a client (santa_client__last_error). */
struct santa_error {
	int code;            /* positive errno; 0 if the last call succeeded */
	uint32_t index;      /* offending item of a batch, or SANTA_NO_INDEX */
	int from_daemon;     /* 1: an ERROR reply; 0: found by the library */
	const char *message; /* human text, NUL-terminated, never NULL */
};

/* A registered socket (ATTACH, LIST_SERVICES). */
struct santa_service {
	uint32_t service_id;
	uint8_t protocol; /* 17 UDP, 6 TCP */
	uint8_t family;   /* 4 or 6 */
	uint16_t port;    /* host order */
	uint8_t addr[16]; /* IPv4 in the first 4 bytes, network order */
	uint64_t cookie;  /* SO_COOKIE */
	uint64_t netns_cookie;
	uint32_t owner_uid;
	uint32_t rules;
	/* Protocol version 2: the HELLO name of the client that attached the
	 * service or last set its learning, NUL-terminated (at most 64 bytes;
	 * "" if neither happened since santad started, and with a santad of
	 * version 1). */
	char manager[65];
};

struct santa_rule_counters {
	uint32_t rule_id;
	uint64_t hits;
	uint64_t bytes;
};

struct santa_service_stats {
	uint64_t matched, passed, fallback, bad_csum;
	uint32_t rules;
	uint64_t rule_bytes;
	/* Protocol version 2 (0 in version 1): why TC answered what XDP could
	 * not; fallback is their sum. */
	uint64_t tc_checksum, tc_too_long, tc_no_xdp;
};

struct santa_interface {
	uint32_t ifindex;
	const char *name; /* NUL-terminated */
	const char *xdp;  /* "native", "generic" or "none" */
	uint8_t tc;       /* 1: the TC program is attached */
};

struct santa_status {
	const char *daemon;
	uint32_t rules, capacity, services;
	size_t interface_cnt;
	struct santa_interface *interfaces;
};

enum santa_processor_kind {
	SANTA_PROC_PUT = 1,
	SANTA_PROC_COPY = 2,
};

/* One processor of a rule, as read back (santa_rule__processor). */
struct santa_processor {
	enum santa_processor_kind kind;
	uint16_t dst;
	uint16_t src;        /* copy only */
	uint16_t len;        /* bytes put or copied */
	const uint8_t *data; /* put only: len bytes, owned by the rule */
};

/* ---- errors ---- */

/* Text for an errno, negative or positive; never NULL, never to be freed. */
SANTA_API const char *santa_strerror(int err);

/* ---- client ---- */

/* Connects to santad at path and says HELLO. path NULL: $SANTA_SOCKET if set
 * (ignored in a setuid or setgid program: secure_getenv), else
 * SANTA_DEFAULT_SOCKET;
 * name (NULL: "libsanta", at most 64 bytes) appears in the daemon's logs. */
SANTA_API int santa_client__connect(const char *path, const char *name,
				    struct santa_client **out);
/* Closes the connection (the daemon aborts its open transactions). */
SANTA_API void santa_client__free(struct santa_client *client);
SANTA_API const struct santa_client_info *santa_client__info(const struct santa_client *client);
/* The last call's failure; code 0 after a success.  Valid until the next call. */
SANTA_API const struct santa_error *santa_client__last_error(const struct santa_client *client);
/* The connection's fd, e.g. for SO_RCVTIMEO; still owned by the client. */
SANTA_API int santa_client__fd(const struct santa_client *client);

/* ---- rules (the paper's Listing 1: a condition, processors, a reply) ---- */

/* A rule answering requests that hold pattern[0..len) at cond_off with a
 * reply of reply_len bytes (zero until processors write them).  Limits are
 * the daemon's (docs/rules.md); the library only refuses what the wire cannot
 * carry (EINVAL).  NULL and errno on failure. */
SANTA_API struct santa_rule *santa_rule__new(uint16_t cond_off, const void *pattern,
					     size_t len, uint16_t reply_len);
/* Appends put{dst, data[0..len)}: reply bytes [dst, dst+len) are data. */
SANTA_API int santa_rule__put(struct santa_rule *rule, uint16_t dst,
			      const void *data, size_t len);
/* Appends copy{src, len, dst}: reply bytes [dst, dst+len) are request bytes
 * [src, src+len). */
SANTA_API int santa_rule__copy(struct santa_rule *rule, uint16_t src,
			       uint16_t len, uint16_t dst);
/* Restricts the rule to requests whose payload length L is at least min_len
 * and, unless max_len is 0, at most max_len: without it the pattern is a
 * prefix, and a request with more bytes after it matches too.  Exactly n
 * bytes: min_len = max_len = n; 0, 0 removes the condition.  It needs
 * protocol version 2: with a santad of version 1, a batch holding such a
 * rule fails with EINVAL before anything is sent. */
SANTA_API int santa_rule__set_length(struct santa_rule *rule, uint16_t min_len,
				     uint16_t max_len);
/* The rule's length condition: 1 and its bounds, or 0 (and 0, 0) without
 * one.  min_len, max_len may be NULL. */
SANTA_API int santa_rule__length(const struct santa_rule *rule, uint16_t *min_len,
				 uint16_t *max_len);
/* A memcached rule's guard as santad lists it (protocol version 2,
 * docs/memcached.md): the rule answers only while its key (none: any key)
 * and its domain are at these generations of this life of the domain, for
 * expires_in_ms more milliseconds (0: no deadline).  An agent that reads
 * generations installs such rules; the library sends none: a batch holding
 * a guarded rule fails with EINVAL. */
struct santa_guard {
	const void *key;
	size_t key_len;
	uint32_t gen, domain_gen, epoch, expires_in_ms;
};

/* The rule's guard: 1 and *out, or 0 (and *out zeroed) without one. */
SANTA_API int santa_rule__guard(const struct santa_rule *rule, struct santa_guard *out);
/* A copy of the rule, its guard included. */
SANTA_API struct santa_rule *santa_rule__clone(const struct santa_rule *rule);
SANTA_API void santa_rule__free(struct santa_rule *rule);
SANTA_API uint16_t santa_rule__cond_off(const struct santa_rule *rule);
SANTA_API const void *santa_rule__pattern(const struct santa_rule *rule, size_t *len);
SANTA_API uint16_t santa_rule__reply_len(const struct santa_rule *rule);
SANTA_API size_t santa_rule__processor_cnt(const struct santa_rule *rule);
SANTA_API int santa_rule__processor(const struct santa_rule *rule, size_t i,
				    struct santa_processor *out);

/* ---- services ---- */

/* Registers the bound UDP socket sockfd (passed by SCM_RIGHTS; santad keeps
 * no copy) and fills *out (may be NULL). */
SANTA_API int santa_attach(struct santa_client *client, int sockfd,
			   struct santa_service *out);
/* Removes the service and all its rules. */
SANTA_API int santa_detach(struct santa_client *client, uint32_t service_id);
/* The client's services (every one for an admin), in rising id order:
 * *out is a malloc()ed array of *cnt entries, free() it (NULL when there
 * are none).  From protocol version 7 santad lists them in pages, every
 * one of which is read; an older santad has no pages, and refuses
 * (-EPROTONOSUPPORT) a list that does not fit one reply. */
SANTA_API int santa_list_services(struct santa_client *client,
				  struct santa_service **out, size_t *cnt);
SANTA_API int santa_service_stats(struct santa_client *client, uint32_t service_id,
				  struct santa_service_stats *out);
/* Daemon version and interfaces: *out is one malloc()ed block, free() it. */
SANTA_API int santa_status(struct santa_client *client, struct santa_status **out);

/* ---- TCP connections ---- */

/* The socket option behind santa_accepted(), for callers without libsanta. */
#define SANTA_SOL 0x53414e54 /* "SANT" */
#define SANTA_SO_ACCEPTED 1

/* Announces fd, a connection just accept()ed from an attached TCP listener,
 * before the first receive on it: requests that arrived before accept() can
 * then be answered by the kernel, where otherwise the first receive takes
 * them and the connection stays the application's (docs/tcp.md).  Needed
 * only after accept(ln, NULL, NULL) with no other call on the connection
 * before the first receive: accept() with an address, getpeername(),
 * getsockname() or any setsockopt() do the same.  Needs no client: the
 * kernel handles it.  0 (also on a connection that is not Santa's), or
 * -errno: -ENOPROTOOPT when Santa's data plane is not loaded. */
SANTA_API int santa_accepted(int fd);

/* ---- rule batches: each call is all-or-nothing ----
 * A batch larger than one message is sent as BEGIN, ADD/REPLACE/DELETE_RULES
 * ..., COMMIT (ABORT on error), so it still lands whole or not at all.  On a
 * daemon error, last_error's index is the offending item of *this* call. */

/* ids (may be NULL) receives n rule ids, in order. */
SANTA_API int santa_add_rule(struct santa_client *client, uint32_t service_id,
			     const struct santa_rule *rule, uint32_t *id);
SANTA_API int santa_add_rules(struct santa_client *client, uint32_t service_id,
			      const struct santa_rule *const *rules, size_t n,
			      uint32_t *ids);
/* A replaced rule keeps its id. */
SANTA_API int santa_replace_rule(struct santa_client *client, uint32_t service_id,
				 uint32_t rule_id, const struct santa_rule *rule);
SANTA_API int santa_replace_rules(struct santa_client *client, uint32_t service_id,
				  const uint32_t *rule_ids,
				  const struct santa_rule *const *rules, size_t n);
SANTA_API int santa_delete_rule(struct santa_client *client, uint32_t service_id,
				uint32_t rule_id);
SANTA_API int santa_delete_rules(struct santa_client *client, uint32_t service_id,
				 const uint32_t *rule_ids, size_t n);

/* ---- explicit transactions (at most 4 open per connection) ----
 * Each staged call is checked at once but applied only by commit.  A staged
 * call that fails may have staged part of its items (when it needed several
 * messages): abort the transaction then. */
SANTA_API int santa_txn_begin(struct santa_client *client, uint32_t service_id,
			      uint32_t *txn);
/* ids (may be NULL) receives the n ids the rules will have once committed:
 * santad holds them for the transaction until it ends. */
SANTA_API int santa_txn_add_rules(struct santa_client *client, uint32_t service_id,
				  uint32_t txn, const struct santa_rule *const *rules,
				  size_t n, uint32_t *ids);
SANTA_API int santa_txn_replace_rules(struct santa_client *client, uint32_t service_id,
				      uint32_t txn, const uint32_t *rule_ids,
				      const struct santa_rule *const *rules, size_t n);
SANTA_API int santa_txn_delete_rules(struct santa_client *client, uint32_t service_id,
				     uint32_t txn, const uint32_t *rule_ids, size_t n);
/* Applies everything staged, all or nothing.  added (may be NULL) receives
 * how many rules it added; their ids came from santa_txn_add_rules().  After
 * a failed commit, santa_txn_abort() makes sure the transaction is gone. */
SANTA_API int santa_txn_commit(struct santa_client *client, uint32_t txn, size_t *added);
SANTA_API int santa_txn_abort(struct santa_client *client, uint32_t txn);

/* ---- reading rules back (paged under the hood) ---- */

/* Called once per rule, in rising id order.  rule belongs to the library and
 * lives until the callback returns (santa_rule__clone() keeps it).  A nonzero
 * return stops the walk and becomes santa_list_rules()'s result. */
typedef int (*santa_rule_fn)(uint32_t rule_id, const struct santa_rule *rule, void *ctx);
SANTA_API int santa_list_rules(struct santa_client *client, uint32_t service_id,
			       santa_rule_fn fn, void *ctx);
/* Every rule's counters, in rising id order: *out is a malloc()ed array of
 * *cnt entries, free() it (NULL when there are none). */
SANTA_API int santa_rule_stats(struct santa_client *client, uint32_t service_id,
			       struct santa_rule_counters **out, size_t *cnt);

#ifdef __cplusplus
}
#endif

#endif /* SANTA_SANTA_H */
