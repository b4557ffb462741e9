/*
 * libsanta against a fake santad (fake_daemon.c) over
 * socketpair(AF_UNIX, SOCK_SEQPACKET), and against canned bad replies.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "fake_daemon.h"
#include "internal.h"

#define OPT_SO_COOKIE 57

#define CHECK_OK(expr)                                                                 \
	do {                                                                           \
		int err_ = (expr);                                                     \
		CHECK(err_ == 0, "%s -> %d (%s)", #expr, err_, santa_strerror(err_)); \
	} while (0)

static struct santa_client *pair_client(struct fake_daemon *d)
{
	struct santa_client *c = NULL;
	int sv[2], err;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		perror("socketpair");
		exit(2);
	}
	if (fake_serve(d, sv[1]) < 0)
		exit(2);
	err = santa_client_from_fd(sv[0], "test_client", &c);
	CHECK(err == 0 && c, "HELLO over a socketpair: %s", santa_strerror(err));
	if (!c)
		exit(1);
	return c;
}

static int udp_socket(uint16_t *port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sin, &len) < 0) {
		perror("udp socket");
		exit(2);
	}
	*port = ntohs(sin.sin_port);
	return fd;
}

static uint64_t cookie_of(int fd)
{
	uint64_t cookie = 0;
	socklen_t len = sizeof(cookie);

	if (getsockopt(fd, SOL_SOCKET, OPT_SO_COOKIE, &cookie, &len) < 0) {
		perror("SO_COOKIE");
		exit(2);
	}
	return cookie;
}

static struct santa_rule *listing1(void)
{
	struct santa_rule *r = santa_rule__new(0, "Hello", 5, 6);

	if (!r || santa_rule__put(r, 0, "COMSYS", 6))
		exit(2);
	return r;
}

/* ---- connect, HELLO ---- */

static void test_connect(void)
{
	char dir[] = "/tmp/santa-test-XXXXXX", path[128], longpath[200];
	struct fake_daemon *d = fake_new(0, 0);
	const struct santa_client_info *info;
	struct santa_client *c = NULL;
	int err;

	if (!d || !mkdtemp(dir))
		exit(2);
	snprintf(path, sizeof(path), "%s/santa.sock", dir);
	CHECK_OK(fake_listen(d, path));

	err = santa_client__connect(path, "test_client", &c);
	CHECK(err == 0, "connect: %s", santa_strerror(err));
	info = santa_client__info(c);
	CHECK(info && info->version == SANTA_PROTOCOL_VERSION, "version %u", info ? info->version : 0);
	CHECK(info && info->uid == getuid() && info->gid == getgid() && info->pid == (uint32_t)getpid(),
	      "credentials %u/%u/%u", info ? info->uid : 0, info ? info->gid : 0, info ? info->pid : 0);
	CHECK(info && !strcmp(info->daemon, "fake-santad 0.1"), "daemon %s", info ? info->daemon : "");
	CHECK(info && info->quota_rules == 65536 && info->quota_bytes == 64 << 20, "quotas");
	CHECK(santa_client__fd(c) >= 0, "fd");
	santa_client__free(c);

	c = (struct santa_client *)&c; /* must be reset */
	err = santa_client__connect(path, "a client name of more than sixty-four bytes, which HELLO cannot carry at all", &c);
	CHECK(err == -EINVAL && !c, "long name: %d", err);
	snprintf(path, sizeof(path), "%s/nothing.sock", dir);
	err = santa_client__connect(path, NULL, &c);
	CHECK(err == -ENOENT && !c, "no socket: %d", err);
	snprintf(path, sizeof(path), "%s/santa.sock", dir);
	setenv(SANTA_SOCKET_ENV, path, 1); /* NULL path: the environment's */
	err = santa_client__connect(NULL, "from_env", &c);
	CHECK(err == 0, "connect to $SANTA_SOCKET: %s", santa_strerror(err));
	santa_client__free(c);
	c = NULL;
	unsetenv(SANTA_SOCKET_ENV);
	memset(longpath, 'x', sizeof(longpath) - 1);
	longpath[sizeof(longpath) - 1] = '\0';
	err = santa_client__connect(longpath, NULL, &c);
	CHECK(err == -ENAMETOOLONG, "long path: %d", err);
	CHECK(fake_stats(d).connections == 2, "connections %u", fake_stats(d).connections);
	fake_free(d);
	rmdir(dir);
}

/* ---- ATTACH passes the very socket ---- */

