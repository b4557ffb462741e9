/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The codec of docs/protocol.md: the header, then any body by walking its
 * table in messages.c, one encoder and one decoder for every request and
 * reply.  Little-endian, no padding.  Decoding trusts no length or count:
 * every read is bounded by what is left of the datagram, a count is checked
 * against the bytes left before anything is allocated, and a body must end
 * exactly.  Encoding refuses what decoding would refuse, with the same errno.
 * A body is in the version its header names, which decides the fields of
 * SANTA_F_VERSIONS.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"

/* Well-formed UTF-8: no overlong forms, no surrogates, nothing past U+10FFFF. */
static bool utf8_valid(const uint8_t *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		uint8_t c = s[i];
		size_t len, k;
		uint8_t lo = 0x80, hi = 0xbf;

		if (c < 0x80) {
			i++;
			continue;
		} else if (c >= 0xc2 && c <= 0xdf) {
			len = 2;
		} else if (c >= 0xe0 && c <= 0xef) {
			len = 3;
			if (c == 0xe0)
				lo = 0xa0;
			else if (c == 0xed)
				hi = 0x9f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			len = 4;
			if (c == 0xf0)
				lo = 0x90;
			else if (c == 0xf4)
				hi = 0x8f;
		} else {
			return false;
		}
		if (n - i < len)
			return false;
		for (k = 1; k < len; k++) {
			uint8_t b = s[i + k];

			if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xbf))
				return false;
		}
		i += len;
	}
	return true;
}

/* ---- members: an integer of any C size, a pointer ---- */

union uint_any {
	uint8_t u8;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;
};

static uint64_t load(const void *at, size_t size)
{
	union uint_any v;

	memcpy(&v, at, size);
	return size == 1 ? v.u8 : size == 2 ? v.u16 : size == 4 ? v.u32 : v.u64;
}

static void store(void *at, size_t size, uint64_t x)
{
	union uint_any v;

	if (size == 1)
		v.u8 = (uint8_t)x;
	else if (size == 2)
		v.u16 = (uint16_t)x;
	else if (size == 4)
		v.u32 = (uint32_t)x;
	else
		v.u64 = x;
	memcpy(at, &v, size);
}

static void *load_ptr(const void *at)
{
	void *p;

	memcpy(&p, at, sizeof(p));
	return p;
}

static void store_ptr(void *at, const void *p)
{
	memcpy(at, &p, sizeof(p));
}

/* Whether integer v is refused (EINVAL) as the value of field f. */
static bool uint_bad(const struct santa_field *f, uint64_t v)
{
	uint64_t max = f->kind == SANTA_F_FLAG ? 1 : f->kind == SANTA_F_ZERO ? 0 :
		       UINT64_MAX >> (64 - 8 * f->width);

	if (f->kind == SANTA_F_BITS)
		max = (1u << f->narms) - 1; /* a bit without arm is unknown */
	return v > max || (f->kind == SANTA_F_COUNT && v < f->min);
}

/* Whether the integer members fields describe in base are all 0: what a
 * set bit of SANTA_F_BITS must never bring. */
static bool all_zero(const struct santa_field *f, const void *base)
{
	for (; f->kind != SANTA_F_END; f++)
		if (f->kind == SANTA_F_UINT && load((const uint8_t *)base + f->off, f->size))
			return false;
	return true;
}

/* Whether field f is in a message of version v. */
static bool in_version(const struct santa_field *f, uint16_t v)
{
	return v >= f->since && v <= f->until;
}

/* ---- encoder ---- */

struct wbuf {
	uint8_t *p; /* NULL: only measure */
	size_t len, cap;
	int err;
	uint16_t version; /* of the message */
};

static void w_fail(struct wbuf *w, int err)
{
	if (!w->err)
		w->err = err;
}

/* n bytes of src, or of the integer v (little-endian) if src is NULL. */
static void w_put(struct wbuf *w, const void *src, uint64_t v, size_t n)
{
	size_t i;

	if (w->err)
		return;
	if (n > w->cap - w->len) {
		w->err = -EMSGSIZE;
		return;
	}
	if (w->p && src)
		memcpy(w->p + w->len, src, n);
	else if (w->p)
		for (i = 0; i < n; i++)
			w->p[w->len + i] = (uint8_t)(v >> (8 * i));
	w->len += n;
}

