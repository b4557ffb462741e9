/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* libsanta internals: shared by src/ and the tests, never installed. */
#ifndef SANTA_INTERNAL_H
#define SANTA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "santa/santa.h"

#define SANTA_HIDDEN __attribute__((visibility("hidden")))

/* ---- rules (rule.c) ---- */

struct santa_proc {
	uint8_t kind; /* enum santa_processor_kind */
	uint16_t dst;
	uint16_t src;  /* copy */
	uint16_t len;  /* put: data length; copy: bytes copied */
	uint8_t *data; /* put */
};

/* A rule's flags on the wire (version 2). */
enum santa_rule_flag {
	SANTA_RULE_LENGTH = 1, /* min_len and max_len follow */
	SANTA_RULE_GUARD = 2,  /* a guard follows them (santad's listings only) */
};

/* A memcached rule's guard, as santad lists it (docs/memcached.md): the
 * library reads it but never sends one. */
struct santa_rule_guard {
	uint16_t key_len;
	uint8_t *key;
	uint32_t gen, domain_gen, epoch, expires_in_ms;
};

struct santa_rule {
	uint16_t cond_off;
	uint16_t reply_len;
	uint8_t flags;             /* enum santa_rule_flag: what follows on the wire */
	uint16_t min_len, max_len; /* SANTA_RULE_LENGTH: the request's length */
	struct santa_rule_guard guard; /* SANTA_RULE_GUARD */
	uint16_t pattern_len;
	uint8_t *pattern;
	size_t nproc, cap;
	struct santa_proc *procs;
	int err; /* first failure of a builder call; such a rule is never sent */
};

#define SANTA_MAX_NPROC 255 /* nproc is a u8 on the wire */

SANTA_HIDDEN struct santa_rule *santa_rule_alloc(void);

/* ---- wire codec (wire.c) ---- */

#define SANTA_MAGIC 0x41544e53u
#define SANTA_HDR_LEN 16
#define SANTA_REPLY 0x8000u
#define SANTA_NO_NEXT 0xffffffffu
#define SANTA_CLIENT_NAME_MAX 64     /* HELLO's client string */
#define SANTA_ERROR_MESSAGE_MAX 1024 /* ERROR's message */

enum santa_msg_type {
	SANTA_HELLO = 1,
	SANTA_ATTACH = 2,
	SANTA_DETACH = 3,
	SANTA_ADD_RULES = 4,
	SANTA_REPLACE_RULES = 5,
	SANTA_DELETE_RULES = 6,
	SANTA_BEGIN = 7,
	SANTA_COMMIT = 8,
	SANTA_ABORT = 9,
	SANTA_LIST_SERVICES = 10,
	SANTA_LIST_RULES = 11,
	SANTA_RULE_STATS = 12,
	SANTA_SERVICE_STATS = 13,
	SANTA_STATUS = 14,
	SANTA_TYPE_MAX = 14,
	SANTA_ERROR = 0xffff,
};

/* A byte string inside a message buffer (string16, bytes16, not NUL-ended). */
struct santa_bytes {
	const uint8_t *ptr;
	uint16_t len;
};

struct santa_wire_iface {
	uint32_t ifindex;
	struct santa_bytes name, xdp;
	uint8_t tc;
};

/*
 * One message, either direction.  `type` carries the reply bit (or is
 * SANTA_ERROR); the union member is chosen by it, see santa_msg_encode.
 * Encoding reads caller memory; decoding points byte strings into the
 * decoded buffer and allocates lists, released by santa_msg_release().
 */
struct santa_msg {
	uint16_t version; /* of the body, in the header: 1 to SANTA_PROTOCOL_VERSION */
	uint16_t type;
	uint32_t seq;
	union {
		/* HELLO */
		struct { uint16_t min_version, max_version; struct santa_bytes client; } hello;
		struct {
			uint16_t version;
			uint32_t uid, gid, pid;
			uint8_t admin;
			uint32_t quota_rules;
			uint64_t quota_bytes;
			struct santa_bytes daemon;
		} hello_reply;
		/* ATTACH request; reply: service */
		struct { uint32_t flags; } attach;
		struct santa_service service;
		/* DETACH, BEGIN, SERVICE_STATS requests */
		struct { uint32_t service_id; } svc;
		/* ADD_RULES (rule_ids NULL), REPLACE_RULES, DELETE_RULES (rules NULL) */
		struct {
			uint32_t service_id, txn, count;
			const uint32_t *rule_ids;
			const struct santa_rule *const *rules;
		} batch;
		/* ADD_RULES reply (in a transaction too: the ids held for it) */
		struct { uint32_t count; const uint32_t *rule_ids; } ids;
		/* COMMIT reply */
		struct { uint32_t added; } commit;
		/* BEGIN reply, COMMIT and ABORT requests */
		struct { uint32_t txn; } txn;
		/* LIST_SERVICES reply (next: version 7) */
		struct {
			uint32_t count, next;
			const struct santa_service *services;
		} services;
		/* LIST_RULES, RULE_STATS requests; LIST_SERVICES' (version 7:
		 * start and max, no service_id) */
		struct { uint32_t service_id, start, max; } page;
		/* LIST_RULES reply */
		struct {
			uint32_t count, next;
			const uint32_t *rule_ids;
			const struct santa_rule *const *rules;
		} rules;
		/* RULE_STATS reply */
		struct {
			uint32_t count, next;
			const struct santa_rule_counters *counters;
		} counters;
		/* SERVICE_STATS reply */
		struct santa_service_stats stats;
		/* STATUS reply */
		struct {
			struct santa_bytes daemon;
			uint32_t rules, capacity, services;
			uint16_t count;
			const struct santa_wire_iface *ifaces;
		} status;
		/* ERROR */
		struct { uint32_t code, index; struct santa_bytes message; } error;
	} u;
	void *allocs; /* what decoding allocated, freed by santa_msg_release() */
};

