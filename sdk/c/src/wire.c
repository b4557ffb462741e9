/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The codec of docs/protocol.md: every message, both directions.
 * Little-endian, no padding.  Decoding trusts no length or count: every read
 * is bounded by what is left of the datagram, a count is checked against the
 * bytes left before anything is allocated, and a body must end exactly.
 * Encoding refuses what decoding would refuse, with the same errno.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Smallest encodings of list items: they bound a count before allocation. */
#define MIN_RULE_LEN 8      /* cond_off, empty pattern, reply_len, nproc, flags */
#define MIN_PROC_LEN 6      /* kind, reserved, dst, empty bytes */
#define MIN_IFACE_LEN 9     /* ifindex, empty name, empty xdp, tc */
#define STR16_MAX UINT16_MAX

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

/* ---- writer ---- */

struct wbuf {
	uint8_t *p;
	size_t len, cap;
	int err;
};

static void w_fail(struct wbuf *w, int err)
{
	if (!w->err)
		w->err = err;
}

static uint8_t *w_room(struct wbuf *w, size_t n)
{
	uint8_t *at;

	if (w->err)
		return NULL;
	if (n > w->cap - w->len) {
		w->err = -EMSGSIZE;
		return NULL;
	}
	at = w->p + w->len;
	w->len += n;
	return at;
}

static void w_uint(struct wbuf *w, uint64_t v, size_t width)
{
	uint8_t *at = w_room(w, width);
	size_t i;

	if (at)
		for (i = 0; i < width; i++)
			at[i] = (uint8_t)(v >> (8 * i));
}

static void w_u8(struct wbuf *w, uint8_t v) { w_uint(w, v, 1); }
static void w_u16(struct wbuf *w, uint16_t v) { w_uint(w, v, 2); }
static void w_u32(struct wbuf *w, uint32_t v) { w_uint(w, v, 4); }
static void w_u64(struct wbuf *w, uint64_t v) { w_uint(w, v, 8); }

static void w_raw(struct wbuf *w, const void *data, size_t n)
{
	uint8_t *at = w_room(w, n);

	if (at && n)
		memcpy(at, data, n);
}

static void w_bytes16(struct wbuf *w, const void *data, uint16_t n)
{
	w_u16(w, n);
	w_raw(w, data, n);
}

static void w_str16(struct wbuf *w, const struct santa_bytes *b, size_t max)
{
	if (b->len > max || !utf8_valid(b->ptr, b->len))
		w_fail(w, -EINVAL);
	w_bytes16(w, b->ptr, b->len);
}

static void w_flag(struct wbuf *w, uint8_t v)
{
	if (v > 1)
		w_fail(w, -EINVAL);
	w_u8(w, v);
}

static void w_count(struct wbuf *w, uint32_t n, uint32_t min)
{
	if (n < min)
		w_fail(w, -EINVAL);
	w_u32(w, n);
}

/* ---- reader ---- */

struct rbuf {
	const uint8_t *p;
	size_t left;
	int err;
};

static void r_fail(struct rbuf *r, int err)
{
	if (!r->err)
		r->err = err;
}

static const uint8_t *r_take(struct rbuf *r, size_t n)
{
	const uint8_t *at;

	if (r->err)
		return NULL;
	if (n > r->left) {
		r->err = -EBADMSG; /* the body ends inside a field */
		return NULL;
	}
	at = r->p;
	r->p += n;
	r->left -= n;
	return at;
}

static uint64_t r_uint(struct rbuf *r, size_t width)
{
	const uint8_t *at = r_take(r, width);
	uint64_t v = 0;
	size_t i;

	if (at)
		for (i = width; i-- > 0;)
			v = v << 8 | at[i];
	return v;
}

static uint8_t r_u8(struct rbuf *r) { return (uint8_t)r_uint(r, 1); }
static uint16_t r_u16(struct rbuf *r) { return (uint16_t)r_uint(r, 2); }
static uint32_t r_u32(struct rbuf *r) { return (uint32_t)r_uint(r, 4); }
static uint64_t r_u64(struct rbuf *r) { return r_uint(r, 8); }