static void test_attach(void)
{
	struct fake_daemon *d = fake_new(0, 0);
	struct santa_client *c = pair_client(d);
	const struct santa_error *e = santa_client__last_error(c);
	struct santa_service svc;
	uint16_t port;
	int fd = udp_socket(&port), p[2], err;

	memset(&svc, 0, sizeof(svc));
	CHECK_OK(santa_attach(c, fd, &svc));
	CHECK(svc.cookie == cookie_of(fd), "service cookie %llu, socket's %llu",
	      (unsigned long long)svc.cookie, (unsigned long long)cookie_of(fd));
	CHECK(fake_stats(d).last_cookie == cookie_of(fd), "the daemon got another socket");
	CHECK(svc.port == port && svc.family == 4 && svc.protocol == 17, "port %u family %u",
	      svc.port, svc.family);
	CHECK(!memcmp(svc.addr, "\x7f\0\0\x01", 4), "addr");
	CHECK(svc.owner_uid == getuid() && svc.service_id != 0, "owner %u", svc.owner_uid);
	CHECK(!strcmp(svc.manager, "test_client"), "manager \"%s\"", svc.manager);

	err = santa_attach(c, fd, NULL);
	CHECK(err == -EEXIST, "second attach: %d", err);
	CHECK(e->code == EEXIST && e->from_daemon && strstr(e->message, "already"), "last error %d %s",
	      e->code, e->message);

	if (pipe(p) < 0)
		exit(2);
	err = santa_attach(c, p[0], NULL);
	CHECK(err == -ENOTSOCK, "pipe: %d", err);
	close(p[0]);
	close(p[1]);
	err = santa_attach(c, -1, NULL);
	CHECK(err == -EBADF && !e->from_daemon, "no fd: %d", err);
	CHECK_OK(santa_detach(c, svc.service_id));
	santa_client__free(c);
	close(fd);
	fake_free(d);
}

/* ---- Listing 1, read back, replaced, counted, deleted ---- */

struct seen {
	size_t n;
	uint32_t ids[8];
	char reply[8][16];
	size_t pattern_len;
};

static int collect(uint32_t id, const struct santa_rule *rule, void *ctx)
{
	struct seen *s = ctx;
	struct santa_processor p;

	if (s->n < 8 && santa_rule__processor(rule, 0, &p) == 0 && p.kind == SANTA_PROC_PUT &&
	    p.len < 16) {
		memcpy(s->reply[s->n], p.data, p.len);
		s->reply[s->n][p.len] = '\0';
	}
	santa_rule__pattern(rule, &s->pattern_len);
	if (s->n < 8)
		s->ids[s->n] = id;
	s->n++;
	return 0;
}

static int stop_at_first(uint32_t id, const struct santa_rule *rule, void *ctx)
{
	(void)id;
	(void)rule;
	(void)ctx;
	return 42;
}

static void test_listing1(void)
{
	struct fake_daemon *d = fake_new(0, 7);
	struct santa_client *c = pair_client(d);
	struct santa_rule *r = listing1(), *r2 = santa_rule__new(0, "Hello", 5, 6), *clone;
	struct santa_rule_counters *counters = NULL;
	struct santa_service_stats st;
	struct santa_service svc;
	struct santa_processor p;
	struct seen seen = { 0 };
	uint32_t id = 0;
	size_t n = 0, plen;
	uint16_t port;
	int fd = udp_socket(&port);

	CHECK(santa_rule__cond_off(r) == 0 && santa_rule__reply_len(r) == 6 &&
	      santa_rule__processor_cnt(r) == 1, "accessors");
	CHECK(!memcmp(santa_rule__pattern(r, &plen), "Hello", 5) && plen == 5, "pattern");
	CHECK(santa_rule__processor(r, 1, &p) == -ENOENT, "processor 1");
	clone = santa_rule__clone(r);
	CHECK(clone && santa_rule__processor(clone, 0, &p) == 0 && p.len == 6 &&
	      !memcmp(p.data, "COMSYS", 6), "clone");
	santa_rule__free(clone);

	CHECK_OK(santa_attach(c, fd, &svc));
	CHECK_OK(santa_add_rule(c, svc.service_id, r, &id));
	CHECK(id != 0, "rule id %u", id);
	CHECK_OK(santa_list_rules(c, svc.service_id, collect, &seen));
	CHECK(seen.n == 1 && seen.ids[0] == id && !strcmp(seen.reply[0], "COMSYS") &&
	      seen.pattern_len == 5, "listed %zu rules", seen.n);
	CHECK(santa_list_rules(c, svc.service_id, stop_at_first, NULL) == 42, "callback stops");

	santa_rule__put(r2, 0, "SANTA!", 6);
	santa_rule__copy(r2, 5, 1, 5);
	CHECK_OK(santa_replace_rule(c, svc.service_id, id, r2));
	memset(&seen, 0, sizeof(seen));
	CHECK_OK(santa_list_rules(c, svc.service_id, collect, &seen));
	CHECK(seen.n == 1 && seen.ids[0] == id && !strcmp(seen.reply[0], "SANTA!"), "replaced");

	CHECK_OK(santa_rule_stats(c, svc.service_id, &counters, &n));
	CHECK(n == 1 && counters && counters[0].rule_id == id && counters[0].hits == 7 &&
	      counters[0].bytes == 42, "rule stats");
	free(counters);
	CHECK_OK(santa_service_stats(c, svc.service_id, &st));
	CHECK(st.matched == 7 && st.rules == 1 && st.rule_bytes == 11, "service stats");

	CHECK_OK(santa_delete_rule(c, svc.service_id, id));
	memset(&seen, 0, sizeof(seen));
	CHECK_OK(santa_list_rules(c, svc.service_id, collect, &seen));
	CHECK(seen.n == 0, "%zu rules after delete", seen.n);
	CHECK_OK(santa_rule_stats(c, svc.service_id, &counters, &n));
	CHECK(n == 0 && !counters, "no counters");

	santa_rule__free(r);
	santa_rule__free(r2);
	santa_client__free(c);
	close(fd);
	fake_free(d);
}