static void w_bytes16(struct wbuf *w, const void *data, uint16_t n)
{
	w_put(w, NULL, n, 2);
	if (n)
		w_put(w, data, 0, n);
}

static void encode_fields(struct wbuf *w, const struct santa_field *f, const void *base)
{
	for (; f->kind != SANTA_F_END && !w->err; f++) {
		const uint8_t *at = (const uint8_t *)base + f->off, *col[2], *nul;
		const struct santa_bytes *b = (const void *)at;
		size_t n, i, c;

		switch (f->kind) {
		case SANTA_F_UINT:
		case SANTA_F_FLAG:
		case SANTA_F_ZERO:
		case SANTA_F_COUNT:
			if (uint_bad(f, load(at, f->size)))
				w_fail(w, -EINVAL);
			w_put(w, NULL, load(at, f->size), f->width);
			break;
		case SANTA_F_ADDR:
			w_put(w, at, 0, f->size);
			break;
		case SANTA_F_STR16:
			if (b->len > f->max || !utf8_valid(b->ptr, b->len))
				w_fail(w, -EINVAL);
			w_bytes16(w, b->ptr, b->len);
			break;
		case SANTA_F_CSTR16:
			nul = memchr(at, '\0', f->size);
			n = nul ? (size_t)(nul - at) : f->size; /* no NUL: too long */
			if (n > f->max || !utf8_valid(at, n))
				w_fail(w, -EINVAL);
			w_bytes16(w, at, (uint16_t)n);
			break;
		case SANTA_F_BYTES16:
			w_bytes16(w, load_ptr(at), (uint16_t)load((const uint8_t *)base + f->len_off, 2));
			break;
		case SANTA_F_STRUCT:
			encode_fields(w, f->fields, at);
			break;
		case SANTA_F_ITEMS:
			n = load(at, f->size);
			for (c = 0; c < 2 && f->cols[c].fields; c++) {
				col[c] = load_ptr((const uint8_t *)base + f->cols[c].off);
				if (n && !col[c])
					w_fail(w, -EINVAL); /* a count without its items */
			}
			for (i = 0; i < n && !w->err; i++)
				for (c = 0; c < 2 && f->cols[c].fields; c++)
					encode_fields(w, f->cols[c].fields, col[c] + i * f->cols[c].size);
			break;
		case SANTA_F_RULE:
			if (!load_ptr(at))
				w_fail(w, -EINVAL);
			else
				encode_fields(w, f->fields, load_ptr(at));
			break;
		case SANTA_F_VARIANT:
			w_put(w, NULL, *at, 1);
			w_put(w, NULL, 0, 1); /* reserved */
			if (*at >= f->narms || !f->arms[*at])
				w_fail(w, -EINVAL);
			else
				encode_fields(w, f->arms[*at], base);
			break;
		case SANTA_F_BITS:
			if (uint_bad(f, *at))
				w_fail(w, -EINVAL);
			w_put(w, NULL, *at, 1);
			for (i = 0; i < f->narms && !w->err; i++) {
				if (!(*at & 1u << i))
					continue;
				if (all_zero(f->arms[i], base))
					w_fail(w, -EINVAL);
				encode_fields(w, f->arms[i], base);
			}
			break;
		case SANTA_F_VERSIONS:
			if (in_version(f, w->version))
				encode_fields(w, f->fields, base);
			break;
		}
	}
}

/* ---- decoder ---- */

/*
 * What decoding allocates (lists, rules, their bytes) is chained to the
 * message, so that releasing a message, whole or cut short by an error, is
 * freeing the chain.  Decoded rules are read-only.
 */
union chunk {
	union chunk *next;
	max_align_t align;
};

struct rbuf {
	const uint8_t *p;
	size_t left;
	int err;
	struct santa_msg *m; /* m->version: the body's */
};

static void r_fail(struct rbuf *r, int err)
{
	if (!r->err)
		r->err = err;
}

static const uint8_t *r_take(struct rbuf *r, size_t n)
{
	const uint8_t *at = r->p;

	if (r->err)
		return NULL;
	if (n > r->left) {
		r->err = -EBADMSG; /* the body ends inside a field */
		return NULL;
	}
	r->p += n;
	r->left -= n;
	return at;
}

static uint64_t r_uint(struct rbuf *r, size_t width)
{
	const uint8_t *at = r_take(r, width);
	uint64_t v = 0;
	size_t i;

	for (i = width; at && i-- > 0;)
		v = v << 8 | at[i];
	return v;
}

