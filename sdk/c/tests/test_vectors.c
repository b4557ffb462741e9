/*
 * The shared protocol vectors (testdata/protocol/vectors.json, format in
 * docs/protocol.md "Test vectors") against libsanta's codec:
 *  - every vector: its JSON message is built into a struct santa_msg, encoded
 *    and compared with `hex`; `hex` is decoded and compared with the built
 *    message field by field (requests and replies alike);
 *  - every vector, cut short by one byte or more (length field adjusted) or
 *    with a byte too many, must be refused with EBADMSG;
 *  - every `invalid` vector must be refused with its named errno;
 *  - `constants`, santa_abi.h's that santa.h writes again (SANTA_SOL), must
 *    be santa.h's, and name none that santa.h lacks.
 * An unknown type name, field or errno name fails the test.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "json.h"

static int failures;
static const char *vname; /* the vector being checked */

__attribute__((format(printf, 1, 2)))
static bool fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "FAIL %s: ", vname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	failures++;
	return false;
}

/* ---- allocations of one vector ---- */

static void *keep[65536];
static size_t nkeep;

static void *kept(void *p)
{
	if (!p || nkeep == sizeof(keep) / sizeof(keep[0])) {
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	return keep[nkeep++] = p;
}

static struct santa_rule *kept_rules[4096];
static size_t nkept_rules;

static void release_all(void)
{
	while (nkeep)
		free(keep[--nkeep]);
	while (nkept_rules)
		santa_rule__free(kept_rules[--nkept_rules]);
}

/* ---- JSON objects whose every member must be used ---- */

struct obj {
	const struct json *j;
	const char *what;
	bool used[64];
	bool ok;
};

static struct obj obj_open(const struct json *j, const char *what)
{
	struct obj o = { .j = j, .what = what, .ok = true };

	if (!j || j->type != JSON_OBJECT || j->n > 64) {
		fail("%s is not an object", what);
		o.ok = false;
	}
	return o;
}

static const struct json *member(struct obj *o, const char *key)
{
	size_t i;

	if (!o->ok)
		return NULL;
	for (i = 0; i < o->j->n; i++)
		if (!strcmp(o->j->keys[i], key)) {
			o->used[i] = true;
			return &o->j->items[i];
		}
	o->ok = fail("%s has no field %s", o->what, key);
	return NULL;
}

static bool obj_close(struct obj *o)
{
	size_t i;

	if (!o->ok)
		return false;
	for (i = 0; i < o->j->n; i++)
		if (!o->used[i])
			o->ok = fail("%s has an unexpected field %s", o->what, o->j->keys[i]);
	return o->ok;
}

static uint64_t u(struct obj *o, const char *key, uint64_t max)
{
	const struct json *v = member(o, key);
	uint64_t n = 0;

	if (v && !json_uint(v, max, &n))
		o->ok = fail("%s.%s is not an integer in 0..%llu", o->what, key,
			     (unsigned long long)max);
	return n;
}

static const struct json *list(struct obj *o, const char *key)
{
	const struct json *v = member(o, key);

	if (v && v->type != JSON_ARRAY) {
		o->ok = fail("%s.%s is not a list", o->what, key);
		return NULL;
	}
	return v;
}

/* A JSON string as bytes (string16 fields). */
static struct santa_bytes text(struct obj *o, const char *key)
{
	const struct json *v = member(o, key);
	struct santa_bytes b = { 0 };

	if (v && (v->type != JSON_STRING || v->len > UINT16_MAX))
		o->ok = fail("%s.%s is not a string", o->what, key);
	else if (v) {
		b.ptr = (const uint8_t *)v->text;
		b.len = (uint16_t)v->len;
	}
	return b;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1; /* lowercase only, as the document says */
}

/* Lowercase hex to bytes; NULL on a bad string. */
static uint8_t *unhex(const char *s, size_t *len)
{
	size_t n = strlen(s), i;
	uint8_t *b;

	if (n % 2)
		return NULL;
	b = malloc(n / 2 + 1);
	if (!b)
		return NULL;
	for (i = 0; i < n / 2; i++) {
		int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);

		if (hi < 0 || lo < 0) {
			free(b);
			return NULL;
		}
		b[i] = (uint8_t)(hi << 4 | lo);
	}
	*len = n / 2;
	return b;
}

/* A hex string as bytes (pattern, put bytes, addr). */
static struct santa_bytes hexfield(struct obj *o, const char *key)
{
	const struct json *v = member(o, key);
	struct santa_bytes b = { 0 };
	size_t n = 0;
	uint8_t *p;