/* ---- a length condition: version 2 carries it, version 1 cannot ---- */

static int first_length(uint32_t id, const struct santa_rule *rule, void *ctx)
{
	uint16_t *len = ctx;

	(void)id;
	return santa_rule__length(rule, &len[0], &len[1]) == 1 ? 1 : 2;
}

static void test_length(void)
{
	struct fake_daemon *d = fake_new(0, 0);
	struct santa_client *c = pair_client(d);
	struct santa_rule *r = listing1(), *plain = listing1(), *clone;
	const struct santa_error *e;
	struct santa_service svc;
	uint16_t got[2] = { 0, 0 }, port;
	int fd = udp_socket(&port), fd2 = udp_socket(&port), err;

	CHECK(santa_rule__length(r, &got[0], &got[1]) == 0 && !got[0] && !got[1], "no length at first");
	CHECK_OK(santa_rule__set_length(r, 5, 5));
	clone = santa_rule__clone(r);
	CHECK(santa_rule__length(clone, &got[0], &got[1]) == 1 && got[0] == 5 && got[1] == 5,
	      "clone's length %u-%u", got[0], got[1]);
	santa_rule__free(clone);
	CHECK_OK(santa_attach(c, fd, &svc));
	CHECK_OK(santa_add_rule(c, svc.service_id, r, NULL));
	got[0] = got[1] = 0;
	err = santa_list_rules(c, svc.service_id, first_length, got);
	CHECK(err == 1 && got[0] == 5 && got[1] == 5, "listed with length %u-%u (%d)", got[0], got[1], err);
	santa_client__free(c);

	fake_speak_v1(d);
	c = pair_client(d);
	e = santa_client__last_error(c);
	CHECK(santa_client__info(c)->version == 1, "an old santad agrees on %u", santa_client__info(c)->version);
	CHECK_OK(santa_attach(c, fd2, &svc));
	CHECK(!svc.manager[0], "a manager in version 1: \"%s\"", svc.manager);
	err = santa_add_rule(c, svc.service_id, r, NULL);
	CHECK(err == -EINVAL && e->index == 0 && !e->from_daemon &&
	      !strcmp(e->message, "rule 0 has a length condition, which needs protocol version 2; "
				  "santad speaks version 1"), "length at version 1: %d %s", err, e->message);
	CHECK_OK(santa_add_rule(c, svc.service_id, plain, NULL));

	santa_rule__free(r);
	santa_rule__free(plain);
	santa_client__free(c);
	close(fd);
	close(fd2);
	fake_free(d);
}

/* ---- a guard: read from santad's listings, never sent ---- */

static void test_guard(void)
{
	struct fake_daemon *d = fake_new(0, 0);
	struct santa_client *c = pair_client(d);
	struct santa_rule *r = listing1(), *clone;
	const struct santa_error *e = santa_client__last_error(c);
	struct santa_guard g;
	struct santa_service svc;
	uint16_t port;
	int fd = udp_socket(&port), err;

	CHECK(santa_rule__guard(r, &g) == 0 && !g.key && !g.epoch, "a guard at first");
	/* As decoding a LIST_RULES page of santad's makes it. */
	r->flags |= SANTA_RULE_GUARD;
	r->guard = (struct santa_rule_guard){ .key_len = 2, .key = (uint8_t *)strdup("k1"), .gen = 5,
					      .domain_gen = 2, .epoch = 1, .expires_in_ms = 30000 };
	CHECK(santa_rule__guard(r, &g) == 1 && g.key_len == 2 && !memcmp(g.key, "k1", 2) && g.gen == 5 &&
	      g.domain_gen == 2 && g.epoch == 1 && g.expires_in_ms == 30000, "the guard read");
	clone = santa_rule__clone(r);
	CHECK(clone && santa_rule__guard(clone, &g) == 1 && g.key != r->guard.key && !memcmp(g.key, "k1", 2) &&
	      g.expires_in_ms == 30000, "the clone's guard");
	CHECK_OK(santa_attach(c, fd, &svc));
	err = santa_add_rule(c, svc.service_id, clone, NULL);
	CHECK(err == -EINVAL && e->index == 0 && !e->from_daemon && strstr(e->message, "rule 0 has a guard"),
	      "adding a guarded rule: %d %s", err, e->message);

	santa_rule__free(clone);
	santa_rule__free(r);
	santa_client__free(c);
	close(fd);
	fake_free(d);
}

/* ---- errors: negative errno, the daemon's text and index ---- */

