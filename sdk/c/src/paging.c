/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Reading rules back, page by page: LIST_RULES, RULE_STATS (and LIST_SERVICES' pages, service.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* A page's `next` must move forward, or a lying daemon would loop us. */
int santa_page_next(struct santa_client *c, uint32_t start, uint32_t count, uint32_t last,
		     uint32_t next, uint32_t *out)
{
	if (next == SANTA_NO_NEXT)
		return 1;
	if (!count || next <= start || next <= last)
		return santa_err_local(c, -EPROTO, SANTA_NO_INDEX,
				 "santad's page from %u ends at %u, next %u", start, last, next);
	*out = next;
	return 0;
}

/* Appends a page's count items of size bytes to the array *all of *n. */
int santa_page_append(struct santa_client *c, void **all, size_t *n, const void *items, uint32_t count,
		      size_t size)
{
	char *grown;

	if (!count)
		return 0;
	grown = realloc(*all, (*n + count) * size);
	if (!grown)
		return santa_err_local(c, -ENOMEM, SANTA_NO_INDEX, "out of memory");
	memcpy(grown + *n * size, items, count * size);
	*all = grown;
	*n += count;
	return 0;
}

int santa_list_rules(struct santa_client *client, uint32_t service_id, santa_rule_fn fn,
		     void *ctx)
{
	uint32_t start = 0;

	SANTA_ENTER(client);
	if (!fn)
		return -EINVAL;
	for (;;) {
		struct santa_msg req = { .type = SANTA_LIST_RULES }, rep;
		uint32_t i, count, last = 0;
		int err;

		req.u.page.service_id = service_id;
		req.u.page.start = start;
		err = santa_call(client, &req, -1, &rep);
		if (err)
			return err;
		count = rep.u.rules.count;
		for (i = 0; i < count; i++) {
			last = rep.u.rules.rule_ids[i];
			err = fn(last, rep.u.rules.rules[i], ctx);
			if (err) {
				santa_msg_release(&rep);
				return err;
			}
		}
		err = santa_page_next(client, start, count, last, rep.u.rules.next, &start);
		santa_msg_release(&rep);
		if (err)
			return err < 0 ? err : 0;
	}
}

int santa_rule_stats(struct santa_client *client, uint32_t service_id,
		     struct santa_rule_counters **out, size_t *cnt)
{
	struct santa_rule_counters *all = NULL;
	size_t n = 0;
	uint32_t start = 0;
	int err;

	SANTA_ENTER(client);
	if (!out || !cnt)
		return -EINVAL;
	*out = NULL;
	*cnt = 0;
	for (;;) {
		struct santa_msg req = { .type = SANTA_RULE_STATS }, rep;
		uint32_t count, last;

		req.u.page.service_id = service_id;
		req.u.page.start = start;
		err = santa_call(client, &req, -1, &rep);
		if (err)
			break;
		count = rep.u.counters.count;
		err = santa_page_append(client, (void **)&all, &n, rep.u.counters.counters, count, sizeof(*all));
		if (err) {
			santa_msg_release(&rep);
			break;
		}
		last = count ? rep.u.counters.counters[count - 1].rule_id : 0;
		err = santa_page_next(client, start, count, last, rep.u.counters.next, &start);
		santa_msg_release(&rep);
		if (err)
			break;
	}
	if (err < 0) {
		free(all);
		return err;
	}
	*out = all;
	*cnt = n;
	return 0;
}