	if (!v)
		return b;
	if (v->type != JSON_STRING || !(p = unhex(v->text, &n)) || n > UINT16_MAX) {
		o->ok = fail("%s.%s is not a lowercase hex string", o->what, key);
		return b;
	}
	b.ptr = kept(p);
	b.len = (uint16_t)n;
	return b;
}

/* ---- JSON → struct santa_msg ---- */

static struct santa_rule *build_rule(const struct json *j, const char *what)
{
	struct obj o = obj_open(j, what);
	struct santa_rule *r = santa_rule_alloc();
	const struct json *procs;
	struct santa_bytes pat;
	size_t i;

	if (!r)
		exit(2);
	kept_rules[nkept_rules++] = r;
	r->cond_off = (uint16_t)u(&o, "cond_off", UINT16_MAX);
	pat = hexfield(&o, "pattern");
	r->pattern_len = pat.len;
	r->pattern = pat.len ? malloc(pat.len) : NULL;
	if (pat.len)
		memcpy(r->pattern, pat.ptr, pat.len);
	r->reply_len = (uint16_t)u(&o, "reply_len", UINT16_MAX);
	r->flags = (uint8_t)u(&o, "flags", UINT8_MAX);
	if (r->flags & SANTA_RULE_LENGTH) {
		r->min_len = (uint16_t)u(&o, "min_len", UINT16_MAX);
		r->max_len = (uint16_t)u(&o, "max_len", UINT16_MAX);
	}
	if (r->flags & SANTA_RULE_GUARD) {
		struct obj g = obj_open(member(&o, "guard"), "guard");
		struct santa_bytes key = hexfield(&g, "key");

		r->guard.key_len = key.len;
		r->guard.key = key.len ? malloc(key.len) : NULL;
		if (key.len)
			memcpy(r->guard.key, key.ptr, key.len);
		r->guard.gen = (uint32_t)u(&g, "gen", UINT32_MAX);
		r->guard.domain_gen = (uint32_t)u(&g, "domain_gen", UINT32_MAX);
		r->guard.epoch = (uint32_t)u(&g, "epoch", UINT32_MAX);
		r->guard.expires_in_ms = (uint32_t)u(&g, "expires_in_ms", UINT32_MAX);
		o.ok = obj_close(&g) && o.ok;
	}
	procs = list(&o, "processors");
	for (i = 0; procs && o.ok && i < procs->n; i++) {
		struct obj po = obj_open(&procs->items[i], "processor");
		const struct json *put, *copy;
		int err = 0;

		if (!po.ok || po.j->n != 1) {
			o.ok = fail("a processor is an object with one key, put or copy");
			break;
		}
		put = json_get(po.j, "put");
		copy = json_get(po.j, "copy");
		if (put) {
			struct obj x = obj_open(put, "put");
			uint16_t dst = (uint16_t)u(&x, "dst", UINT16_MAX);
			struct santa_bytes b = hexfield(&x, "bytes");

			o.ok = obj_close(&x);
			err = santa_rule__put(r, dst, b.ptr, b.len);
		} else if (copy) {
			struct obj x = obj_open(copy, "copy");
			uint16_t src = (uint16_t)u(&x, "src", UINT16_MAX);
			uint16_t len = (uint16_t)u(&x, "len", UINT16_MAX);
			uint16_t dst = (uint16_t)u(&x, "dst", UINT16_MAX);

			o.ok = obj_close(&x);
			err = santa_rule__copy(r, src, len, dst);
		} else {
			o.ok = fail("unknown processor kind %s", po.j->keys[0]);
		}
		if (err)
			o.ok = fail("building a processor: %s", santa_strerror(err));
	}
	return obj_close(&o) ? r : NULL;
}

static void build_service(const struct json *j, uint16_t version, struct santa_service *s,
			  bool *ok)
{
	struct obj o = obj_open(j, "service");
	struct santa_bytes addr, manager;

	s->service_id = (uint32_t)u(&o, "service_id", UINT32_MAX);
	s->protocol = (uint8_t)u(&o, "protocol", UINT8_MAX);
	s->family = (uint8_t)u(&o, "family", UINT8_MAX);
	s->port = (uint16_t)u(&o, "port", UINT16_MAX);
	addr = hexfield(&o, "addr");
	if (o.ok && addr.len != sizeof(s->addr))
		o.ok = fail("service.addr is %u bytes, not 16", addr.len);
	else if (o.ok)
		memcpy(s->addr, addr.ptr, sizeof(s->addr));
	s->cookie = u(&o, "cookie", UINT64_MAX);
	s->netns_cookie = u(&o, "netns_cookie", UINT64_MAX);
	s->owner_uid = (uint32_t)u(&o, "owner_uid", UINT32_MAX);
	s->rules = (uint32_t)u(&o, "rules", UINT32_MAX);
	if (version >= 2) {
		manager = text(&o, "manager");
		if (o.ok && manager.len >= sizeof(s->manager))
			o.ok = fail("service.manager is %u bytes, over %zu", manager.len,
				    sizeof(s->manager) - 1);
		else if (o.ok)
			memcpy(s->manager, manager.ptr, manager.len);
	}
	if (!obj_close(&o))
		*ok = false;
}

