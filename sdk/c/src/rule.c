/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Rules: a condition {cond_off, pattern, length range}, ordered processors,
 * a reply length. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct santa_rule *santa_rule_alloc(void)
{
	return calloc(1, sizeof(struct santa_rule));
}

struct santa_rule *santa_rule__new(uint16_t cond_off, const void *pattern, size_t len,
				   uint16_t reply_len)
{
	struct santa_rule *r;

	if (len > UINT16_MAX || (len && !pattern)) {
		errno = EINVAL;
		return NULL;
	}
	r = santa_rule_alloc();
	if (!r)
		return NULL;
	r->cond_off = cond_off;
	r->reply_len = reply_len;
	r->pattern_len = (uint16_t)len;
	if (len) {
		r->pattern = malloc(len);
		if (!r->pattern) {
			free(r);
			return NULL;
		}
		memcpy(r->pattern, pattern, len);
	}
	return r;
}

/* Appends p, taking p->data over; on failure p->data is still the caller's. */
static int add_proc(struct santa_rule *r, const struct santa_proc *p)
{
	if (r->nproc >= SANTA_MAX_NPROC)
		return -EINVAL;
	if (r->nproc == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 4;
		struct santa_proc *procs = realloc(r->procs, cap * sizeof(*procs));

		if (!procs)
			return -ENOMEM;
		r->procs = procs;
		r->cap = cap;
	}
	r->procs[r->nproc++] = *p;
	return 0;
}

static int builder_fail(struct santa_rule *r, int err)
{
	if (!r->err)
		r->err = err;
	return err;
}

int santa_rule__put(struct santa_rule *rule, uint16_t dst, const void *data, size_t len)
{
	struct santa_proc p = { .kind = SANTA_PROC_PUT, .dst = dst, .len = (uint16_t)len };
	int err;

	if (!rule)
		return -EINVAL;
	if (len > UINT16_MAX || (len && !data))
		return builder_fail(rule, -EINVAL);
	if (len) {
		p.data = malloc(len);
		if (!p.data)
			return builder_fail(rule, -ENOMEM);
		memcpy(p.data, data, len);
	}
	err = add_proc(rule, &p);
	if (err) {
		free(p.data);
		return builder_fail(rule, err);
	}
	return 0;
}

int santa_rule__copy(struct santa_rule *rule, uint16_t src, uint16_t len, uint16_t dst)
{
	struct santa_proc p = { .kind = SANTA_PROC_COPY, .src = src, .len = len, .dst = dst };
	int err;

	if (!rule)
		return -EINVAL;
	err = add_proc(rule, &p);
	return err ? builder_fail(rule, err) : 0;
}

struct santa_rule *santa_rule__clone(const struct santa_rule *rule)
{
	struct santa_rule *r;
	size_t i;

	if (!rule) {
		errno = EINVAL;
		return NULL;
	}
	r = santa_rule__new(rule->cond_off, rule->pattern, rule->pattern_len, rule->reply_len);
	if (!r)
		return NULL;
	r->flags = rule->flags;
	r->min_len = rule->min_len;
	r->max_len = rule->max_len;
	r->guard = rule->guard;
	r->guard.key = NULL;
	if (rule->guard.key_len) {
		r->guard.key = malloc(rule->guard.key_len);
		if (!r->guard.key) {
			santa_rule__free(r);
			return NULL;
		}
		memcpy(r->guard.key, rule->guard.key, rule->guard.key_len);
	}
	r->err = rule->err;
	for (i = 0; i < rule->nproc; i++) {
		const struct santa_proc *p = &rule->procs[i];
		int err = p->kind == SANTA_PROC_PUT ? santa_rule__put(r, p->dst, p->data, p->len)
						    : santa_rule__copy(r, p->src, p->len, p->dst);
		if (err) {
			santa_rule__free(r);
			errno = -err;
			return NULL;
		}
	}
	return r;
}

int santa_rule__set_length(struct santa_rule *rule, uint16_t min_len, uint16_t max_len)
{
	if (!rule)
		return -EINVAL;
	rule->min_len = min_len;
	rule->max_len = max_len;
	rule->flags = min_len || max_len ? SANTA_RULE_LENGTH : 0;
	return 0;
}

int santa_rule__length(const struct santa_rule *rule, uint16_t *min_len, uint16_t *max_len)
{
	if (!rule)
		return -EINVAL;
	if (min_len)
		*min_len = rule->min_len;
	if (max_len)
		*max_len = rule->max_len;
	return rule->flags & SANTA_RULE_LENGTH ? 1 : 0;
}

int santa_rule__guard(const struct santa_rule *rule, struct santa_guard *out)
{
	if (!rule || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!(rule->flags & SANTA_RULE_GUARD))
		return 0;
	out->key = rule->guard.key;
	out->key_len = rule->guard.key_len;
	out->gen = rule->guard.gen;
	out->domain_gen = rule->guard.domain_gen;
	out->epoch = rule->guard.epoch;
	out->expires_in_ms = rule->guard.expires_in_ms;
	return 1;
}

void santa_rule__free(struct santa_rule *rule)
{
	size_t i;

	if (!rule)
		return;
	for (i = 0; i < rule->nproc; i++)
		free(rule->procs[i].data);
	free(rule->procs);
	free(rule->pattern);
	free(rule->guard.key);
	free(rule);
}

uint16_t santa_rule__cond_off(const struct santa_rule *rule)
{
	return rule ? rule->cond_off : 0;
}

const void *santa_rule__pattern(const struct santa_rule *rule, size_t *len)
{
	if (len)
		*len = rule ? rule->pattern_len : 0;
	return rule ? rule->pattern : NULL;
}

uint16_t santa_rule__reply_len(const struct santa_rule *rule)
{
	return rule ? rule->reply_len : 0;
}

size_t santa_rule__processor_cnt(const struct santa_rule *rule)
{
	return rule ? rule->nproc : 0;
}

int santa_rule__processor(const struct santa_rule *rule, size_t i, struct santa_processor *out)
{
	const struct santa_proc *p;

	if (!rule || !out)
		return -EINVAL;
	if (i >= rule->nproc)
		return -ENOENT;
	p = &rule->procs[i];
	memset(out, 0, sizeof(*out));
	out->kind = (enum santa_processor_kind)p->kind;
	out->dst = p->dst;
	out->len = p->len;
	if (p->kind == SANTA_PROC_COPY)
		out->src = p->src;
	else
		out->data = p->data;
	return 0;
}
