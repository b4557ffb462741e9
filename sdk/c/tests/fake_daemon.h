/*
 * An in-memory santad for the tests: it speaks protocol versions 1 to 7
 * (or older ones only: fake_speak) with the library's own codec (so the request decoder is exercised too), keeps
 * services, rules and transactions, and checks what santad checks that the
 * tests need (ownership aside).  It answers no packets: rule hits are
 * `hits_per_rule` for every rule.
 */
#ifndef SANTA_TEST_FAKE_DAEMON_H
#define SANTA_TEST_FAKE_DAEMON_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

struct fake_daemon;

struct fake_stats {
	unsigned requests[SANTA_TYPE_MAX + 1]; /* by request type */
	unsigned txn_batches;  /* ADD/REPLACE/DELETE_RULES inside a transaction */
	size_t max_len;        /* longest request received */
	unsigned oversize;     /* requests over SANTA_MSG_MAX */
	uint64_t last_cookie;  /* SO_COOKIE of the last fd ATTACH got */
	unsigned connections;  /* accepted or served */
};

/* page_max: at most this many items per LIST_RULES / RULE_STATS page, and
 * per LIST_SERVICES page of version 7; older versions list every service
 * in one reply, and refuse (EPROTONOSUPPORT) more than page_max. */
struct fake_daemon *fake_new(uint32_t page_max, uint64_t hits_per_rule);
/* Serves the connected SOCK_SEQPACKET fd in a thread of its own; takes fd. */
int fake_serve(struct fake_daemon *d, int fd);
/* Serves every connection to a new socket at path, in threads. */
int fake_listen(struct fake_daemon *d, const char *path);
/* From now on HELLO agrees on version 1 at most, as an older santad. */
void fake_speak_v1(struct fake_daemon *d);
/* From now on HELLO agrees on version newest at most. */
void fake_speak(struct fake_daemon *d, uint16_t newest);
struct fake_stats fake_stats(struct fake_daemon *d);
size_t fake_rule_count(struct fake_daemon *d);
/* Whether some service holds a rule with this id. */
bool fake_has_rule(struct fake_daemon *d, uint32_t id);
/* Stops every thread (connections see EOF) and frees everything. */
void fake_free(struct fake_daemon *d);

#endif
