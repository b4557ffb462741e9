/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* santa_accepted(): a connection just accepted, announced to the kernel. */
#include <errno.h>
#include <sys/socket.h>

#include "internal.h"

int santa_accepted(int fd)
{
	int one = 1;

	if (setsockopt(fd, SANTA_SOL, SANTA_SO_ACCEPTED, &one, sizeof(one)))
		return -errno;
	return 0;
}