static void test_errors(void)
{
	struct fake_daemon *d = fake_new(0, 0);
	struct santa_client *c = pair_client(d);
	const struct santa_error *e = santa_client__last_error(c);
	struct santa_rule *good = listing1(), *empty = santa_rule__new(0, NULL, 0, 6);
	struct santa_rule *other = santa_rule__new(0, "Other", 5, 6), *broken;
	const struct santa_rule *batch[3];
	struct santa_service svc;
	uint32_t ids[3];
	uint16_t port;
	int fd = udp_socket(&port), err;

	CHECK_OK(santa_attach(c, fd, &svc));
	err = santa_add_rule(c, svc.service_id, empty, NULL);
	CHECK(err == -EINVAL, "empty pattern: %d", err);
	CHECK(e->code == EINVAL && e->from_daemon && e->index == 0 &&
	      !strcmp(e->message, "condition pattern is 0 bytes; the limit is 256"),
	      "last error %d [%u] %s", e->code, e->index, e->message);
	CHECK(!strcmp(santa_strerror(err), santa_strerror(EINVAL)) && *santa_strerror(err), "strerror");

	batch[0] = good;
	batch[1] = other;
	batch[2] = empty;
	err = santa_add_rules(c, svc.service_id, batch, 3, ids);
	CHECK(err == -EINVAL && e->index == 2, "batch: %d, index %u", err, e->index);
	CHECK(fake_rule_count(d) == 0, "a failed batch added %zu rules", fake_rule_count(d));

	batch[2] = good; /* the same condition twice */
	err = santa_add_rules(c, svc.service_id, batch, 3, ids);
	CHECK(err == -EEXIST && e->index == 2 && strstr(e->message, "same condition"),
	      "duplicate: %d [%u] %s", err, e->index, e->message);

	CHECK_OK(santa_add_rules(c, svc.service_id, batch, 2, ids));
	CHECK(e->code == 0 && e->index == SANTA_NO_INDEX && !*e->message, "error cleared");
	CHECK(ids[0] != ids[1], "ids %u %u", ids[0], ids[1]);

	err = santa_detach(c, 999);
	CHECK(err == -ENOENT && e->code == ENOENT && strstr(e->message, "999"), "detach 999: %d %s",
	      err, e->message);
	err = santa_delete_rule(c, svc.service_id, 12345);
	CHECK(err == -ENOENT && e->index == 0, "delete 12345: %d", err);

	/* what the wire cannot carry is refused before anything is sent */
	broken = santa_rule__new(0, "x", 1, 1);
	CHECK(santa_rule__put(broken, 0, "y", 70000) == -EINVAL, "70000-byte put");
	batch[0] = good;
	batch[1] = broken;
	err = santa_add_rules(c, svc.service_id, batch, 2, NULL);
	CHECK(err == -EINVAL && !e->from_daemon && e->index == 1, "broken rule: %d", err);
	batch[1] = NULL;
	err = santa_add_rules(c, svc.service_id, batch, 2, NULL);
	CHECK(err == -EINVAL && e->index == 1, "NULL rule: %d", err);
	CHECK(!santa_rule__new(0, "x", 70000, 1) && errno == EINVAL, "70000-byte pattern");
	CHECK(santa_add_rules(c, svc.service_id, batch, 0, NULL) == 0, "empty batch");
	CHECK(santa_txn_add_rules(c, svc.service_id, 0, batch, 1, NULL) == -EINVAL, "txn 0");

	CHECK(strstr(santa_strerror(-EDQUOT), "quota") && strstr(santa_strerror(EPROTONOSUPPORT), "version"),
	      "strerror texts");
	CHECK(*santa_strerror(-ETIMEDOUT) && *santa_strerror(100000), "strerror fallback");

	santa_rule__free(good);
	santa_rule__free(empty);
	santa_rule__free(other);
	santa_rule__free(broken);
	santa_client__free(c);
	close(fd);
	fake_free(d);
}

/* ---- a batch too big for one message: BEGIN, ADD_RULES..., COMMIT ---- */

#define BIG 3000

static struct santa_rule **big_rules(const char *tag)
{
	struct santa_rule **rules = calloc(BIG, sizeof(*rules));
	uint8_t pattern[200], reply[700];
	size_t i;

	if (!rules)
		exit(2);
	memset(reply, 'r', sizeof(reply));
	for (i = 0; i < BIG; i++) {
		memset(pattern, 'p', sizeof(pattern));
		snprintf((char *)pattern, sizeof(pattern), "%s-%zu-", tag, i);
		rules[i] = santa_rule__new(2, pattern, sizeof(pattern), 800);
		if (!rules[i] || santa_rule__put(rules[i], 2, reply, sizeof(reply)) ||
		    santa_rule__copy(rules[i], 0, 2, 0))
			exit(2);
	}
	return rules;
}

static void free_rules(struct santa_rule **rules)
{
	size_t i;

	for (i = 0; i < BIG; i++)
		santa_rule__free(rules[i]);
	free(rules);
}

static int count_rules(uint32_t id, const struct santa_rule *rule, void *ctx)
{
	size_t *n = ctx;

	(void)id;
	(void)rule;
	++*n;
	return 0;
}

