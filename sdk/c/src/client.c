/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The connection to santad: one request out, one reply in (no pipelining),
 * and the last error.  The calls of santa.h are built on santa_call() in
 * service.c, batch.c and paging.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "internal.h"

/* ---- last error ---- */

void santa_err_clear(struct santa_client *c)
{
	c->err.code = 0;
	c->err.index = SANTA_NO_INDEX;
	c->err.from_daemon = 0;
	c->errmsg[0] = '\0';
	c->err.message = c->errmsg;
}

int santa_err_local(struct santa_client *c, int err, uint32_t index, const char *fmt, ...)
{
	va_list ap;

	c->err.code = -err;
	c->err.index = index;
	c->err.from_daemon = 0;
	va_start(ap, fmt);
	vsnprintf(c->errmsg, sizeof(c->errmsg), fmt, ap);
	va_end(ap);
	return err;
}

static int err_daemon(struct santa_client *c, const struct santa_msg *rep)
{
	const struct santa_bytes *msg = &rep->u.error.message;
	size_t n = msg->len < SANTA_ERROR_MESSAGE_MAX ? msg->len : SANTA_ERROR_MESSAGE_MAX, i;
	uint32_t code = rep->u.error.code;

	for (i = 0; i < n; i++)
		c->errmsg[i] = msg->ptr[i] ? (char)msg->ptr[i] : ' ';
	c->errmsg[n] = '\0';
	c->err.from_daemon = 1;
	c->err.index = rep->u.error.index;
	if (code == 0 || code > 4095)
		code = EPROTO; /* not an errno: still a failure */
	c->err.code = (int)code;
	if (code == EPROTO || code == EMSGSIZE)
		c->broken = true; /* the daemon closes the connection */
	return -(int)code;
}

/* ---- one request, one reply ---- */

void santa_pass_fd(struct msghdr *mh, union santa_fd_ctl *ctl, int fd)
{
	struct cmsghdr *cm;

	memset(ctl, 0, sizeof(*ctl));
	mh->msg_control = ctl->buf;
	mh->msg_controllen = sizeof(ctl->buf);
	cm = CMSG_FIRSTHDR(mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
}

static int send_msg(struct santa_client *c, size_t len, int pass_fd)
{
	struct iovec iov = { .iov_base = c->buf, .iov_len = len };
	union santa_fd_ctl ctl;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (pass_fd >= 0)
		santa_pass_fd(&mh, &ctl, pass_fd);
	do
		n = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		int err = -errno;

		if (err == -EPIPE || err == -ECONNRESET)
			c->broken = true;
		return santa_err_local(c, err, SANTA_NO_INDEX, "sending to santad: %s", strerror(-err));
	}
	if ((size_t)n != len) {
		c->broken = true;
		return santa_err_local(c, -EPROTO, SANTA_NO_INDEX, "santad took %zd of %zu bytes", n, len);
	}
	return 0;
}

/* Closes every fd a reply might carry: the daemon sends none. */
static void close_passed_fds(struct msghdr *mh)
{
	struct cmsghdr *cm;

	for (cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
		size_t i, nfd;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < nfd; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			close(fd);
		}
	}
}