static struct santa_bytes r_bytes16(struct rbuf *r)
{
	struct santa_bytes b = { .len = (uint16_t)r_uint(r, 2) };

	b.ptr = r_take(r, b.len);
	if (!b.ptr)
		b.len = 0;
	return b;
}

/* Zeroed room for size bytes, chained to the message. */
static void *r_alloc(struct rbuf *r, size_t size)
{
	union chunk *c;

	if (r->err)
		return NULL;
	c = calloc(1, sizeof(*c) + size);
	if (!c) {
		r_fail(r, -ENOMEM);
		return NULL;
	}
	c->next = r->m->allocs;
	r->m->allocs = c;
	return c + 1;
}

static void decode_fields(struct rbuf *r, const struct santa_field *f, void *base)
{
	for (; f->kind != SANTA_F_END && !r->err; f++) {
		uint8_t *at = (uint8_t *)base + f->off, *col[2] = { NULL, NULL };
		const uint8_t *src;
		struct santa_bytes b;
		size_t n, i, c;
		uint64_t v;
		void *p;

		switch (f->kind) {
		case SANTA_F_UINT:
		case SANTA_F_FLAG:
		case SANTA_F_ZERO:
		case SANTA_F_COUNT:
			v = r_uint(r, f->width);
			if (r->err)
				break;
			if (uint_bad(f, v))
				r_fail(r, -EINVAL);
			else if (f->kind == SANTA_F_COUNT && v * f->item_min > r->left)
				r_fail(r, -EBADMSG); /* its items cannot fit what is left */
			store(at, f->size, v);
			break;
		case SANTA_F_ADDR:
			src = r_take(r, f->size);
			if (src)
				memcpy(at, src, f->size);
			break;
		case SANTA_F_STR16:
			b = r_bytes16(r);
			if (!r->err && (b.len > f->max || !utf8_valid(b.ptr, b.len)))
				r_fail(r, -EINVAL);
			memcpy(at, &b, sizeof(b));
			break;
		case SANTA_F_CSTR16:
			b = r_bytes16(r);
			if (!r->err && (b.len > f->max || !utf8_valid(b.ptr, b.len)))
				r_fail(r, -EINVAL); /* and never copied: it would not fit */
			if (r->err)
				break;
			memcpy(at, b.ptr, b.len);
			at[b.len] = '\0';
			break;
		case SANTA_F_BYTES16:
			b = r_bytes16(r);
			p = b.len ? r_alloc(r, b.len) : NULL;
			if (p)
				memcpy(p, b.ptr, b.len);
			store_ptr(at, p);
			store((uint8_t *)base + f->len_off, 2, p ? b.len : 0);
			break;
		case SANTA_F_STRUCT:
			decode_fields(r, f->fields, at);
			break;
		case SANTA_F_ITEMS: /* arrays even for no items: a list is never NULL */
			n = load(at, f->size);
			for (c = 0; c < 2 && f->cols[c].fields; c++) {
				col[c] = r_alloc(r, (n ? n : 1) * f->cols[c].size);
				store_ptr((uint8_t *)base + f->cols[c].off, col[c]);
			}
			for (i = 0; i < n && !r->err; i++)
				for (c = 0; c < 2 && f->cols[c].fields; c++)
					decode_fields(r, f->cols[c].fields, col[c] + i * f->cols[c].size);
			break;
		case SANTA_F_RULE:
			p = r_alloc(r, sizeof(struct santa_rule));
			if (p)
				decode_fields(r, f->fields, p);
			store_ptr(at, p);
			break;
		case SANTA_F_VARIANT:
			v = r_uint(r, 1);
			if (r_uint(r, 1)) /* reserved */
				r_fail(r, -EINVAL);
			if (!r->err && (v >= f->narms || !f->arms[v]))
				r_fail(r, -EINVAL); /* and its size is unknown: stop here */
			if (r->err)
				break;
			*at = (uint8_t)v;
			decode_fields(r, f->arms[v], base);
			break;
		case SANTA_F_BITS:
			v = r_uint(r, 1);
			if (!r->err && uint_bad(f, v))
				r_fail(r, -EINVAL); /* and what follows is unknown: stop here */
			if (r->err)
				break;
			*at = (uint8_t)v;
			for (i = 0; i < f->narms && !r->err; i++) {
				if (!(v & 1u << i))
					continue;
				decode_fields(r, f->arms[i], base);
				if (!r->err && all_zero(f->arms[i], base))
					r_fail(r, -EINVAL);
			}
			break;
		case SANTA_F_VERSIONS:
			if (in_version(f, r->m->version))
				decode_fields(r, f->fields, base);
			break;
		}
	}
}