static void test_big_batch(void)
{
	struct fake_daemon *d = fake_new(100, 1);
	struct santa_client *c = pair_client(d);
	const struct santa_error *e = santa_client__last_error(c);
	struct santa_rule **rules = big_rules("a"), **more = big_rules("b"), *empty;
	struct santa_rule_counters *counters = NULL;
	uint32_t *ids = calloc(BIG, sizeof(*ids));
	struct fake_stats before, after;
	struct santa_service svc;
	size_t i, n = 0;
	uint16_t port;
	int fd = udp_socket(&port), err;
	bool rising = true;

	CHECK_OK(santa_attach(c, fd, &svc));
	before = fake_stats(d);
	CHECK_OK(santa_add_rules(c, svc.service_id, (const struct santa_rule *const *)rules, BIG, ids));
	after = fake_stats(d);
	CHECK(after.requests[SANTA_BEGIN] == before.requests[SANTA_BEGIN] + 1 &&
	      after.requests[SANTA_COMMIT] == before.requests[SANTA_COMMIT] + 1 &&
	      after.requests[SANTA_ABORT] == before.requests[SANTA_ABORT],
	      "one BEGIN and one COMMIT");
	CHECK(after.requests[SANTA_ADD_RULES] - before.requests[SANTA_ADD_RULES] >= 20 &&
	      after.txn_batches - before.txn_batches ==
		      after.requests[SANTA_ADD_RULES] - before.requests[SANTA_ADD_RULES],
	      "%u ADD_RULES, %u in the transaction",
	      after.requests[SANTA_ADD_RULES] - before.requests[SANTA_ADD_RULES],
	      after.txn_batches - before.txn_batches);
	CHECK(after.max_len <= SANTA_MSG_MAX && after.max_len > SANTA_MSG_MAX - 1000 &&
	      !after.oversize, "longest message %zu", after.max_len);
	for (i = 1; i < BIG; i++)
		rising &= ids[i] > ids[i - 1];
	CHECK(ids[0] && rising, "ids in order");
	CHECK(fake_rule_count(d) == BIG, "%zu rules installed", fake_rule_count(d));

	before = fake_stats(d);
	CHECK_OK(santa_list_rules(c, svc.service_id, count_rules, &n));
	CHECK(n == BIG, "listed %zu", n);
	CHECK_OK(santa_rule_stats(c, svc.service_id, &counters, &n));
	CHECK(n == BIG && counters[0].rule_id == ids[0] && counters[BIG - 1].rule_id == ids[BIG - 1] &&
	      counters[BIG - 1].hits == 1, "%zu counters", n);
	free(counters);
	after = fake_stats(d);
	CHECK(after.requests[SANTA_LIST_RULES] - before.requests[SANTA_LIST_RULES] == BIG / 100 &&
	      after.requests[SANTA_RULE_STATS] - before.requests[SANTA_RULE_STATS] == BIG / 100,
	      "pages");

	/* replace them all: also split, also one transaction */
	before = fake_stats(d);
	CHECK_OK(santa_replace_rules(c, svc.service_id, ids, (const struct santa_rule *const *)more, BIG));
	after = fake_stats(d);
	CHECK(after.requests[SANTA_REPLACE_RULES] - before.requests[SANTA_REPLACE_RULES] >= 20 &&
	      after.requests[SANTA_COMMIT] == before.requests[SANTA_COMMIT] + 1, "replace split");

	/* one bad rule late in a big batch: nothing lands, the index is the batch's */
	empty = santa_rule__new(0, NULL, 0, 6);
	santa_rule__free(rules[2500]);
	rules[2500] = empty;
	for (i = 0; i < BIG; i++)
		if (i != 2500)
			((uint8_t *)rules[i]->pattern)[0] = 'c'; /* new conditions */
	before = fake_stats(d);
	err = santa_add_rules(c, svc.service_id, (const struct santa_rule *const *)rules, BIG, ids);
	after = fake_stats(d);
	CHECK(err == -EINVAL, "bad rule 2500: %d", err);
	CHECK(e->code == EINVAL && e->from_daemon && e->index == 2500 &&
	      strstr(e->message, "condition pattern is 0 bytes"), "last error %d [%u] %s", e->code,
	      e->index, e->message);
	CHECK(after.requests[SANTA_ABORT] == before.requests[SANTA_ABORT] + 1 &&
	      after.requests[SANTA_COMMIT] == before.requests[SANTA_COMMIT], "aborted, not committed");
	CHECK(fake_rule_count(d) == BIG, "%zu rules after a failed batch", fake_rule_count(d));

	/* a clash with an installed rule, late in the batch: aborted too */
	santa_rule__free(rules[2500]);
	rules[2500] = santa_rule__clone(more[17]); /* the condition of an installed rule */
	before = fake_stats(d);
	err = santa_add_rules(c, svc.service_id, (const struct santa_rule *const *)rules, BIG, ids);
	after = fake_stats(d);
	CHECK(err == -EEXIST, "clash at commit: %d", err);
	CHECK(fake_rule_count(d) == BIG, "%zu rules after a failed commit", fake_rule_count(d));

	CHECK_OK(santa_delete_rules(c, svc.service_id, ids, BIG));
	CHECK(fake_rule_count(d) == 0, "%zu rules after deleting all", fake_rule_count(d));
	santa_client__free(c);
	free_rules(rules);
	free_rules(more);
	free(ids);
	close(fd);
	fake_free(d);
}