static const uint32_t *u32_list(struct obj *o, const char *key, uint32_t *count)
{
	const struct json *l = list(o, key);
	uint32_t *ids;
	size_t i;

	*count = 0;
	if (!l)
		return NULL;
	ids = kept(calloc(l->n + 1, sizeof(*ids)));
	for (i = 0; i < l->n; i++) {
		uint64_t v;

		if (!json_uint(&l->items[i], UINT32_MAX, &v)) {
			o->ok = fail("%s.%s[%zu] is not a u32", o->what, key, i);
			return NULL;
		}
		ids[i] = (uint32_t)v;
	}
	*count = (uint32_t)l->n;
	return ids;
}

/* A list of {rule_id, rule} (REPLACE_RULES updates, LIST_RULES rules). */
static void rule_entries(struct obj *o, const char *key, uint32_t *count, const uint32_t **ids_out,
			 const struct santa_rule *const **rules_out)
{
	const struct json *l = list(o, key);
	const struct santa_rule **rules;
	uint32_t *ids;
	size_t i;

	*count = 0;
	if (!l)
		return;
	ids = kept(calloc(l->n + 1, sizeof(*ids)));
	rules = kept(calloc(l->n + 1, sizeof(*rules)));
	for (i = 0; i < l->n && o->ok; i++) {
		struct obj e = obj_open(&l->items[i], key);

		ids[i] = (uint32_t)u(&e, "rule_id", UINT32_MAX);
		rules[i] = build_rule(member(&e, "rule"), "rule");
		if (!obj_close(&e) || !rules[i])
			o->ok = false;
	}
	*count = (uint32_t)l->n;
	*ids_out = ids;
	*rules_out = rules;
}

static bool build_request(struct obj *b, struct santa_msg *m, uint16_t type)
{
	const struct json *l;
	size_t i;

	switch (type) {
	case SANTA_HELLO:
		m->u.hello.min_version = (uint16_t)u(b, "min_version", UINT16_MAX);
		m->u.hello.max_version = (uint16_t)u(b, "max_version", UINT16_MAX);
		m->u.hello.client = text(b, "client");
		break;
	case SANTA_ATTACH:
		m->u.attach.flags = (uint32_t)u(b, "flags", UINT32_MAX);
		break;
	case SANTA_DETACH:
	case SANTA_BEGIN:
	case SANTA_SERVICE_STATS:
		m->u.svc.service_id = (uint32_t)u(b, "service_id", UINT32_MAX);
		break;
	case SANTA_ADD_RULES: {
		const struct santa_rule **rules;

		m->u.batch.service_id = (uint32_t)u(b, "service_id", UINT32_MAX);
		m->u.batch.txn = (uint32_t)u(b, "txn", UINT32_MAX);
		l = list(b, "rules");
		if (!l)
			break;
		rules = kept(calloc(l->n + 1, sizeof(*rules)));
		for (i = 0; i < l->n && b->ok; i++)
			if (!(rules[i] = build_rule(&l->items[i], "rule")))
				b->ok = false;
		m->u.batch.count = (uint32_t)l->n;
		m->u.batch.rules = rules;
		break;
	}
	case SANTA_REPLACE_RULES:
		m->u.batch.service_id = (uint32_t)u(b, "service_id", UINT32_MAX);
		m->u.batch.txn = (uint32_t)u(b, "txn", UINT32_MAX);
		rule_entries(b, "updates", &m->u.batch.count, &m->u.batch.rule_ids,
			     &m->u.batch.rules);
		break;
	case SANTA_DELETE_RULES:
		m->u.batch.service_id = (uint32_t)u(b, "service_id", UINT32_MAX);
		m->u.batch.txn = (uint32_t)u(b, "txn", UINT32_MAX);
		m->u.batch.rule_ids = u32_list(b, "rule_ids", &m->u.batch.count);
		break;
	case SANTA_COMMIT:
	case SANTA_ABORT:
		m->u.txn.txn = (uint32_t)u(b, "txn", UINT32_MAX);
		break;
	case SANTA_LIST_RULES:
	case SANTA_RULE_STATS:
		m->u.page.service_id = (uint32_t)u(b, "service_id", UINT32_MAX);
		m->u.page.start = (uint32_t)u(b, "start", UINT32_MAX);
		m->u.page.max = (uint32_t)u(b, "max", UINT32_MAX);
		break;
	case SANTA_LIST_SERVICES: /* fields from version 7 */
		if (m->version >= 7) {
			m->u.page.start = (uint32_t)u(b, "start", UINT32_MAX);
			m->u.page.max = (uint32_t)u(b, "max", UINT32_MAX);
		}
		break;
	case SANTA_STATUS:
		break;
	}
	return b->ok;
}

