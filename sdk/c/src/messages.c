/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Every body of docs/protocol.md, written down once: its fields in wire
 * order, each with the member that holds it (codec.h says what the kinds
 * mean).  wire.c walks these tables both ways, for the library's requests
 * and replies and for the tests' fake daemon alike, as internal/protocol
 * (requests.go, replies.go, shared.go) and sdk/python (messages.py) do.
 */
#include "codec.h"

/* Smallest encodings of list items: they bound a count before allocation. */
#define MIN_RULE_LEN 8  /* cond_off, empty pattern, reply_len, nproc, flags */
#define MIN_PROC_LEN 6  /* kind, reserved, dst, empty bytes */
#define MIN_IFACE_LEN 9 /* ifindex, empty name, empty xdp, tc */
#define MIN_SERVICE_LEN 48 /* version 1's; version 2 adds the manager */
#define COUNTERS_LEN 20
#define STR16_MAX UINT16_MAX

/* Fields held by member m of struct T. */
#define AT(T, m) .off = offsetof(T, m), .size = sizeof(((T *)0)->m)
#define U8(T, m) { .kind = SANTA_F_UINT, .width = 1, AT(T, m) }
#define U16(T, m) { .kind = SANTA_F_UINT, .width = 2, AT(T, m) }
#define U32(T, m) { .kind = SANTA_F_UINT, .width = 4, AT(T, m) }
#define U64(T, m) { .kind = SANTA_F_UINT, .width = 8, AT(T, m) }
#define FLAG(T, m) { .kind = SANTA_F_FLAG, .width = 1, AT(T, m) }
#define ZERO(T, m) { .kind = SANTA_F_ZERO, .width = 1, AT(T, m) }
#define ADDR(T, m) { .kind = SANTA_F_ADDR, AT(T, m) }
#define STR16(T, m, max_) { .kind = SANTA_F_STR16, AT(T, m), .max = (max_) }
#define CSTR16(T, m) { .kind = SANTA_F_CSTR16, AT(T, m), .max = sizeof(((T *)0)->m) - 1 }
#define BYTES16(T, m, len) { .kind = SANTA_F_BYTES16, AT(T, m), .len_off = offsetof(T, len) }
#define STRUCT(T, m, f) { .kind = SANTA_F_STRUCT, AT(T, m), .fields = (f) }
#define COUNT(T, m, width_, min_, item) \
	{ .kind = SANTA_F_COUNT, .width = (width_), AT(T, m), .min = (min_), .item_min = (item) }
/* The items counted by member count of T: one COL or two parallel ones. */
#define ITEMS(T, count, ...) { .kind = SANTA_F_ITEMS, AT(T, count), .cols = { __VA_ARGS__ } }
/* The array member m of T, each item described by f. */
#define COL(T, m, f) { offsetof(T, m), sizeof(*((T *)0)->m), (f) }
#define VARIANT(T, m, arms_) \
	{ .kind = SANTA_F_VARIANT, AT(T, m), .arms = (arms_), .narms = sizeof(arms_) / sizeof(arms_[0]) }
#define BITS(T, m, arms_) \
	{ .kind = SANTA_F_BITS, .width = 1, AT(T, m), .arms = (arms_), .narms = sizeof(arms_) / sizeof(arms_[0]) }
/* Fields f in messages of versions lo to hi only. */
#define VERSIONS(lo, hi, f) { .kind = SANTA_F_VERSIONS, .since = (lo), .until = (hi), .fields = (f) }
#define END { .kind = SANTA_F_END }
/* Fields in wire order: a body, a processor. */
#define FIELDS(...) ((const struct santa_field[]){ __VA_ARGS__, END })

#define MSG struct santa_msg

/* ---- shared structures ---- */

/* A processor's kind selects its fields. */
static const struct santa_field *const proc_kinds[] = {
	[SANTA_PROC_PUT] = FIELDS(U16(struct santa_proc, dst),
				  BYTES16(struct santa_proc, data, len)),
	[SANTA_PROC_COPY] = FIELDS(U16(struct santa_proc, src),
				   U16(struct santa_proc, len),
				   U16(struct santa_proc, dst)),
};

static const struct santa_field proc_fields[] = {
	VARIANT(struct santa_proc, kind, proc_kinds),
	END,
};