static struct santa_bytes r_bytes16(struct rbuf *r)
{
	struct santa_bytes b = { 0 };
	uint16_t n = r_u16(r);
	const uint8_t *at = r_take(r, n);

	if (at) {
		b.ptr = at;
		b.len = n;
	}
	return b;
}

/* A string16: at most max bytes of UTF-8, else EINVAL. */
static struct santa_bytes r_str16(struct rbuf *r, size_t max)
{
	struct santa_bytes b = r_bytes16(r);

	if (!r->err && (b.len > max || !utf8_valid(b.ptr, b.len)))
		r_fail(r, -EINVAL);
	return b;
}

/* A u8 that is 0 or 1, else EINVAL. */
static uint8_t r_flag(struct rbuf *r)
{
	uint8_t v = r_u8(r);

	if (!r->err && v > 1)
		r_fail(r, -EINVAL);
	return v;
}

/* A u8 that must be 0 (flags, reserved), else EINVAL. */
static uint8_t r_zero(struct rbuf *r)
{
	uint8_t v = r_u8(r);

	if (!r->err && v)
		r_fail(r, -EINVAL);
	return v;
}

/* A list count just read: at least min (else EINVAL), and count items of at
 * least item_size bytes must fit in what is left (else EBADMSG). */
static uint32_t r_check_count(struct rbuf *r, uint64_t count, uint32_t min, size_t item_size)
{
	if (r->err)
		return 0;
	if (count < min) {
		r_fail(r, -EINVAL);
		return 0;
	}
	if (count * item_size > r->left) {
		r_fail(r, -EBADMSG);
		return 0;
	}
	return (uint32_t)count;
}

static uint32_t r_count32(struct rbuf *r, uint32_t min, size_t item_size)
{
	uint32_t n = r_u32(r);

	return r_check_count(r, n, min, item_size);
}

/* ---- message types ---- */

static const char *const type_names[SANTA_TYPE_MAX + 1] = {
	[SANTA_HELLO] = "HELLO",
	[SANTA_ATTACH] = "ATTACH",
	[SANTA_DETACH] = "DETACH",
	[SANTA_ADD_RULES] = "ADD_RULES",
	[SANTA_REPLACE_RULES] = "REPLACE_RULES",
	[SANTA_DELETE_RULES] = "DELETE_RULES",
	[SANTA_BEGIN] = "BEGIN",
	[SANTA_COMMIT] = "COMMIT",
	[SANTA_ABORT] = "ABORT",
	[SANTA_LIST_SERVICES] = "LIST_SERVICES",
	[SANTA_LIST_RULES] = "LIST_RULES",
	[SANTA_RULE_STATS] = "RULE_STATS",
	[SANTA_SERVICE_STATS] = "SERVICE_STATS",
	[SANTA_STATUS] = "STATUS",
};

const char *santa_msg_type_name(uint16_t type)
{
	if (type == SANTA_ERROR)
		return "ERROR";
	type &= (uint16_t)~SANTA_REPLY;
	return type >= 1 && type <= SANTA_TYPE_MAX ? type_names[type] : NULL;
}

bool santa_msg_type_valid(uint16_t type)
{
	return santa_msg_type_name(type) != NULL;
}

/* Smallest count of a request's list: ADD_RULES needs a rule. */
static uint32_t batch_min(uint16_t type)
{
	return type == SANTA_ADD_RULES ? 1 : 0;
}

/* ---- shared structures ---- */

size_t santa_rule_wire_size(const struct santa_rule *r)
{
	size_t n = MIN_RULE_LEN + r->pattern_len, i;

	for (i = 0; i < r->nproc; i++)
		n += r->procs[i].kind == SANTA_PROC_PUT ? MIN_PROC_LEN + (size_t)r->procs[i].len
							: 2 + 6;
	return n;
}