static bool build_reply(struct obj *b, struct santa_msg *m, uint16_t type)
{
	const struct json *l;
	size_t i;

	switch (type) {
	case SANTA_HELLO:
		m->u.hello_reply.version = (uint16_t)u(b, "version", UINT16_MAX);
		m->u.hello_reply.uid = (uint32_t)u(b, "uid", UINT32_MAX);
		m->u.hello_reply.gid = (uint32_t)u(b, "gid", UINT32_MAX);
		m->u.hello_reply.pid = (uint32_t)u(b, "pid", UINT32_MAX);
		m->u.hello_reply.admin = (uint8_t)u(b, "admin", 1);
		m->u.hello_reply.quota_rules = (uint32_t)u(b, "quota_rules", UINT32_MAX);
		m->u.hello_reply.quota_bytes = u(b, "quota_bytes", UINT64_MAX);
		m->u.hello_reply.daemon = text(b, "daemon");
		break;
	case SANTA_ATTACH:
		build_service(b->j, m->version, &m->u.service, &b->ok);
		for (i = 0; i < b->j->n; i++)
			b->used[i] = true; /* checked by build_service */
		break;
	case SANTA_ADD_RULES:
		m->u.ids.rule_ids = u32_list(b, "rule_ids", &m->u.ids.count);
		break;
	case SANTA_COMMIT:
		m->u.commit.added = (uint32_t)u(b, "added", UINT32_MAX);
		break;
	case SANTA_BEGIN:
		m->u.txn.txn = (uint32_t)u(b, "txn", UINT32_MAX);
		break;
	case SANTA_LIST_SERVICES: {
		struct santa_service *s;

		if (m->version >= 7)
			m->u.services.next = (uint32_t)u(b, "next", UINT32_MAX);
		l = list(b, "services");
		if (!l)
			break;
		s = kept(calloc(l->n + 1, sizeof(*s)));
		for (i = 0; i < l->n; i++)
			build_service(&l->items[i], m->version, &s[i], &b->ok);
		m->u.services.count = (uint32_t)l->n;
		m->u.services.services = s;
		break;
	}
	case SANTA_LIST_RULES:
		m->u.rules.next = (uint32_t)u(b, "next", UINT32_MAX);
		rule_entries(b, "rules", &m->u.rules.count, &m->u.rules.rule_ids,
			     &m->u.rules.rules);
		break;
	case SANTA_RULE_STATS: {
		struct santa_rule_counters *c;

		m->u.counters.next = (uint32_t)u(b, "next", UINT32_MAX);
		l = list(b, "counters");
		if (!l)
			break;
		c = kept(calloc(l->n + 1, sizeof(*c)));
		for (i = 0; i < l->n; i++) {
			struct obj e = obj_open(&l->items[i], "counters");

			c[i].rule_id = (uint32_t)u(&e, "rule_id", UINT32_MAX);
			c[i].hits = u(&e, "hits", UINT64_MAX);
			c[i].bytes = u(&e, "bytes", UINT64_MAX);
			if (!obj_close(&e))
				b->ok = false;
		}
		m->u.counters.count = (uint32_t)l->n;
		m->u.counters.counters = c;
		break;
	}
	case SANTA_SERVICE_STATS:
		m->u.stats.matched = u(b, "matched", UINT64_MAX);
		m->u.stats.passed = u(b, "passed", UINT64_MAX);
		m->u.stats.fallback = u(b, "fallback", UINT64_MAX);
		m->u.stats.bad_csum = u(b, "bad_csum", UINT64_MAX);
		m->u.stats.rules = (uint32_t)u(b, "rules", UINT32_MAX);
		m->u.stats.rule_bytes = u(b, "rule_bytes", UINT64_MAX);
		if (m->version >= 2) {
			m->u.stats.tc_checksum = u(b, "tc_checksum", UINT64_MAX);
			m->u.stats.tc_too_long = u(b, "tc_too_long", UINT64_MAX);
			m->u.stats.tc_no_xdp = u(b, "tc_no_xdp", UINT64_MAX);
		}
		break;
	case SANTA_STATUS: {
		struct santa_wire_iface *ifc;

		m->u.status.daemon = text(b, "daemon");
		m->u.status.rules = (uint32_t)u(b, "rules", UINT32_MAX);
		m->u.status.capacity = (uint32_t)u(b, "capacity", UINT32_MAX);
		m->u.status.services = (uint32_t)u(b, "services", UINT32_MAX);
		l = list(b, "interfaces");
		if (!l)
			break;
		if (l->n > UINT16_MAX)
			return fail("more than 65535 interfaces");
		ifc = kept(calloc(l->n + 1, sizeof(*ifc)));
		for (i = 0; i < l->n; i++) {
			struct obj e = obj_open(&l->items[i], "interface");

			ifc[i].ifindex = (uint32_t)u(&e, "ifindex", UINT32_MAX);
			ifc[i].name = text(&e, "name");
			ifc[i].xdp = text(&e, "xdp");
			ifc[i].tc = (uint8_t)u(&e, "tc", 1);
			if (!obj_close(&e))
				b->ok = false;
		}
		m->u.status.count = (uint16_t)l->n;
		m->u.status.ifaces = ifc;
		break;
	}
	case SANTA_DETACH:
	case SANTA_REPLACE_RULES:
	case SANTA_DELETE_RULES:
	case SANTA_ABORT:
		break;
	}
	return b->ok;
}