/* ---- messages ---- */

const char *santa_msg_type_name(uint16_t type)
{
	if (type == SANTA_ERROR)
		return "ERROR";
	type &= (uint16_t)~SANTA_REPLY;
	return type >= 1 && type <= SANTA_TYPE_MAX ? santa_messages[type].name : NULL;
}

bool santa_msg_type_valid(uint16_t type)
{
	return santa_msg_type_name(type) != NULL;
}

/* The body of a valid type. */
static const struct santa_field *body(uint16_t type)
{
	const struct santa_message *d;

	if (type == SANTA_ERROR)
		return santa_error_body;
	d = &santa_messages[type & (uint16_t)~SANTA_REPLY];
	return type & SANTA_REPLY ? d->reply : d->request;
}

size_t santa_rule_wire_size(const struct santa_rule *r, uint16_t version)
{
	struct wbuf w = { .cap = SIZE_MAX, .version = version };

	encode_fields(&w, santa_rule_fields, r);
	return w.len;
}

void santa_msg_set_length(uint8_t *buf, uint32_t len)
{
	struct wbuf w = { .p = buf + 8, .cap = 4 }; /* after magic, version, type */

	w_put(&w, NULL, len, 4);
}

int santa_msg_encode(const struct santa_msg *m, uint8_t *buf, size_t cap)
{
	struct wbuf w = { .p = buf, .cap = cap < SANTA_MSG_MAX ? cap : SANTA_MSG_MAX,
			  .version = m->version };

	if (!santa_msg_type_valid(m->type) || m->version < SANTA_PROTOCOL_VERSION_MIN ||
	    m->version > SANTA_PROTOCOL_VERSION)
		return -EINVAL;
	w_put(&w, NULL, SANTA_MAGIC, 4);
	w_put(&w, NULL, m->version, 2);
	w_put(&w, NULL, m->type, 2);
	w_put(&w, NULL, 0, 4); /* length, known at the end */
	w_put(&w, NULL, m->seq, 4);
	encode_fields(&w, body(m->type), m);
	if (w.err)
		return w.err;
	santa_msg_set_length(buf, (uint32_t)w.len);
	return (int)w.len;
}

/* The header, checked in the order internal/protocol checks it, so that a
 * datagram with several faults gets the same errno everywhere. */
static int r_header(struct rbuf *r, size_t len, struct santa_msg *m)
{
	uint32_t magic, length;

	if (len > SANTA_MSG_MAX)
		return -EMSGSIZE;
	if (len < SANTA_HDR_LEN)
		return -EPROTO;
	magic = (uint32_t)r_uint(r, 4);
	m->version = (uint16_t)r_uint(r, 2);
	m->type = (uint16_t)r_uint(r, 2);
	length = (uint32_t)r_uint(r, 4);
	m->seq = (uint32_t)r_uint(r, 4);
	if (magic != SANTA_MAGIC || m->version < SANTA_PROTOCOL_VERSION_MIN ||
	    m->version > SANTA_PROTOCOL_VERSION)
		return -EPROTO;
	if (length > SANTA_MSG_MAX)
		return -EMSGSIZE;
	if (length != len || !santa_msg_type_valid(m->type))
		return -EPROTO;
	return 0;
}

int santa_msg_decode(const uint8_t *buf, size_t len, struct santa_msg *m)
{
	struct rbuf r = { .p = buf, .left = len, .m = m };
	int err;

	memset(m, 0, sizeof(*m));
	err = r_header(&r, len, m);
	if (err)
		return err;
	decode_fields(&r, body(m->type), m);
	if (!r.err && r.left)
		r.err = -EBADMSG; /* bytes left over */
	if (r.err)
		santa_msg_release(m);
	return r.err;
}

void santa_msg_release(struct santa_msg *m)
{
	union chunk *c = m->allocs, *next;

	for (; c; c = next) {
		next = c->next;
		free(c);
	}
	m->allocs = NULL;
}