static void w_rule(struct wbuf *w, const struct santa_rule *r)
{
	size_t i;

	if (!r || r->nproc > SANTA_MAX_NPROC || r->flags) {
		w_fail(w, -EINVAL);
		return;
	}
	w_u16(w, r->cond_off);
	w_bytes16(w, r->pattern, r->pattern_len);
	w_u16(w, r->reply_len);
	w_u8(w, (uint8_t)r->nproc);
	w_u8(w, r->flags);
	for (i = 0; i < r->nproc; i++) {
		const struct santa_proc *p = &r->procs[i];

		w_u8(w, p->kind);
		w_u8(w, 0); /* reserved */
		switch (p->kind) {
		case SANTA_PROC_PUT:
			w_u16(w, p->dst);
			w_bytes16(w, p->data, p->len);
			break;
		case SANTA_PROC_COPY:
			w_u16(w, p->src);
			w_u16(w, p->len);
			w_u16(w, p->dst);
			break;
		default:
			w_fail(w, -EINVAL);
		}
	}
}

static void *dup_bytes(struct rbuf *r, struct santa_bytes b)
{
	void *p;

	if (r->err || !b.len)
		return NULL;
	p = malloc(b.len);
	if (!p)
		r_fail(r, -ENOMEM);
	else
		memcpy(p, b.ptr, b.len);
	return p;
}

static void r_proc(struct rbuf *r, struct santa_rule *rule)
{
	struct santa_proc p = { .kind = r_u8(r) };
	int err;

	r_zero(r); /* reserved */
	if (!r->err && p.kind != SANTA_PROC_PUT && p.kind != SANTA_PROC_COPY)
		r_fail(r, -EINVAL); /* and its size is unknown: stop here */
	if (p.kind == SANTA_PROC_PUT) {
		struct santa_bytes data;

		p.dst = r_u16(r);
		data = r_bytes16(r);
		p.len = data.len;
		p.data = dup_bytes(r, data);
	} else {
		p.src = r_u16(r);
		p.len = r_u16(r);
		p.dst = r_u16(r);
	}
	if (r->err) {
		free(p.data);
		return;
	}
	err = santa_rule_add_proc(rule, &p);
	if (err) {
		free(p.data);
		r_fail(r, err);
	}
}

static struct santa_rule *r_rule(struct rbuf *r)
{
	struct santa_rule *rule = santa_rule_alloc();
	struct santa_bytes pat;
	uint32_t nproc, i;

	if (!rule) {
		r_fail(r, -ENOMEM);
		return NULL;
	}
	rule->cond_off = r_u16(r);
	pat = r_bytes16(r);
	rule->pattern = dup_bytes(r, pat);
	if (rule->pattern)
		rule->pattern_len = pat.len;
	rule->reply_len = r_u16(r);
	nproc = r_check_count(r, r_u8(r), 0, MIN_PROC_LEN);
	rule->flags = r_zero(r);
	for (i = 0; i < nproc && !r->err; i++)
		r_proc(r, rule);
	if (r->err) {
		santa_rule__free(rule);
		return NULL;
	}
	return rule;
}

static void w_service(struct wbuf *w, const struct santa_service *s)
{
	w_u32(w, s->service_id);
	w_u8(w, s->protocol);
	w_u8(w, s->family);
	w_u16(w, s->port);
	w_raw(w, s->addr, sizeof(s->addr));
	w_u64(w, s->cookie);
	w_u64(w, s->netns_cookie);
	w_u32(w, s->owner_uid);
	w_u32(w, s->rules);
}

static void r_service(struct rbuf *r, struct santa_service *s)
{
	const uint8_t *addr;

	s->service_id = r_u32(r);
	s->protocol = r_u8(r);
	s->family = r_u8(r);
	s->port = r_u16(r);
	addr = r_take(r, sizeof(s->addr));
	if (addr)
		memcpy(s->addr, addr, sizeof(s->addr));
	s->cookie = r_u64(r);
	s->netns_cookie = r_u64(r);
	s->owner_uid = r_u32(r);
	s->rules = r_u32(r);
}

/* ---- encode ---- */