static uint16_t type_by_name(const char *name)
{
	uint16_t t;

	if (!strcmp(name, "ERROR"))
		return SANTA_ERROR;
	for (t = 1; t <= SANTA_TYPE_MAX; t++)
		if (!strcmp(santa_msg_type_name(t), name))
			return t;
	return 0;
}

static bool build(const struct json *j, struct santa_msg *m)
{
	struct obj o = obj_open(j, "message"), b;
	const struct json *type = member(&o, "type"), *reply = member(&o, "reply");
	uint16_t t;

	memset(m, 0, sizeof(*m));
	m->version = (uint16_t)u(&o, "version", UINT16_MAX);
	m->seq = (uint32_t)u(&o, "seq", UINT32_MAX);
	if (!o.ok)
		return false;
	if (type->type != JSON_STRING || !(t = type_by_name(type->text)))
		return fail("unknown message type %s", type->type == JSON_STRING ? type->text : "?");
	if (reply->type != JSON_BOOL)
		return fail("reply is not a boolean");
	if (t == SANTA_ERROR && !reply->boolean)
		return fail("ERROR is always a reply");
	m->type = t == SANTA_ERROR ? t : (uint16_t)(t | (reply->boolean ? SANTA_REPLY : 0));

	b = obj_open(member(&o, "body"), "body");
	if (!b.ok)
		return false;
	if (t == SANTA_ERROR) {
		m->u.error.code = (uint32_t)u(&b, "code", UINT32_MAX);
		m->u.error.index = (uint32_t)u(&b, "index", UINT32_MAX);
		m->u.error.message = text(&b, "message");
	} else if (reply->boolean) {
		build_reply(&b, m, t);
	} else {
		build_request(&b, m, t);
	}
	return obj_close(&b) && obj_close(&o);
}

/* ---- comparing a decoded message with the built one ---- */

static bool diff(const char *field, unsigned long long want, unsigned long long got)
{
	return fail("decoded %s is %llu, want %llu", field, got, want);
}

#define EQ(f) do { if (w->f != g->f) return diff(#f, w->f, g->f); } while (0)

static bool bytes_eq(const char *field, struct santa_bytes w, struct santa_bytes g)
{
	if (w.len != g.len || (w.len && memcmp(w.ptr, g.ptr, w.len)))
		return fail("decoded %s differs (%u bytes, want %u)", field, g.len, w.len);
	return true;
}

static bool mem_eq(const char *field, const void *w, size_t wlen, const void *g, size_t glen)
{
	if (wlen != glen || (wlen && memcmp(w, g, wlen)))
		return fail("decoded %s differs (%zu bytes, want %zu)", field, glen, wlen);
	return true;
}

static bool rule_eq(const struct santa_rule *w, const struct santa_rule *g)
{
	size_t i;

	EQ(cond_off);
	EQ(reply_len);
	EQ(flags);
	EQ(min_len);
	EQ(max_len);
	EQ(guard.gen);
	EQ(guard.domain_gen);
	EQ(guard.epoch);
	EQ(guard.expires_in_ms);
	EQ(nproc);
	if (!mem_eq("pattern", w->pattern, w->pattern_len, g->pattern, g->pattern_len) ||
	    !mem_eq("guard key", w->guard.key, w->guard.key_len, g->guard.key, g->guard.key_len))
		return false;
	for (i = 0; i < w->nproc; i++) {
		const struct santa_proc *wp = &w->procs[i], *gp = &g->procs[i];

		if (wp->kind != gp->kind || wp->dst != gp->dst || wp->len != gp->len ||
		    (wp->kind == SANTA_PROC_COPY && wp->src != gp->src))
			return fail("decoded processor %zu differs", i);
		if (wp->kind == SANTA_PROC_PUT &&
		    !mem_eq("put bytes", wp->data, wp->len, gp->data, gp->len))
			return false;
	}
	return true;
}