/* What each bit of a rule's flags (version 2) brings after them. */
static const struct santa_field *const rule_flag_fields[] = {
	[0] = FIELDS(U16(struct santa_rule, min_len), /* SANTA_RULE_LENGTH */
		     U16(struct santa_rule, max_len)),
	[1] = FIELDS(BYTES16(struct santa_rule, guard.key, guard.key_len), /* SANTA_RULE_GUARD */
		     U32(struct santa_rule, guard.gen),
		     U32(struct santa_rule, guard.domain_gen),
		     U32(struct santa_rule, guard.epoch),
		     U32(struct santa_rule, guard.expires_in_ms)),
};

const struct santa_field santa_rule_fields[] = {
	U16(struct santa_rule, cond_off),
	BYTES16(struct santa_rule, pattern, pattern_len),
	U16(struct santa_rule, reply_len),
	COUNT(struct santa_rule, nproc, 1, 0, MIN_PROC_LEN),
	/* version 1 has no flags: a rule with a length condition cannot go */
	VERSIONS(1, 1, FIELDS(ZERO(struct santa_rule, flags))),
	VERSIONS(2, SANTA_PROTOCOL_VERSION, FIELDS(BITS(struct santa_rule, flags, rule_flag_fields))),
	ITEMS(struct santa_rule, nproc, COL(struct santa_rule, procs, proc_fields)),
	END,
};

/* Items of a list that are a single field: a rule id, a rule. */
static const struct santa_field id_item[] = {
	{ .kind = SANTA_F_UINT, .width = 4, .size = sizeof(uint32_t) },
	END,
};

static const struct santa_field rule_item[] = {
	{ .kind = SANTA_F_RULE, .fields = santa_rule_fields },
	END,
};

static const struct santa_field service_fields[] = {
	U32(struct santa_service, service_id),
	U8(struct santa_service, protocol),
	U8(struct santa_service, family),
	U16(struct santa_service, port),
	ADDR(struct santa_service, addr),
	U64(struct santa_service, cookie),
	U64(struct santa_service, netns_cookie),
	U32(struct santa_service, owner_uid),
	U32(struct santa_service, rules),
	VERSIONS(2, SANTA_PROTOCOL_VERSION, FIELDS(CSTR16(struct santa_service, manager))),
	END,
};

_Static_assert(sizeof(((struct santa_service *)0)->manager) == SANTA_CLIENT_NAME_MAX + 1,
	       "a service's manager is a HELLO client name");

static const struct santa_field counters_fields[] = {
	U32(struct santa_rule_counters, rule_id),
	U64(struct santa_rule_counters, hits),
	U64(struct santa_rule_counters, bytes),
	END,
};

static const struct santa_field iface_fields[] = {
	U32(struct santa_wire_iface, ifindex),
	STR16(struct santa_wire_iface, name, STR16_MAX),
	STR16(struct santa_wire_iface, xdp, STR16_MAX),
	FLAG(struct santa_wire_iface, tc),
	END,
};

/* ---- bodies that several messages share ---- */

static const struct santa_field empty[] = { END };
static const struct santa_field service_id_body[] = { U32(MSG, u.svc.service_id), END };
static const struct santa_field txn_body[] = { U32(MSG, u.txn.txn), END };
static const struct santa_field page_body[] = {
	U32(MSG, u.page.service_id),
	U32(MSG, u.page.start),
	U32(MSG, u.page.max), /* 0: as many as fit */
	END,
};

/* ---- every message: its request, then its reply ---- */

