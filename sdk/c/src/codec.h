/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * How a body of docs/protocol.md is described: a table of its fields in wire
 * order, each naming its kind and the member of a C struct (struct santa_msg,
 * a rule, a service, ...) that holds its value.  messages.c holds one table
 * per body; wire.c encodes and decodes any body by walking its table, so
 * both directions come from one description.
 */
#ifndef SANTA_CODEC_H
#define SANTA_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

enum santa_field_kind {
	SANTA_F_END,     /* closes a table */
	SANTA_F_UINT,    /* an integer of `width` bytes */
	SANTA_F_FLAG,    /* a u8 that is 0 or 1, else EINVAL */
	SANTA_F_ZERO,    /* a u8 that must be 0, else EINVAL */
	SANTA_F_COUNT,   /* a list's count: an integer of `width` bytes, at least
			  * `min` (else EINVAL), whose items, each at least
			  * `item_min` bytes, must fit what is left (else EBADMSG) */
	SANTA_F_ADDR,    /* `size` bytes as they are */
	SANTA_F_STR16,   /* struct santa_bytes: UTF-8 of at most `max` bytes, else
			  * EINVAL; decoded pointing into the datagram */
	SANTA_F_CSTR16,  /* a char array: the same string16, of at most `max`
			  * (its size - 1) bytes, NUL-terminated in C */
	SANTA_F_BYTES16, /* uint8_t *, copied on decoding, with its uint16_t length
			  * at `len_off` */
	SANTA_F_STRUCT,  /* a struct member described by `fields` */
	SANTA_F_ITEMS,   /* the items of the list whose count is the member:
			  * one array, or two parallel ones (`cols`) */
	SANTA_F_RULE,    /* struct santa_rule *, described by `fields` (decoded
			  * rules are read-only: see santa_msg_release) */
	SANTA_F_VARIANT, /* the u8 member as a kind byte, a reserved zero byte,
			  * then the fields of arms[kind] (a kind without arm is
			  * EINVAL) */
	SANTA_F_BITS,    /* the u8 member as flags: each set bit i is followed
			  * by the fields of arms[i], in bit order; a bit without
			  * arm is EINVAL, and so is a set bit whose fields are
			  * all 0 (it would say nothing: one encoding per body) */
	SANTA_F_VERSIONS, /* `fields`, on the same member, only in messages of
			   * versions `since` to `until` */
};

/* An array of a list's items: the member pointing to it, one item's C size
 * and its fields. */
struct santa_column {
	uint16_t off, size;
	const struct santa_field *fields;
};

struct santa_field {
	uint8_t kind;                          /* enum santa_field_kind */
	uint8_t width;                         /* UINT, FLAG, ZERO, COUNT: on the wire */
	uint16_t off, size;                    /* the member: offsetof, sizeof */
	uint16_t max;                          /* STR16, CSTR16 */
	uint16_t min, item_min;                /* COUNT */
	uint16_t len_off;                      /* BYTES16 */
	uint16_t since, until;                 /* VERSIONS */
	struct santa_column cols[2];           /* ITEMS */
	const struct santa_field *fields;      /* STRUCT, RULE, VERSIONS */
	const struct santa_field *const *arms; /* VARIANT by kind, BITS by bit */
	size_t narms;
};

/* A message type's bodies; messages.c has one for each type. */
struct santa_message {
	const char *name;
	const struct santa_field *request, *reply;
};

SANTA_HIDDEN extern const struct santa_message santa_messages[SANTA_TYPE_MAX + 1];
SANTA_HIDDEN extern const struct santa_field santa_error_body[];
SANTA_HIDDEN extern const struct santa_field santa_rule_fields[];

#endif /* SANTA_CODEC_H */