static bool service_eq(const struct santa_service *w, const struct santa_service *g)
{
	EQ(service_id);
	EQ(protocol);
	EQ(family);
	EQ(port);
	EQ(cookie);
	EQ(netns_cookie);
	EQ(owner_uid);
	EQ(rules);
	if (strcmp(w->manager, g->manager))
		return fail("decoded manager is \"%s\", want \"%s\"", g->manager, w->manager);
	return mem_eq("addr", w->addr, 16, g->addr, 16);
}

static bool rules_eq(uint32_t n, const uint32_t *wid, const uint32_t *gid,
		     const struct santa_rule *const *wr, const struct santa_rule *const *gr)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		if (wid && wid[i] != gid[i])
			return diff("rule_id", wid[i], gid[i]);
		if (wr && !rule_eq(wr[i], gr[i]))
			return false;
	}
	return true;
}

static bool msg_eq(const struct santa_msg *w, const struct santa_msg *g)
{
	uint32_t i;

	EQ(version);
	EQ(type);
	EQ(seq);
	if (w->type == SANTA_ERROR) {
		EQ(u.error.code);
		EQ(u.error.index);
		return bytes_eq("message", w->u.error.message, g->u.error.message);
	}
	switch (w->type) {
	case SANTA_HELLO:
		EQ(u.hello.min_version);
		EQ(u.hello.max_version);
		return bytes_eq("client", w->u.hello.client, g->u.hello.client);
	case SANTA_ATTACH:
		EQ(u.attach.flags);
		return true;
	case SANTA_DETACH:
	case SANTA_BEGIN:
	case SANTA_SERVICE_STATS:
		EQ(u.svc.service_id);
		return true;
	case SANTA_ADD_RULES:
	case SANTA_REPLACE_RULES:
	case SANTA_DELETE_RULES:
		EQ(u.batch.service_id);
		EQ(u.batch.txn);
		EQ(u.batch.count);
		return rules_eq(w->u.batch.count, w->u.batch.rule_ids, g->u.batch.rule_ids,
				w->u.batch.rules, g->u.batch.rules);
	case SANTA_COMMIT:
	case SANTA_ABORT:
	case SANTA_BEGIN | SANTA_REPLY:
		EQ(u.txn.txn);
		return true;
	case SANTA_LIST_RULES:
	case SANTA_RULE_STATS:
		EQ(u.page.service_id);
		EQ(u.page.start);
		EQ(u.page.max);
		return true;
	case SANTA_HELLO | SANTA_REPLY:
		EQ(u.hello_reply.version);
		EQ(u.hello_reply.uid);
		EQ(u.hello_reply.gid);
		EQ(u.hello_reply.pid);
		EQ(u.hello_reply.admin);
		EQ(u.hello_reply.quota_rules);
		EQ(u.hello_reply.quota_bytes);
		return bytes_eq("daemon", w->u.hello_reply.daemon, g->u.hello_reply.daemon);
	case SANTA_ATTACH | SANTA_REPLY:
		return service_eq(&w->u.service, &g->u.service);
	case SANTA_COMMIT | SANTA_REPLY:
		EQ(u.commit.added);
		return true;
	case SANTA_ADD_RULES | SANTA_REPLY:
		EQ(u.ids.count);
		return rules_eq(w->u.ids.count, w->u.ids.rule_ids, g->u.ids.rule_ids, NULL, NULL);
	case SANTA_LIST_SERVICES | SANTA_REPLY:
		EQ(u.services.count);
		EQ(u.services.next);
		for (i = 0; i < w->u.services.count; i++)
			if (!service_eq(&w->u.services.services[i], &g->u.services.services[i]))
				return false;
		return true;
	case SANTA_LIST_RULES | SANTA_REPLY:
		EQ(u.rules.count);
		EQ(u.rules.next);
		return rules_eq(w->u.rules.count, w->u.rules.rule_ids, g->u.rules.rule_ids,
				w->u.rules.rules, g->u.rules.rules);
	case SANTA_RULE_STATS | SANTA_REPLY:
		EQ(u.counters.count);
		EQ(u.counters.next);
		for (i = 0; i < w->u.counters.count; i++) {
			EQ(u.counters.counters[i].rule_id);
			EQ(u.counters.counters[i].hits);
			EQ(u.counters.counters[i].bytes);
		}
		return true;
	case SANTA_SERVICE_STATS | SANTA_REPLY:
		EQ(u.stats.matched);
		EQ(u.stats.passed);
		EQ(u.stats.fallback);
		EQ(u.stats.bad_csum);
		EQ(u.stats.rules);
		EQ(u.stats.rule_bytes);
		EQ(u.stats.tc_checksum);
		EQ(u.stats.tc_too_long);
		EQ(u.stats.tc_no_xdp);
		return true;
	case SANTA_STATUS | SANTA_REPLY:
		EQ(u.status.rules);
		EQ(u.status.capacity);
		EQ(u.status.services);
		EQ(u.status.count);
		for (i = 0; i < w->u.status.count; i++) {
			EQ(u.status.ifaces[i].ifindex);
			EQ(u.status.ifaces[i].tc);
			if (!bytes_eq("interface name", w->u.status.ifaces[i].name,
				      g->u.status.ifaces[i].name) ||
			    !bytes_eq("interface xdp", w->u.status.ifaces[i].xdp,
				      g->u.status.ifaces[i].xdp))
				return false;
		}
		return bytes_eq("daemon", w->u.status.daemon, g->u.status.daemon);
	case SANTA_LIST_SERVICES:
		EQ(u.page.start);
		EQ(u.page.max);
		return true;
	case SANTA_STATUS:
	case SANTA_DETACH | SANTA_REPLY:
	case SANTA_REPLACE_RULES | SANTA_REPLY:
	case SANTA_DELETE_RULES | SANTA_REPLY:
	case SANTA_ABORT | SANTA_REPLY:
		return true;
	}
	return fail("no comparison for type 0x%04x", w->type);
}

