/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* santa_strerror: the protocol's errno values in its own words. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "internal.h"

static const struct {
	int code;
	const char *text;
} santa_errors[] = {
	/* docs/protocol.md, ERROR codes */
	{ EPERM, "the service belongs to another uid" },
	{ ENOENT, "unknown service, rule or transaction" },
	{ EBADF, "ATTACH needs exactly one file descriptor" },
	{ EEXIST, "already attached, or a rule duplicates another's condition" },
	{ EINVAL, "invalid argument: a rule breaks a limit, or a flag or reserved field is not 0" },
	{ ENOSPC, "the host's rule or service capacity is full" },
	{ EPROTO, "protocol error: bad magic, version, type, length or sequence" },
	{ EBADMSG, "malformed message body" },
	{ ENOTSOCK, "the file descriptor is not a socket" },
	{ EMSGSIZE, "message larger than 131072 bytes" },
	{ EPROTONOSUPPORT, "no common protocol version with santad" },
	{ EOPNOTSUPP, "the socket is not one santad can serve" },
	{ EDQUOT, "the uid's rule or byte quota would be exceeded" },
	/* found on the client side */
	{ ENOMEM, "out of memory" },
	{ EACCES, "permission denied on santad's socket" },
	{ ECONNREFUSED, "santad is not listening" },
	{ ECONNRESET, "santad closed the connection" },
	{ EPIPE, "santad closed the connection" },
	{ ENOTCONN, "the connection to santad is broken" },
	{ EINTR, "interrupted" },
	{ EAGAIN, "timed out waiting for santad" },
	{ ENAMETOOLONG, "socket path too long" },
};

const char *santa_strerror(int err)
{
	size_t i;

	if (err < 0)
		err = -err;
	if (err == 0)
		return "success";
	for (i = 0; i < sizeof(santa_errors) / sizeof(santa_errors[0]); i++)
		if (santa_errors[i].code == err)
			return santa_errors[i].text;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
	{
		const char *text = strerrordesc_np(err);

		if (text)
			return text;
	}
#endif
	return "unknown error";
}