/* ---- explicit transactions ---- */

static void test_txn(void)
{
	struct fake_daemon *d = fake_new(0, 0);
	struct santa_client *c = pair_client(d);
	struct santa_rule *a = listing1(), *b = santa_rule__new(1, "ello", 4, 2);
	struct santa_rule *b2 = santa_rule__new(0, "Hi", 2, 2);
	const struct santa_rule *both[2] = { b2, b };
	uint32_t txn = 0, first = 0, ids[2] = { 0, 0 };
	struct santa_service svc;
	size_t n = 0;
	uint16_t port;
	int fd = udp_socket(&port), err;

	santa_rule__copy(b, 1, 2, 0);
	CHECK_OK(santa_attach(c, fd, &svc));
	CHECK_OK(santa_add_rule(c, svc.service_id, a, &first));

	CHECK_OK(santa_txn_begin(c, svc.service_id, &txn));
	CHECK(txn != 0, "txn 0");
	CHECK_OK(santa_txn_delete_rules(c, svc.service_id, txn, &first, 1));
	CHECK_OK(santa_txn_add_rules(c, svc.service_id, txn, both, 2, ids));
	CHECK(ids[0] && ids[0] != first && ids[1] != ids[0], "staging gave ids %u, %u", ids[0], ids[1]);
	CHECK(fake_rule_count(d) == 1, "staged rules applied early");
	CHECK_OK(santa_txn_commit(c, txn, &n));
	CHECK(n == 2, "commit added %zu rules", n);
	CHECK(fake_rule_count(d) == 2, "%zu rules after commit", fake_rule_count(d));
	CHECK(fake_has_rule(d, ids[0]) && fake_has_rule(d, ids[1]), "rules not under their staged ids");

	CHECK_OK(santa_txn_begin(c, svc.service_id, &txn));
	err = santa_txn_replace_rules(c, svc.service_id, txn, &first, both, 1);
	CHECK(err == -ENOENT, "replacing a deleted rule: %d", err);
	CHECK_OK(santa_txn_abort(c, txn));
	err = santa_txn_commit(c, txn, NULL);
	CHECK(err == -ENOENT, "commit after abort: %d", err);

	santa_rule__free(a);
	santa_rule__free(b);
	santa_rule__free(b2);
	santa_client__free(c);
	close(fd);
	fake_free(d);
}

/* ---- services and status ---- */

static void test_services_status(void)
{
	struct fake_daemon *d = fake_new(0, 0);
	struct santa_client *c = pair_client(d);
	struct santa_service svc, *list = NULL;
	struct santa_status *st = NULL;
	size_t n = 9;
	uint16_t port;
	int fd = udp_socket(&port);

	CHECK_OK(santa_list_services(c, &list, &n));
	CHECK(n == 0 && !list, "%zu services", n);
	memset(&svc, 0, sizeof(svc)); /* its padding too, for memcmp */
	CHECK_OK(santa_attach(c, fd, &svc));
	CHECK_OK(santa_list_services(c, &list, &n));
	CHECK(n == 1 && list && !memcmp(&list[0], &svc, sizeof(svc)), "listed service");
	free(list);

	CHECK_OK(santa_status(c, &st));
	CHECK(st && !strcmp(st->daemon, "fake-santad 0.1") && st->services == 1 &&
	      st->capacity == 1u << 20 && st->interface_cnt == 2, "status");
	if (st && st->interface_cnt == 2) {
		CHECK(st->interfaces[0].ifindex == 1 && !strcmp(st->interfaces[0].name, "lo") &&
		      !strcmp(st->interfaces[0].xdp, "generic") && st->interfaces[0].tc == 0, "lo");
		CHECK(!strcmp(st->interfaces[1].name, "eth0") &&
		      !strcmp(st->interfaces[1].xdp, "native") && st->interfaces[1].tc == 1, "eth0");
	}
	free(st);

	CHECK_OK(santa_detach(c, svc.service_id));
	CHECK_OK(santa_list_services(c, &list, &n));
	CHECK(n == 0, "%zu services after detach", n);
	free(list);
	santa_client__free(c);
	close(fd);
	fake_free(d);
}

/* ---- LIST_SERVICES in pages (version 7), and without (older santads) ---- */