/* The wire size of a batch request without its items. */
#define SANTA_BATCH_HDR_LEN (SANTA_HDR_LEN + 12) /* service_id, txn, count */

SANTA_HIDDEN const char *santa_msg_type_name(uint16_t type); /* NULL if unknown */
SANTA_HIDDEN bool santa_msg_type_valid(uint16_t type);
SANTA_HIDDEN size_t santa_rule_wire_size(const struct santa_rule *r, uint16_t version);
/* Encodes m, in version m->version, into buf[0..cap) (cap is capped at
 * SANTA_MSG_MAX): the message length, or -EMSGSIZE, -EINVAL (a field the
 * wire, or that version, cannot carry). */
SANTA_HIDDEN int santa_msg_encode(const struct santa_msg *m, uint8_t *buf, size_t cap);
/* Sets the header's length field of the message in buf (the tests use it to
 * cut or grow an encoded message with a consistent header). */
SANTA_HIDDEN void santa_msg_set_length(uint8_t *buf, uint32_t len);
/* Decodes one datagram, in the version its header names: 0, or -EMSGSIZE,
 * -EPROTO (header), -EBADMSG (body), -EINVAL (a flag, kind or reserved
 * field), -ENOMEM.  On success release m. */
SANTA_HIDDEN int santa_msg_decode(const uint8_t *buf, size_t len, struct santa_msg *m);
/* Frees what decoding allocated, its rules too: those are read-only, never
 * for santa_rule__free() or a builder (santa_rule__clone() keeps one). */
SANTA_HIDDEN void santa_msg_release(struct santa_msg *m);

/* ---- the connection (client.c) ---- */

struct santa_client {
	int fd;
	uint32_t seq;
	bool broken;  /* out of step with the daemon, or closed by it */
	uint8_t *buf; /* SANTA_MSG_MAX bytes: the request, then its reply */
	struct santa_client_info info;
	char *daemon;
	struct santa_error err;
	char errmsg[SANTA_ERROR_MESSAGE_MAX + 1];
};

/* Takes over an already connected SOCK_SEQPACKET fd (closed on failure too). */
SANTA_HIDDEN int santa_client_from_fd(int fd, const char *name, struct santa_client **out);
SANTA_HIDDEN void santa_err_clear(struct santa_client *c);
/* Records a failure found by the library as the last error; returns err. */
SANTA_HIDDEN __attribute__((format(printf, 4, 5)))
int santa_err_local(struct santa_client *c, int err, uint32_t index, const char *fmt, ...);
/*
 * Sends req (with pass_fd by SCM_RIGHTS if >= 0) and decodes its reply into
 * rep, to be released by the caller on success.  An ERROR reply is recorded
 * as the last error and returned as its negative errno.
 */
SANTA_HIDDEN int santa_call(struct santa_client *c, struct santa_msg *req, int pass_fd,
			    struct santa_msg *rep);
/* A call whose reply body carries nothing the caller needs. */
SANTA_HIDDEN int santa_call_simple(struct santa_client *c, struct santa_msg *req);
/* Checks a page's next (paging.c): 1 after the last page, 0 with *out the
 * next page's start, or a negative errno if next does not move on. */
SANTA_HIDDEN int santa_page_next(struct santa_client *c, uint32_t start, uint32_t count,
				 uint32_t last, uint32_t next, uint32_t *out);
/* Appends a page's count items of size bytes to the array *all of *n
 * (paging.c); -ENOMEM, the array left as it was, if it cannot grow. */
SANTA_HIDDEN int santa_page_append(struct santa_client *c, void **all, size_t *n, const void *items,
				   uint32_t count, size_t size);

/* Room for one fd's SCM_RIGHTS message, aligned as a cmsghdr must be. */
union santa_fd_ctl {
	char buf[CMSG_SPACE(sizeof(int))];
	struct cmsghdr align;
};

/* Makes mh carry fd by SCM_RIGHTS, with ctl (alive until sendmsg) as its
 * control buffer.  The tests' fake replies pass fds the same way. */
SANTA_HIDDEN void santa_pass_fd(struct msghdr *mh, union santa_fd_ctl *ctl, int fd);

/* Start of every public call: a client, and no stale error. */
#define SANTA_ENTER(c)                  \
	do {                            \
		if (!(c))               \
			return -EINVAL; \
		santa_err_clear(c);     \
	} while (0)

#endif /* SANTA_INTERNAL_H */