static int recv_msg(struct santa_client *c, size_t *len)
{
	struct iovec iov = { .iov_base = c->buf, .iov_len = SANTA_MSG_MAX };
	union {
		char buf[CMSG_SPACE(16 * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf),
	};
	ssize_t n;

	do
		n = recvmsg(c->fd, &mh, MSG_TRUNC | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		int err = -errno;

		c->broken = true; /* a reply may still come: out of step from now on */
		return santa_err_local(c, err, SANTA_NO_INDEX, "receiving from santad: %s",
				 strerror(-err));
	}
	close_passed_fds(&mh);
	if (n == 0) {
		c->broken = true;
		return santa_err_local(c, -ECONNRESET, SANTA_NO_INDEX, "santad closed the connection");
	}
	if ((size_t)n > SANTA_MSG_MAX || (mh.msg_flags & MSG_TRUNC))
		return santa_err_local(c, -EMSGSIZE, SANTA_NO_INDEX,
				 "santad sent %zd bytes; a message holds at most %d", n,
				 SANTA_MSG_MAX);
	*len = (size_t)n;
	return 0;
}

int santa_call(struct santa_client *c, struct santa_msg *req, int pass_fd,
		struct santa_msg *rep)
{
	size_t len = 0;
	int n, err;

	if (c->broken)
		return santa_err_local(c, -ENOTCONN, SANTA_NO_INDEX,
				 "the connection to santad is broken; connect again");
	req->seq = ++c->seq;
	/* HELLO goes in version 1, which every santad reads; the rest in the
	 * version it agreed on. */
	req->version = req->type == SANTA_HELLO ? SANTA_PROTOCOL_VERSION_MIN : c->info.version;
	n = santa_msg_encode(req, c->buf, SANTA_MSG_MAX);
	if (n < 0)
		return santa_err_local(c, n, SANTA_NO_INDEX, "encoding %s: %s",
				 santa_msg_type_name(req->type), santa_strerror(n));
	err = send_msg(c, (size_t)n, pass_fd);
	if (!err)
		err = recv_msg(c, &len);
	if (err)
		return err;
	err = santa_msg_decode(c->buf, len, rep);
	if (err) {
		if (err == -EPROTO)
			c->broken = true;
		return santa_err_local(c, err, SANTA_NO_INDEX, "bad reply to %s: %s",
				 santa_msg_type_name(req->type), santa_strerror(err));
	}
	if (rep->seq != req->seq) {
		c->broken = true;
		santa_msg_release(rep);
		return santa_err_local(c, -EPROTO, SANTA_NO_INDEX, "reply seq %u, want %u", rep->seq,
				 req->seq);
	}
	/* Every reply is in the agreed version (HELLO's: santa_client_from_fd). */
	if (req->type != SANTA_HELLO && rep->version != req->version) {
		c->broken = true;
		santa_msg_release(rep);
		return santa_err_local(c, -EPROTO, SANTA_NO_INDEX, "reply to %s in version %u",
				 santa_msg_type_name(req->type), rep->version);
	}
	if (rep->type == SANTA_ERROR) {
		err = err_daemon(c, rep);
		santa_msg_release(rep);
		return err;
	}
	if (rep->type != (req->type | SANTA_REPLY)) {
		santa_msg_release(rep);
		return santa_err_local(c, -EPROTO, SANTA_NO_INDEX, "reply type 0x%04x to %s", rep->type,
				 santa_msg_type_name(req->type));
	}
	return 0;
}

int santa_call_simple(struct santa_client *c, struct santa_msg *req)
{
	struct santa_msg rep;
	int err = santa_call(c, req, -1, &rep);

	if (!err)
		santa_msg_release(&rep);
	return err;
}

/* ---- client ---- */

int santa_client_from_fd(int fd, const char *name, struct santa_client **out)
{
	struct santa_client *c;
	struct santa_msg req = { .type = SANTA_HELLO }, rep;
	const struct santa_bytes *d;
	size_t nlen;
	int err;

	if (!name)
		name = "libsanta";
	nlen = strlen(name);
	if (!out || nlen > SANTA_CLIENT_NAME_MAX) {
		close(fd);
		return -EINVAL;
	}
	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (!c || !(c->buf = malloc(SANTA_MSG_MAX))) {
		free(c);
		close(fd);
		return -ENOMEM;
	}
	c->fd = fd;
	santa_err_clear(c);

	req.u.hello.min_version = SANTA_PROTOCOL_VERSION_MIN;
	req.u.hello.max_version = SANTA_PROTOCOL_VERSION;
	req.u.hello.client.ptr = (const uint8_t *)name;
	req.u.hello.client.len = (uint16_t)nlen;
	err = santa_call(c, &req, -1, &rep);
	if (err)
		goto fail;
	if (rep.u.hello_reply.version < SANTA_PROTOCOL_VERSION_MIN ||
	    rep.u.hello_reply.version > SANTA_PROTOCOL_VERSION) {
		santa_msg_release(&rep);
		err = -EPROTONOSUPPORT;
		goto fail;
	}
	if (rep.version != rep.u.hello_reply.version) { /* the first message in it */
		santa_msg_release(&rep);
		err = santa_err_local(c, -EPROTO, SANTA_NO_INDEX, "HELLO reply in version %u agrees on %u",
				      rep.version, rep.u.hello_reply.version);
		goto fail;
	}
	d = &rep.u.hello_reply.daemon;
	c->daemon = malloc((size_t)d->len + 1);
	if (!c->daemon) {
		santa_msg_release(&rep);
		err = -ENOMEM;
		goto fail;
	}
	if (d->len)
		memcpy(c->daemon, d->ptr, d->len);
	c->daemon[d->len] = '\0';
	c->info.version = rep.u.hello_reply.version;
	c->info.uid = rep.u.hello_reply.uid;
	c->info.gid = rep.u.hello_reply.gid;
	c->info.pid = rep.u.hello_reply.pid;
	c->info.admin = rep.u.hello_reply.admin;
	c->info.quota_rules = rep.u.hello_reply.quota_rules;
	c->info.quota_bytes = rep.u.hello_reply.quota_bytes;
	c->info.daemon = c->daemon;
	santa_msg_release(&rep);
	*out = c;
	return 0;
fail:
	santa_client__free(c);
	return err;
}

int santa_client__connect(const char *path, const char *name, struct santa_client **out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (name && strlen(name) > SANTA_CLIENT_NAME_MAX)
		return -EINVAL; /* before santad sees a connection */
	/* secure_getenv: a setuid program must not send its sockets to a
	 * daemon its caller chose. */
	if (!path)
		path = secure_getenv(SANTA_SOCKET_ENV);
	if (!path || !*path)
		path = SANTA_DEFAULT_SOCKET;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return santa_client_from_fd(fd, name, out);
}

void santa_client__free(struct santa_client *client)
{
	if (!client)
		return;
	if (client->fd >= 0)
		close(client->fd);
	free(client->buf);
	free(client->daemon);
	free(client);
}

const struct santa_client_info *santa_client__info(const struct santa_client *client)
{
	return client ? &client->info : NULL;
}

const struct santa_error *santa_client__last_error(const struct santa_client *client)
{
	return client ? &client->err : NULL;
}

int santa_client__fd(const struct santa_client *client)
{
	return client ? client->fd : -EINVAL;
}