const struct santa_message santa_messages[SANTA_TYPE_MAX + 1] = {
	[SANTA_HELLO] = { "HELLO",
		FIELDS(U16(MSG, u.hello.min_version),
		     U16(MSG, u.hello.max_version),
		     STR16(MSG, u.hello.client, SANTA_CLIENT_NAME_MAX)),
		FIELDS(U16(MSG, u.hello_reply.version),
		     U32(MSG, u.hello_reply.uid),
		     U32(MSG, u.hello_reply.gid),
		     U32(MSG, u.hello_reply.pid),
		     FLAG(MSG, u.hello_reply.admin),
		     U32(MSG, u.hello_reply.quota_rules),
		     U64(MSG, u.hello_reply.quota_bytes),
		     STR16(MSG, u.hello_reply.daemon, STR16_MAX)) },
	[SANTA_ATTACH] = { "ATTACH",
		FIELDS(U32(MSG, u.attach.flags)), /* 0; santad, not the codec, refuses others */
		FIELDS(STRUCT(MSG, u.service, service_fields)) },
	[SANTA_DETACH] = { "DETACH", service_id_body, empty },
	[SANTA_ADD_RULES] = { "ADD_RULES",
		FIELDS(U32(MSG, u.batch.service_id),
		     U32(MSG, u.batch.txn),
		     COUNT(MSG, u.batch.count, 4, 1, MIN_RULE_LEN),
		     ITEMS(MSG, u.batch.count, COL(MSG, u.batch.rules, rule_item))),
		/* in a transaction too: the ids held for it */
		FIELDS(COUNT(MSG, u.ids.count, 4, 0, 4),
		     ITEMS(MSG, u.ids.count, COL(MSG, u.ids.rule_ids, id_item))) },
	[SANTA_REPLACE_RULES] = { "REPLACE_RULES",
		FIELDS(U32(MSG, u.batch.service_id),
		     U32(MSG, u.batch.txn),
		     COUNT(MSG, u.batch.count, 4, 0, 4 + MIN_RULE_LEN),
		     ITEMS(MSG, u.batch.count, COL(MSG, u.batch.rule_ids, id_item),
			   COL(MSG, u.batch.rules, rule_item))),
		empty },
	[SANTA_DELETE_RULES] = { "DELETE_RULES",
		FIELDS(U32(MSG, u.batch.service_id),
		     U32(MSG, u.batch.txn),
		     COUNT(MSG, u.batch.count, 4, 0, 4),
		     ITEMS(MSG, u.batch.count, COL(MSG, u.batch.rule_ids, id_item))),
		empty },
	[SANTA_BEGIN] = { "BEGIN", service_id_body, txn_body },
	[SANTA_COMMIT] = { "COMMIT", txn_body, FIELDS(U32(MSG, u.commit.added)) },
	[SANTA_ABORT] = { "ABORT", txn_body, empty },
	/* Version 7 pages it as LIST_RULES: start and max; next after the count. */
	[SANTA_LIST_SERVICES] = { "LIST_SERVICES",
		FIELDS(VERSIONS(7, SANTA_PROTOCOL_VERSION,
				FIELDS(U32(MSG, u.page.start), U32(MSG, u.page.max)))),
		FIELDS(COUNT(MSG, u.services.count, 4, 0, MIN_SERVICE_LEN),
		     VERSIONS(7, SANTA_PROTOCOL_VERSION, FIELDS(U32(MSG, u.services.next))),
		     ITEMS(MSG, u.services.count, COL(MSG, u.services.services, service_fields))) },
	/* The pages: the count is checked where it stands, before `next` (as in Go). */
	[SANTA_LIST_RULES] = { "LIST_RULES", page_body,
		FIELDS(COUNT(MSG, u.rules.count, 4, 0, 4 + MIN_RULE_LEN),
		     U32(MSG, u.rules.next),
		     ITEMS(MSG, u.rules.count, COL(MSG, u.rules.rule_ids, id_item),
			   COL(MSG, u.rules.rules, rule_item))) },
	[SANTA_RULE_STATS] = { "RULE_STATS", page_body,
		FIELDS(COUNT(MSG, u.counters.count, 4, 0, COUNTERS_LEN),
		     U32(MSG, u.counters.next),
		     ITEMS(MSG, u.counters.count, COL(MSG, u.counters.counters, counters_fields))) },
	[SANTA_SERVICE_STATS] = { "SERVICE_STATS", service_id_body,
		FIELDS(U64(MSG, u.stats.matched),
		     U64(MSG, u.stats.passed),
		     U64(MSG, u.stats.fallback),
		     U64(MSG, u.stats.bad_csum),
		     U32(MSG, u.stats.rules),
		     U64(MSG, u.stats.rule_bytes),
		     VERSIONS(2, SANTA_PROTOCOL_VERSION, FIELDS(U64(MSG, u.stats.tc_checksum),
					  U64(MSG, u.stats.tc_too_long),
					  U64(MSG, u.stats.tc_no_xdp)))) },
	[SANTA_STATUS] = { "STATUS", empty,
		FIELDS(STR16(MSG, u.status.daemon, STR16_MAX),
		     U32(MSG, u.status.rules),
		     U32(MSG, u.status.capacity),
		     U32(MSG, u.status.services),
		     COUNT(MSG, u.status.count, 2, 0, MIN_IFACE_LEN),
		     ITEMS(MSG, u.status.count, COL(MSG, u.status.ifaces, iface_fields))) },
};

const struct santa_field santa_error_body[] = {
	U32(MSG, u.error.code),
	U32(MSG, u.error.index),
	STR16(MSG, u.error.message, SANTA_ERROR_MESSAGE_MAX),
	END,
};