static void test_services_pages(void)
{
	struct fake_daemon *d = fake_new(2, 0); /* pages of 2 */
	struct santa_client *c = pair_client(d);
	struct santa_service svc[5], *list = NULL;
	int fds[5];
	size_t i, n = 0;
	uint16_t port;
	unsigned asked;

	for (i = 0; i < 5; i++) {
		fds[i] = udp_socket(&port);
		CHECK_OK(santa_attach(c, fds[i], &svc[i]));
	}
	asked = fake_stats(d).requests[SANTA_LIST_SERVICES];
	CHECK_OK(santa_list_services(c, &list, &n));
	CHECK(n == 5 && list, "%zu services listed over pages of 2, want 5", n);
	for (i = 0; list && i < n && i < 5; i++)
		CHECK(list[i].service_id == svc[i].service_id && list[i].cookie == svc[i].cookie,
		      "service %zu listed is %u, want %u", i, list[i].service_id, svc[i].service_id);
	CHECK(fake_stats(d).requests[SANTA_LIST_SERVICES] - asked == 3, "%u pages asked, want 3",
	      fake_stats(d).requests[SANTA_LIST_SERVICES] - asked);
	free(list);
	santa_client__free(c);

	/* A santad of version 6 has no pages: 5 services past its one reply
	 * (2, here) are refused, not cut. */
	fake_speak(d, 6);
	c = pair_client(d);
	CHECK(santa_client__info(c)->version == 6, "version %u", santa_client__info(c)->version);
	list = NULL;
	n = 9;
	CHECK(santa_list_services(c, &list, &n) == -EPROTONOSUPPORT && !list && n == 0,
	      "5 services from a santad of version 6 that fits 2: %zu listed", n);
	CHECK(santa_detach(c, svc[0].service_id) == 0, "the connection does not outlive the refusal");
	santa_client__free(c);
	for (i = 0; i < 5; i++)
		close(fds[i]);
	fake_free(d);

	/* ... and one reply is the whole list. */
	d = fake_new(0, 0);
	fake_speak(d, 6);
	c = pair_client(d);
	for (i = 0; i < 3; i++) {
		fds[i] = udp_socket(&port);
		CHECK_OK(santa_attach(c, fds[i], &svc[i]));
	}
	CHECK_OK(santa_list_services(c, &list, &n));
	CHECK(n == 3 && list && list[2].service_id == svc[2].service_id, "%zu services from version 6", n);
	CHECK(fake_stats(d).requests[SANTA_LIST_SERVICES] == 1, "%u requests to version 6",
	      fake_stats(d).requests[SANTA_LIST_SERVICES]);
	free(list);
	santa_client__free(c);
	for (i = 0; i < 3; i++)
		close(fds[i]);
	fake_free(d);
}

/* ---- a manager longer than santa_service.manager holds is refused, not copied ---- */

static void test_long_manager(void)
{
	struct santa_msg m = { .version = 2, .type = SANTA_ATTACH | SANTA_REPLY }, got;
	size_t at = SANTA_HDR_LEN + 48; /* the manager's length */
	uint8_t buf[256];
	int n, err;

	memset(m.u.service.manager, 'm', sizeof(m.u.service.manager));
	n = santa_msg_encode(&m, buf, sizeof(buf));
	CHECK(n == -EINVAL, "a manager without its NUL encodes: %d", n);
	m.u.service.manager[64] = '\0';
	n = santa_msg_encode(&m, buf, sizeof(buf));
	CHECK(n == (int)at + 2 + 64, "64 bytes encode as %d", n);
	if (n != (int)at + 2 + 64)
		return;
	err = santa_msg_decode(buf, (size_t)n, &got);
	CHECK(!err && !strcmp(got.u.service.manager, m.u.service.manager), "64 bytes decode: %d", err);
	if (!err)
		santa_msg_release(&got);

	buf[at] = 65; /* one byte more on the wire */
	buf[n] = 'm';
	santa_msg_set_length(buf, (uint32_t)n + 1);
	err = santa_msg_decode(buf, (size_t)n + 1, &got);
	CHECK(err == -EINVAL, "65 bytes decode: %d", err);
	if (!err)
		santa_msg_release(&got);
}

/* ---- a daemon that misbehaves ---- */

enum canned {
	GOOD,          /* a correct empty DETACH reply */
	WRONG_SEQ,
	SHORT_BODY,    /* a SERVICE_STATS reply cut short */
	WRONG_TYPE,
	ERROR_EPROTO,  /* the daemon gives up on us */
	HANG_UP,
	STUCK_PAGE,    /* RULE_STATS whose next does not advance */
	HELLO_NEWER,   /* a HELLO reply with a version newer than the library's */
	WRONG_VERSION, /* a reply in version 1 on a connection of version 2 */
	HELLO_ERROR,   /* HELLO refused */
	SEND_FD,       /* a reply that carries an fd */
};

struct canned_server {
	int fd;
	enum canned what;
};

static void send_reply(int fd, struct santa_msg *m, int cut, int pass_fd)
{
	uint8_t buf[1024];
	int n = santa_msg_encode(m, buf, sizeof(buf));
	struct iovec iov = { .iov_base = buf };
	union santa_fd_ctl ctl;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (n < 0)
		abort();
	n -= cut;
	santa_msg_set_length(buf, (uint32_t)n); /* a consistent header: only the body is short */
	iov.iov_len = (size_t)n;
	if (pass_fd >= 0)
		santa_pass_fd(&mh, &ctl, pass_fd);
	if (sendmsg(fd, &mh, MSG_NOSIGNAL) != n)
		perror("canned reply");
}