static void w_batch(struct wbuf *w, const struct santa_msg *m, uint16_t type)
{
	bool ids = type != SANTA_ADD_RULES, rules = type != SANTA_DELETE_RULES;
	uint32_t i, n = m->u.batch.count;

	w_u32(w, m->u.batch.service_id);
	w_u32(w, m->u.batch.txn);
	w_count(w, n, batch_min(type));
	if (n && ((ids && !m->u.batch.rule_ids) || (rules && !m->u.batch.rules)))
		w_fail(w, -EINVAL);
	for (i = 0; i < n && !w->err; i++) {
		if (ids)
			w_u32(w, m->u.batch.rule_ids[i]);
		if (rules)
			w_rule(w, m->u.batch.rules[i]);
	}
}

static void w_request(struct wbuf *w, const struct santa_msg *m, uint16_t type)
{
	switch (type) {
	case SANTA_HELLO:
		w_u16(w, m->u.hello.min_version);
		w_u16(w, m->u.hello.max_version);
		w_str16(w, &m->u.hello.client, SANTA_CLIENT_NAME_MAX);
		break;
	case SANTA_ATTACH:
		w_u32(w, m->u.attach.flags); /* 0; santad, not the codec, refuses others */
		break;
	case SANTA_DETACH:
	case SANTA_BEGIN:
	case SANTA_SERVICE_STATS:
		w_u32(w, m->u.svc.service_id);
		break;
	case SANTA_ADD_RULES:
	case SANTA_REPLACE_RULES:
	case SANTA_DELETE_RULES:
		w_batch(w, m, type);
		break;
	case SANTA_COMMIT:
	case SANTA_ABORT:
		w_u32(w, m->u.txn.txn);
		break;
	case SANTA_LIST_RULES:
	case SANTA_RULE_STATS:
		w_u32(w, m->u.page.service_id);
		w_u32(w, m->u.page.start);
		w_u32(w, m->u.page.max);
		break;
	case SANTA_LIST_SERVICES:
	case SANTA_STATUS:
		break;
	}
}

static void w_reply(struct wbuf *w, const struct santa_msg *m, uint16_t type)
{
	uint32_t i;

	switch (type) {
	case SANTA_HELLO:
		w_u16(w, m->u.hello_reply.version);
		w_u32(w, m->u.hello_reply.uid);
		w_u32(w, m->u.hello_reply.gid);
		w_u32(w, m->u.hello_reply.pid);
		w_flag(w, m->u.hello_reply.admin);
		w_u32(w, m->u.hello_reply.quota_rules);
		w_u64(w, m->u.hello_reply.quota_bytes);
		w_str16(w, &m->u.hello_reply.daemon, STR16_MAX);
		break;
	case SANTA_ATTACH:
		w_service(w, &m->u.service);
		break;
	case SANTA_ADD_RULES:
		w_u32(w, m->u.ids.count);
		for (i = 0; i < m->u.ids.count && !w->err; i++)
			w_u32(w, m->u.ids.rule_ids[i]);
		break;
	case SANTA_COMMIT:
		w_u32(w, m->u.commit.added);
		break;
	case SANTA_BEGIN:
		w_u32(w, m->u.txn.txn);
		break;
	case SANTA_LIST_SERVICES:
		w_u32(w, m->u.services.count);
		for (i = 0; i < m->u.services.count && !w->err; i++)
			w_service(w, &m->u.services.services[i]);
		break;
	case SANTA_LIST_RULES:
		w_u32(w, m->u.rules.count);
		w_u32(w, m->u.rules.next);
		for (i = 0; i < m->u.rules.count && !w->err; i++) {
			w_u32(w, m->u.rules.rule_ids[i]);
			w_rule(w, m->u.rules.rules[i]);
		}
		break;
	case SANTA_RULE_STATS:
		w_u32(w, m->u.counters.count);
		w_u32(w, m->u.counters.next);
		for (i = 0; i < m->u.counters.count && !w->err; i++) {
			w_u32(w, m->u.counters.counters[i].rule_id);
			w_u64(w, m->u.counters.counters[i].hits);
			w_u64(w, m->u.counters.counters[i].bytes);
		}
		break;
	case SANTA_SERVICE_STATS:
		w_u64(w, m->u.stats.matched);
		w_u64(w, m->u.stats.passed);
		w_u64(w, m->u.stats.fallback);
		w_u64(w, m->u.stats.bad_csum);
		w_u32(w, m->u.stats.rules);
		w_u64(w, m->u.stats.rule_bytes);
		break;
	case SANTA_STATUS:
		w_str16(w, &m->u.status.daemon, STR16_MAX);
		w_u32(w, m->u.status.rules);
		w_u32(w, m->u.status.capacity);
		w_u32(w, m->u.status.services);
		w_u16(w, m->u.status.count);
		for (i = 0; i < m->u.status.count && !w->err; i++) {
			const struct santa_wire_iface *ifc = &m->u.status.ifaces[i];

			w_u32(w, ifc->ifindex);
			w_str16(w, &ifc->name, STR16_MAX);
			w_str16(w, &ifc->xdp, STR16_MAX);
			w_flag(w, ifc->tc);
		}
		break;
	case SANTA_DETACH:
	case SANTA_REPLACE_RULES:
	case SANTA_DELETE_RULES:
	case SANTA_ABORT:
		break;
	}
}

