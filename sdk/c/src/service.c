/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Services: ATTACH (the fd by SCM_RIGHTS), DETACH, LIST_SERVICES, SERVICE_STATS, STATUS. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int santa_attach(struct santa_client *client, int sockfd, struct santa_service *out)
{
	struct santa_msg req = { .type = SANTA_ATTACH }, rep;
	int err;

	SANTA_ENTER(client);
	if (sockfd < 0)
		return santa_err_local(client, -EBADF, SANTA_NO_INDEX, "no socket to attach");
	err = santa_call(client, &req, sockfd, &rep);
	if (err)
		return err;
	if (out)
		*out = rep.u.service;
	santa_msg_release(&rep);
	return 0;
}

int santa_detach(struct santa_client *client, uint32_t service_id)
{
	struct santa_msg req = { .type = SANTA_DETACH, .u.svc.service_id = service_id };

	SANTA_ENTER(client);
	return santa_call_simple(client, &req);
}

/* Version 7 lists the services in pages, as LIST_RULES lists rules: each
 * page from the `next` of the last; an older santad's one reply is the
 * whole list. */
int santa_list_services(struct santa_client *client, struct santa_service **out, size_t *cnt)
{
	struct santa_service *all = NULL;
	size_t n = 0;
	uint32_t start = 0;
	int err;

	SANTA_ENTER(client);
	if (!out || !cnt)
		return -EINVAL;
	*out = NULL;
	*cnt = 0;
	for (;;) {
		struct santa_msg req = { .type = SANTA_LIST_SERVICES }, rep;
		uint32_t count, last;

		req.u.page.start = start;
		err = santa_call(client, &req, -1, &rep);
		if (err)
			break;
		count = rep.u.services.count;
		err = santa_page_append(client, (void **)&all, &n, rep.u.services.services, count, sizeof(*all));
		if (err) {
			santa_msg_release(&rep);
			break;
		}
		last = count ? rep.u.services.services[count - 1].service_id : 0;
		if (client->info.version < 7)
			rep.u.services.next = SANTA_NO_NEXT; /* no pages: the whole list */
		err = santa_page_next(client, start, count, last, rep.u.services.next, &start);
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

int santa_service_stats(struct santa_client *client, uint32_t service_id,
			struct santa_service_stats *out)
{
	struct santa_msg req = { .type = SANTA_SERVICE_STATS, .u.svc.service_id = service_id };
	struct santa_msg rep;
	int err;

	SANTA_ENTER(client);
	if (!out)
		return -EINVAL;
	err = santa_call(client, &req, -1, &rep);
	if (err)
		return err;
	*out = rep.u.stats;
	santa_msg_release(&rep);
	return 0;
}

static char *put_str(char **at, const struct santa_bytes *b)
{
	char *s = *at;

	if (b->len)
		memcpy(s, b->ptr, b->len);
	s[b->len] = '\0';
	*at += (size_t)b->len + 1;
	return s;
}

int santa_status(struct santa_client *client, struct santa_status **out)
{
	struct santa_msg req = { .type = SANTA_STATUS }, rep;
	struct santa_status *st;
	size_t size, i, n;
	char *at;
	int err;

	SANTA_ENTER(client);
	if (!out)
		return -EINVAL;
	*out = NULL;
	err = santa_call(client, &req, -1, &rep);
	if (err)
		return err;
	n = rep.u.status.count;
	/* one block: the struct, the interfaces, then the strings */
	size = sizeof(*st) + n * sizeof(struct santa_interface) + rep.u.status.daemon.len + 1;
	for (i = 0; i < n; i++)
		size += rep.u.status.ifaces[i].name.len + 1 + rep.u.status.ifaces[i].xdp.len + 1;
	st = calloc(1, size);
	if (!st) {
		santa_msg_release(&rep);
		return santa_err_local(client, -ENOMEM, SANTA_NO_INDEX, "out of memory");
	}
	st->interfaces = (struct santa_interface *)(st + 1);
	at = (char *)(st->interfaces + n);
	st->daemon = put_str(&at, &rep.u.status.daemon);
	st->rules = rep.u.status.rules;
	st->capacity = rep.u.status.capacity;
	st->services = rep.u.status.services;
	st->interface_cnt = n;
	for (i = 0; i < n; i++) {
		const struct santa_wire_iface *w = &rep.u.status.ifaces[i];

		st->interfaces[i].ifindex = w->ifindex;
		st->interfaces[i].name = put_str(&at, &w->name);
		st->interfaces[i].xdp = put_str(&at, &w->xdp);
		st->interfaces[i].tc = w->tc;
	}
	santa_msg_release(&rep);
	*out = st;
	return 0;
}