/* ---- the checks ---- */

static const struct {
	const char *name;
	int code;
} errnos[] = {
	{ "EPERM", EPERM },       { "ENOENT", ENOENT },
	{ "EBADF", EBADF },       { "EEXIST", EEXIST },
	{ "EINVAL", EINVAL },     { "ENOSPC", ENOSPC },
	{ "EPROTO", EPROTO },     { "EBADMSG", EBADMSG },
	{ "ENOTSOCK", ENOTSOCK }, { "EMSGSIZE", EMSGSIZE },
	{ "EPROTONOSUPPORT", EPROTONOSUPPORT },
	{ "EOPNOTSUPP", EOPNOTSUPP }, { "EDQUOT", EDQUOT },
};

static const char *errno_name(int code)
{
	size_t i;

	for (i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++)
		if (errnos[i].code == code)
			return errnos[i].name;
	return code ? "another errno" : "success";
}

static char *tohex(const uint8_t *b, size_t n)
{
	char *s = malloc(2 * n + 1);
	size_t i;

	if (!s)
		exit(2);
	for (i = 0; i < n; i++)
		sprintf(s + 2 * i, "%02x", b[i]);
	s[2 * n] = '\0';
	return s;
}

/* Every shorter body and one byte more must be EBADMSG, never a crash. */
static void check_cuts(const uint8_t *wire, size_t n)
{
	uint8_t *b = malloc(n + 1);
	struct santa_msg m;
	size_t len;
	int err;

	if (!b)
		exit(2);
	for (len = SANTA_HDR_LEN; len <= n + 1; len++) {
		if (len == n)
			continue;
		memcpy(b, wire, len <= n ? len : n);
		if (len > n)
			b[n] = 0;
		santa_msg_set_length(b, (uint32_t)len);
		err = santa_msg_decode(b, len, &m);
		if (err != -EBADMSG) {
			if (!err)
				santa_msg_release(&m);
			fail("cut to %zu of %zu bytes: got %s, want EBADMSG", len, n,
			     errno_name(-err));
			break;
		}
	}
	free(b);
}

static bool seen[2][SANTA_TYPE_MAX + 1];
static bool seen_error;

static void check_vector(const struct json *v)
{
	struct obj o = obj_open(v, "vector");
	const struct json *name = member(&o, "name"), *msg = member(&o, "message");
	const struct json *hex = member(&o, "hex");
	struct santa_msg want, got;
	uint8_t *wire, buf[SANTA_MSG_MAX];
	size_t n = 0;
	char *enc;
	int len, err;

	vname = name && name->type == JSON_STRING ? name->text : "(unnamed vector)";
	if (!obj_close(&o))
		return;
	if (hex->type != JSON_STRING || !(wire = unhex(hex->text, &n))) {
		fail("hex is not a lowercase hex string");
		return;
	}
	if (build(msg, &want)) {
		if (want.type == SANTA_ERROR)
			seen_error = true;
		else
			seen[!!(want.type & SANTA_REPLY)][want.type & ~SANTA_REPLY] = true;

		len = santa_msg_encode(&want, buf, sizeof(buf));
		if (len < 0) {
			fail("encode: %s", errno_name(-len));
		} else if ((size_t)len != n || memcmp(buf, wire, n)) {
			enc = tohex(buf, (size_t)len);
			fail("encoded\n  %s\nwant\n  %s", enc, hex->text);
			free(enc);
		}
		err = santa_msg_decode(wire, n, &got);
		if (err) {
			fail("decode: %s", errno_name(-err));
		} else {
			msg_eq(&want, &got);
			santa_msg_release(&got);
		}
		check_cuts(wire, n);
	}
	free(wire);
	release_all();
}