void santa_msg_set_length(uint8_t *buf, uint32_t len)
{
	struct wbuf w = { .p = buf + 8, .cap = 4 }; /* after magic, version, type */

	w_u32(&w, len);
}

int santa_msg_encode(const struct santa_msg *m, uint8_t *buf, size_t cap)
{
	struct wbuf w = { .p = buf, .cap = cap < SANTA_MSG_MAX ? cap : SANTA_MSG_MAX };
	uint16_t type = m->type;

	if (!santa_msg_type_valid(type))
		return -EINVAL;
	w_u32(&w, SANTA_MAGIC);
	w_u16(&w, SANTA_PROTOCOL_VERSION);
	w_u16(&w, type);
	w_u32(&w, 0); /* length, known at the end */
	w_u32(&w, m->seq);
	if (type == SANTA_ERROR) {
		w_u32(&w, m->u.error.code);
		w_u32(&w, m->u.error.index);
		w_str16(&w, &m->u.error.message, SANTA_ERROR_MESSAGE_MAX);
	} else if (type & SANTA_REPLY) {
		w_reply(&w, m, type & (uint16_t)~SANTA_REPLY);
	} else {
		w_request(&w, m, type);
	}
	if (w.err)
		return w.err;
	santa_msg_set_length(buf, (uint32_t)w.len);
	return (int)w.len;
}

/* ---- decode ---- */

static void *r_alloc(struct rbuf *r, struct santa_msg *m, size_t count, size_t size)
{
	void **slot = !m->alloc[0] ? &m->alloc[0] : &m->alloc[1];

	if (r->err)
		return NULL;
	*slot = calloc(count ? count : 1, size);
	if (!*slot)
		r_fail(r, -ENOMEM);
	return *slot;
}

/* count rules, each after its rule id if ids, into m's arrays. */
static void r_rules(struct rbuf *r, struct santa_msg *m, uint32_t count, bool ids,
		    const uint32_t **ids_out, const struct santa_rule *const **rules_out)
{
	uint32_t *rule_ids = NULL, i;

	if (r->err)
		return;
	if (ids)
		rule_ids = r_alloc(r, m, count, sizeof(*rule_ids));
	if (!r->err) {
		m->alloc_rules = calloc(count ? count : 1, sizeof(*m->alloc_rules));
		if (!m->alloc_rules)
			r_fail(r, -ENOMEM);
	}
	for (i = 0; i < count && !r->err; i++) {
		if (ids)
			rule_ids[i] = r_u32(r);
		m->alloc_rules[i] = r_rule(r);
		if (m->alloc_rules[i])
			m->alloc_rule_cnt++;
	}
	*ids_out = rule_ids;
	*rules_out = (const struct santa_rule *const *)m->alloc_rules;
}

static void r_ids(struct rbuf *r, struct santa_msg *m, uint32_t count, const uint32_t **out)
{
	uint32_t *ids = r_alloc(r, m, count, sizeof(*ids)), i;

	for (i = 0; i < count && !r->err; i++)
		ids[i] = r_u32(r);
	*out = ids;
}