static void *canned_serve(void *arg)
{
	struct canned_server *s = arg;
	uint8_t buf[SANTA_MSG_MAX];
	ssize_t n;

	while ((n = recv(s->fd, buf, sizeof(buf), 0)) > 0) {
		struct santa_msg q, m;
		uint16_t type;

		if (santa_msg_decode(buf, (size_t)n, &q))
			break;
		type = q.type;
		santa_msg_release(&q);
		memset(&m, 0, sizeof(m));
		m.type = type | SANTA_REPLY;
		m.seq = q.seq;
		m.version = s->what == WRONG_VERSION ? 1 : q.version;
		if (type == SANTA_HELLO) {
			m.u.hello_reply.version = s->what == HELLO_NEWER ? SANTA_PROTOCOL_VERSION + 1 : 2;
			m.version = s->what == HELLO_NEWER ? 1 : 2; /* the first message in it */
			if (s->what == HELLO_ERROR) {
				m.type = SANTA_ERROR;
				m.u.error.code = EPROTONOSUPPORT;
				m.u.error.index = SANTA_NO_INDEX;
				m.u.error.message.ptr = (const uint8_t *)"no common version";
				m.u.error.message.len = 17;
			}
			send_reply(s->fd, &m, 0, -1);
			continue;
		}
		switch (s->what) {
		case WRONG_SEQ:
			m.seq++;
			break;
		case WRONG_TYPE:
			m.type = SANTA_ABORT | SANTA_REPLY;
			break;
		case ERROR_EPROTO:
			m.type = SANTA_ERROR;
			m.u.error.code = EPROTO;
			m.u.error.index = SANTA_NO_INDEX;
			break;
		case HANG_UP:
			shutdown(s->fd, SHUT_RDWR);
			return NULL;
		case STUCK_PAGE:
			m.u.counters.next = 0; /* the start it was asked for */
			break;
		default:
			break;
		}
		send_reply(s->fd, &m, s->what == SHORT_BODY ? 3 : 0, s->what == SEND_FD ? 0 : -1);
	}
	return NULL;
}

static struct santa_client *canned_client(struct canned_server *s, pthread_t *t, int *err)
{
	struct santa_client *c = NULL;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		exit(2);
	s->fd = sv[1];
	pthread_create(t, NULL, canned_serve, s);
	*err = santa_client_from_fd(sv[0], NULL, &c);
	return c;
}

static void canned_done(struct santa_client *c, struct canned_server *s, pthread_t t)
{
	santa_client__free(c); /* EOF for the server */
	pthread_join(t, NULL);
	close(s->fd);
}

static void test_bad_daemon(void)
{
	static const struct {
		enum canned what;
		int want, then;
	} cases[] = {
		{ GOOD, 0, 0 },
		{ WRONG_SEQ, -EPROTO, -ENOTCONN },
		{ SHORT_BODY, -EBADMSG, 0 },
		{ WRONG_TYPE, -EPROTO, 0 },
		{ ERROR_EPROTO, -EPROTO, -ENOTCONN },
		{ HANG_UP, -ECONNRESET, -ENOTCONN },
		{ SEND_FD, 0, 0 },
		{ WRONG_VERSION, -EPROTO, -ENOTCONN },
	};
	struct santa_rule_counters *counters = NULL;
	struct santa_service_stats st;
	struct canned_server s;
	struct santa_client *c;
	size_t i, n;
	pthread_t t;
	int err, fds_before, fds_after;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		s.what = cases[i].what;
		c = canned_client(&s, &t, &err);
		CHECK(err == 0, "case %zu: HELLO %d", i, err);
		if (!c)
			continue;
		fds_before = dup(0);
		close(fds_before);
		err = s.what == SHORT_BODY ? santa_service_stats(c, 1, &st) : santa_detach(c, 1);
		fds_after = dup(0);
		close(fds_after);
		CHECK(err == cases[i].want, "case %zu: got %d (%s), want %d: %s", i, err,
		      santa_strerror(err), cases[i].want, santa_client__last_error(c)->message);
		CHECK(fds_before == fds_after, "case %zu: a passed fd leaked", i);
		if (cases[i].then) {
			err = santa_detach(c, 1);
			CHECK(err == cases[i].then, "case %zu: next call %d", i, err);
		}
		canned_done(c, &s, t);
	}

	s.what = STUCK_PAGE;
	c = canned_client(&s, &t, &err);
	err = santa_rule_stats(c, 1, &counters, &n);
	CHECK(err == -EPROTO && !counters, "stuck pages: %d", err);
	canned_done(c, &s, t);

	s.what = HELLO_NEWER;
	c = canned_client(&s, &t, &err);
	CHECK(err == -EPROTONOSUPPORT && !c, "HELLO of a version newer than the library's: %d", err);
	pthread_join(t, NULL);
	close(s.fd);

	s.what = HELLO_ERROR;
	c = canned_client(&s, &t, &err);
	CHECK(err == -EPROTONOSUPPORT && !c, "HELLO refused: %d", err);
	pthread_join(t, NULL);
	close(s.fd);
}

int main(void)
{
	test_connect();
	test_attach();
	test_listing1();
	test_length();
	test_guard();
	test_errors();
	test_big_batch();
	test_txn();
	test_services_status();
	test_services_pages();
	test_long_manager();
	test_bad_daemon();
	printf("test_client: %s\n", failures ? "FAIL" : "ok");
	return failures ? 1 : 0;
}