static void check_invalid(const struct json *v)
{
	const struct json *name = json_get(v, "name"), *hex = json_get(v, "hex");
	const struct json *error = json_get(v, "error");
	struct santa_msg m;
	int want = 0, err;
	uint8_t *wire;
	size_t n, i;

	vname = name && name->type == JSON_STRING ? name->text : "(unnamed invalid vector)";
	if (!hex || hex->type != JSON_STRING || !(wire = unhex(hex->text, &n))) {
		fail("hex is not a lowercase hex string");
		return;
	}
	for (i = 0; error && error->type == JSON_STRING && i < sizeof(errnos) / sizeof(errnos[0]); i++)
		if (!strcmp(errnos[i].name, error->text))
			want = errnos[i].code;
	if (!want) {
		fail("unknown error name %s", error && error->type == JSON_STRING ? error->text : "?");
		free(wire);
		return;
	}
	err = santa_msg_decode(wire, n, &m);
	if (!err)
		santa_msg_release(&m);
	if (err != -want)
		fail("decoded with %s, want %s", errno_name(-err), errno_name(want));
	free(wire);
}

static void check_constants(const struct json *j)
{
	static const struct {
		const char *name;
		uint64_t value;
	} mine[] = {
		{ "SANTA_SOL", SANTA_SOL },
		{ "SANTA_SO_ACCEPTED", SANTA_SO_ACCEPTED },
	};
	struct obj o = obj_open(j, "constants");
	uint64_t v;
	size_t i;

	vname = "constants";
	for (i = 0; i < sizeof(mine) / sizeof(mine[0]); i++) {
		v = u(&o, mine[i].name, UINT32_MAX);
		if (o.ok && v != mine[i].value)
			fail("%s is %llu, santa.h has %llu", mine[i].name, (unsigned long long)v,
			     (unsigned long long)mine[i].value);
	}
	obj_close(&o);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *s = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (s = malloc((size_t)n + 1)) && fread(s, 1, (size_t)n, f) == (size_t)n)
		s[n] = '\0';
	else {
		free(s);
		s = NULL;
	}
	fclose(f);
	return s;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "../../testdata/protocol/vectors.json";
	const struct json *vectors, *invalid;
	uint64_t version = 0;
	struct json *doc;
	char err[128], *text = slurp(path);
	size_t i;
	int t;

	if (!text) {
		fprintf(stderr, "test_vectors: cannot read %s: %s\n", path, strerror(errno));
		return 1;
	}
	doc = json_parse(text, err, sizeof(err));
	free(text);
	if (!doc) {
		fprintf(stderr, "test_vectors: %s: %s\n", path, err);
		return 1;
	}
	vname = path;
	vectors = json_get(doc, "vectors");
	invalid = json_get(doc, "invalid");
	if (!json_uint(json_get(doc, "protocol_version"), 1000, &version) ||
	    version != SANTA_PROTOCOL_VERSION)
		fail("protocol_version is not %d", SANTA_PROTOCOL_VERSION);
	if (!vectors || vectors->type != JSON_ARRAY || !vectors->n)
		fail("no vectors");
	if (!invalid || invalid->type != JSON_ARRAY || !invalid->n)
		fail("no invalid vectors");
	for (i = 0; vectors && i < vectors->n; i++)
		check_vector(&vectors->items[i]);
	for (i = 0; invalid && i < invalid->n; i++)
		check_invalid(&invalid->items[i]);
	check_constants(json_get(doc, "constants"));

	/* not a failure (the vectors' author decides), but worth a line */
	for (t = 1; t <= SANTA_TYPE_MAX; t++)
		for (i = 0; i < 2; i++)
			if (!seen[i][t])
				printf("test_vectors: note: no %s %s vector\n",
				       santa_msg_type_name((uint16_t)t), i ? "reply" : "request");
	if (!seen_error)
		printf("test_vectors: note: no ERROR vector\n");
	printf("test_vectors: %zu vectors, %zu invalid: %s\n", vectors ? vectors->n : 0,
	       invalid ? invalid->n : 0, failures ? "FAIL" : "ok");
	json_free(doc);
	return failures ? 1 : 0;
}