static void r_batch(struct rbuf *r, struct santa_msg *m, uint16_t type)
{
	bool ids = type != SANTA_ADD_RULES;
	size_t item = type == SANTA_DELETE_RULES ? 4 : (ids ? 4 : 0) + MIN_RULE_LEN;
	const uint32_t *unused;

	m->u.batch.service_id = r_u32(r);
	m->u.batch.txn = r_u32(r);
	m->u.batch.count = r_count32(r, batch_min(type), item);
	if (type == SANTA_DELETE_RULES)
		r_ids(r, m, m->u.batch.count, &m->u.batch.rule_ids);
	else if (ids)
		r_rules(r, m, m->u.batch.count, true, &m->u.batch.rule_ids, &m->u.batch.rules);
	else
		r_rules(r, m, m->u.batch.count, false, &unused, &m->u.batch.rules);
}

static void r_request(struct rbuf *r, struct santa_msg *m, uint16_t type)
{
	switch (type) {
	case SANTA_HELLO:
		m->u.hello.min_version = r_u16(r);
		m->u.hello.max_version = r_u16(r);
		m->u.hello.client = r_str16(r, SANTA_CLIENT_NAME_MAX);
		break;
	case SANTA_ATTACH:
		m->u.attach.flags = r_u32(r); /* 0; santad, not the codec, refuses others */
		break;
	case SANTA_DETACH:
	case SANTA_BEGIN:
	case SANTA_SERVICE_STATS:
		m->u.svc.service_id = r_u32(r);
		break;
	case SANTA_ADD_RULES:
	case SANTA_REPLACE_RULES:
	case SANTA_DELETE_RULES:
		r_batch(r, m, type);
		break;
	case SANTA_COMMIT:
	case SANTA_ABORT:
		m->u.txn.txn = r_u32(r);
		break;
	case SANTA_LIST_RULES:
	case SANTA_RULE_STATS:
		m->u.page.service_id = r_u32(r);
		m->u.page.start = r_u32(r);
		m->u.page.max = r_u32(r);
		break;
	case SANTA_LIST_SERVICES:
	case SANTA_STATUS:
		break;
	}
}

static void r_reply(struct rbuf *r, struct santa_msg *m, uint16_t type)
{
	uint32_t i;

	switch (type) {
	case SANTA_HELLO:
		m->u.hello_reply.version = r_u16(r);
		m->u.hello_reply.uid = r_u32(r);
		m->u.hello_reply.gid = r_u32(r);
		m->u.hello_reply.pid = r_u32(r);
		m->u.hello_reply.admin = r_flag(r);
		m->u.hello_reply.quota_rules = r_u32(r);
		m->u.hello_reply.quota_bytes = r_u64(r);
		m->u.hello_reply.daemon = r_str16(r, STR16_MAX);
		break;
	case SANTA_ATTACH:
		r_service(r, &m->u.service);
		break;
	case SANTA_ADD_RULES:
		m->u.ids.count = r_count32(r, 0, 4);
		r_ids(r, m, m->u.ids.count, &m->u.ids.rule_ids);
		break;
	case SANTA_COMMIT:
		m->u.commit.added = r_u32(r);
		break;
	case SANTA_BEGIN:
		m->u.txn.txn = r_u32(r);
		break;
	case SANTA_LIST_SERVICES: {
		struct santa_service *s;

		m->u.services.count = r_count32(r, 0, SANTA_SERVICE_LEN);
		s = r_alloc(r, m, m->u.services.count, sizeof(*s));
		for (i = 0; i < m->u.services.count && !r->err; i++)
			r_service(r, &s[i]);
		m->u.services.services = s;
		break;
	}
	case SANTA_LIST_RULES: {
		/* the count is checked where it stands, before `next` (as in Go) */
		m->u.rules.count = r_count32(r, 0, 4 + MIN_RULE_LEN);
		m->u.rules.next = r_u32(r);
		r_rules(r, m, m->u.rules.count, true, &m->u.rules.rule_ids, &m->u.rules.rules);
		break;
	}
	case SANTA_RULE_STATS: {
		struct santa_rule_counters *c;

		m->u.counters.count = r_count32(r, 0, SANTA_COUNTERS_LEN);
		m->u.counters.next = r_u32(r);
		c = r_alloc(r, m, m->u.counters.count, sizeof(*c));
		for (i = 0; i < m->u.counters.count && !r->err; i++) {
			c[i].rule_id = r_u32(r);
			c[i].hits = r_u64(r);
			c[i].bytes = r_u64(r);
		}
		m->u.counters.counters = c;
		break;
	}
	case SANTA_SERVICE_STATS:
		m->u.stats.matched = r_u64(r);
		m->u.stats.passed = r_u64(r);
		m->u.stats.fallback = r_u64(r);
		m->u.stats.bad_csum = r_u64(r);
		m->u.stats.rules = r_u32(r);
		m->u.stats.rule_bytes = r_u64(r);
		break;
	case SANTA_STATUS: {
		struct santa_wire_iface *ifc;

		m->u.status.daemon = r_str16(r, STR16_MAX);
		m->u.status.rules = r_u32(r);
		m->u.status.capacity = r_u32(r);
		m->u.status.services = r_u32(r);
		m->u.status.count = (uint16_t)r_check_count(r, r_u16(r), 0, MIN_IFACE_LEN);
		ifc = r_alloc(r, m, m->u.status.count, sizeof(*ifc));
		for (i = 0; i < m->u.status.count && !r->err; i++) {
			ifc[i].ifindex = r_u32(r);
			ifc[i].name = r_str16(r, STR16_MAX);
			ifc[i].xdp = r_str16(r, STR16_MAX);
			ifc[i].tc = r_flag(r);
		}
		m->u.status.ifaces = ifc;
		break;
	}
	case SANTA_DETACH:
	case SANTA_REPLACE_RULES:
	case SANTA_DELETE_RULES:
	case SANTA_ABORT:
		break;
	}
}

/* The header, checked in the order internal/protocol checks it, so that a
 * datagram with several faults gets the same errno everywhere. */
static int r_header(struct rbuf *r, size_t len, struct santa_msg *m)
{
	uint32_t magic, length;
	uint16_t version;

	if (len > SANTA_MSG_MAX)
		return -EMSGSIZE;
	if (len < SANTA_HDR_LEN)
		return -EPROTO;
	magic = r_u32(r);
	version = r_u16(r);
	m->type = r_u16(r);
	length = r_u32(r);
	m->seq = r_u32(r);
	if (magic != SANTA_MAGIC || version != SANTA_PROTOCOL_VERSION)
		return -EPROTO;
	if (length > SANTA_MSG_MAX)
		return -EMSGSIZE;
	if (length != len || !santa_msg_type_valid(m->type))
		return -EPROTO;
	return 0;
}

int santa_msg_decode(const uint8_t *buf, size_t len, struct santa_msg *m)
{
	struct rbuf r = { .p = buf, .left = len };
	int err;

	memset(m, 0, sizeof(*m));
	err = r_header(&r, len, m);
	if (err)
		return err;
	if (m->type == SANTA_ERROR) {
		m->u.error.code = r_u32(&r);
		m->u.error.index = r_u32(&r);
		m->u.error.message = r_str16(&r, SANTA_ERROR_MESSAGE_MAX);
	} else if (m->type & SANTA_REPLY) {
		r_reply(&r, m, m->type & (uint16_t)~SANTA_REPLY);
	} else {
		r_request(&r, m, m->type);
	}
	if (!r.err && r.left)
		r.err = -EBADMSG; /* bytes left over */
	if (r.err) {
		santa_msg_release(m);
		return r.err;
	}
	return 0;
}

void santa_msg_release(struct santa_msg *m)
{
	uint32_t i;

	for (i = 0; i < m->alloc_rule_cnt; i++)
		santa_rule__free(m->alloc_rules[i]);
	free(m->alloc_rules);
	free(m->alloc[0]);
	free(m->alloc[1]);
	m->alloc_rules = NULL;
	m->alloc_rule_cnt = 0;
	m->alloc[0] = m->alloc[1] = NULL;
}
