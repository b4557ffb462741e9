/*
 * Every operation of libsanta against a live santad, checked in the kernel.
 *
 *   live SOCKET
 *
 * Run in a network namespace where santad serves lo, as any user
 * (test/daemon/sdk_test.go runs it as nobody).  A UDP socket on 127.0.0.1
 * plays the application: rules go onto it, and a second socket asks.  A
 * request the kernel answers never reaches the application; one it does not,
 * does.  Prints a line per step and "live: ok"; exits 1 at the first failure.
 * Built by `make`, not run by `make test`: it needs a real santad.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <santa/santa.h>

static struct santa_client *c;
static int app, peer; /* the application's socket, and a client of it */

static void fail(const char *fmt, ...)
{
	va_list ap;

	fputs("live: FAILED: ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	exit(1);
}

static void step(const char *what)
{
	printf("live: %s\n", what);
	fflush(stdout);
}

/* A call of libsanta must succeed. */
static void ok(int err, const char *what)
{
	if (err)
		fail("%s: %s: %s", what, santa_strerror(err), santa_client__last_error(c)->message);
}

/* A call of libsanta must be refused with -code and a message. */
static void refused(int err, int code, const char *what)
{
	if (err != -code || !*santa_client__last_error(c)->message)
		fail("%s: got %d (%s), want -%d", what, err, santa_strerror(err), code);
}

static void timeout(int fd, long usec)
{
	struct timeval tv = { .tv_sec = usec / 1000000, .tv_usec = usec % 1000000 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

static void sockets(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sin);

	app = socket(AF_INET, SOCK_DGRAM, 0);
	peer = socket(AF_INET, SOCK_DGRAM, 0);
	if (app < 0 || peer < 0 || bind(app, (struct sockaddr *)&sin, sizeof(sin)) ||
	    getsockname(app, (struct sockaddr *)&sin, &len) ||
	    connect(peer, (struct sockaddr *)&sin, sizeof(sin)))
		fail("UDP sockets: %s", strerror(errno));
	timeout(app, 1000000);
	timeout(peer, 1000000);
}

/* The kernel answers req with exactly reply (NUL-terminated strings, or
 * binary with explicit lengths). */
static void kernel_answers(const void *req, size_t req_len, const void *reply, size_t reply_len)
{
	char got[2048];
	ssize_t n;

	if (send(peer, req, req_len, 0) < 0)
		fail("send: %s", strerror(errno));
	n = recv(peer, got, sizeof(got), 0);
	if (n < 0)
		fail("%.*s: no reply: %s", (int)req_len, (const char *)req, strerror(errno));
	if ((size_t)n != reply_len || memcmp(got, reply, reply_len))
		fail("%.*s: got %zd bytes \"%.*s\", want \"%.*s\"", (int)req_len, (const char *)req, n,
		     (int)n, got, (int)reply_len, (const char *)reply);
}

static void answers(const char *req, const char *reply)
{
	kernel_answers(req, strlen(req), reply, strlen(reply));
}

/* req is not answered by the kernel: it reaches the application. */
static void app_receives(const char *req)
{
	char got[2048];
	ssize_t n;

	if (send(peer, req, strlen(req), 0) < 0)
		fail("send: %s", strerror(errno));
	n = recv(app, got, sizeof(got), 0);
	if (n != (ssize_t)strlen(req) || memcmp(got, req, (size_t)n))
		fail("%s: the application got %zd bytes (%s)", req, n, n < 0 ? strerror(errno) : "other");
	timeout(peer, 100000);
	n = recv(peer, got, sizeof(got), 0);
	timeout(peer, 1000000);
	if (n >= 0)
		fail("%s: answered by the kernel too: \"%.*s\"", req, (int)n, got);
}

/* Listing 1's kind of rule: pattern at offset 0 is answered with reply. */
static struct santa_rule *rule(const char *pattern, const char *reply)
{
	struct santa_rule *r = santa_rule__new(0, pattern, strlen(pattern), (uint16_t)strlen(reply));

	if (!r || santa_rule__put(r, 0, reply, strlen(reply)))
		fail("building the rule %s: %s", pattern, strerror(errno));
	return r;
}

static int collect(uint32_t id, const struct santa_rule *r, void *ctx)
{
	uint32_t *ids = ctx;
	size_t len;

	if (ids[0] < 16)
		ids[1 + ids[0]++] = id;
	santa_rule__pattern(r, &len);
	return len ? 0 : -EINVAL;
}

static uint64_t hits_of(const struct santa_rule_counters *rc, size_t n, uint32_t id)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (rc[i].rule_id == id)
			return rc[i].hits;
	fail("no counters for rule %u", id);
	return 0;
}

int main(int argc, char **argv)
{
	struct santa_rule *r[3], *echo;
	struct santa_rule_counters *rc;
	struct santa_service svc, *svcs;
	struct santa_service_stats st;
	struct santa_status *status;
	uint32_t ping, echo_id, batch[3], staged[3], txn, listed[17] = { 0 };
	size_t i, n, added;
	char line[128];

	if (argc != 2) {
		fprintf(stderr, "usage: live SOCKET\n");
		return 2;
	}
	sockets();
	ok(santa_client__connect(argv[1], "live", &c), "connecting");
	snprintf(line, sizeof(line), "hello: uid %u, admin %u", santa_client__info(c)->uid,
		 santa_client__info(c)->admin);
	step(line);
	ok(santa_attach(c, app, &svc), "attach");
	step("attach");

	r[0] = rule("ping", "pong");
	ok(santa_add_rule(c, svc.service_id, r[0], &ping), "add");
	answers("ping", "pong");
	/* a DNS-like rule: the reply begins with the request's 2-byte id */
	echo = santa_rule__new(2, "echo", 4, 6);
	if (!echo || santa_rule__put(echo, 2, "ECHO", 4) || santa_rule__copy(echo, 0, 2, 0))
		fail("building the copy rule");
	ok(santa_add_rule(c, svc.service_id, echo, &echo_id), "add (copy)");
	kernel_answers("\x12\x34" "echo", 6, "\x12\x34" "ECHO", 6);
	step("add: put and put + copy answered by the kernel");

	santa_rule__free(r[0]);
	r[0] = rule("ping", "PONG!");
	ok(santa_replace_rule(c, svc.service_id, ping, r[0]), "replace");
	answers("ping", "PONG!");
	step("replace: the new reply, same id");

	santa_rule__free(r[0]);
	r[0] = rule("b0", "B0");
	r[1] = rule("b1", "B1");
	r[2] = rule("b2", "B2");
	ok(santa_add_rules(c, svc.service_id, (const struct santa_rule *const *)r, 3, batch), "batch");
	answers("b0", "B0");
	answers("b1", "B1");
	answers("b2", "B2");
	step("batch: three rules");

	for (i = 0; i < 3; i++)
		santa_rule__free(r[i]);
	r[0] = rule("t0", "T0");
	r[1] = rule("t1", "T1");
	r[2] = rule("b0", "B0 again");
	ok(santa_txn_begin(c, svc.service_id, &txn), "begin");
	ok(santa_txn_add_rules(c, svc.service_id, txn, (const struct santa_rule *const *)r, 2, staged),
	   "staging adds");
	ok(santa_txn_replace_rules(c, svc.service_id, txn, &batch[0],
				   (const struct santa_rule *const *)&r[2], 1), "staging a replace");
	app_receives("t0"); /* staged, not applied */
	ok(santa_txn_commit(c, txn, &added), "commit");
	if (added != 2 || staged[0] == staged[1])
		fail("commit added %zu rules, staged ids %u %u", added, staged[0], staged[1]);
	answers("t0", "T0");
	answers("t1", "T1");
	answers("b0", "B0 again");
	step("transaction: ids known when staged, applied at commit");

	ok(santa_delete_rule(c, svc.service_id, batch[1]), "delete");
	app_receives("b1");
	step("delete: the request reaches the application");

	ok(santa_list_rules(c, svc.service_id, collect, listed), "list rules");
	if (listed[0] != 6)
		fail("listed %u rules, want 6", listed[0]);
	for (i = 2; i <= 6; i++)
		if (listed[i] <= listed[i - 1])
			fail("rules not in rising id order");
	step("rules: 6 listed, in rising id order");

	ok(santa_rule_stats(c, svc.service_id, &rc, &n), "rule stats");
	if (hits_of(rc, n, ping) != 2 || hits_of(rc, n, echo_id) != 1 || hits_of(rc, n, staged[0]) != 1)
		fail("rule hits: ping %lu, echo %lu, t0 %lu", (unsigned long)hits_of(rc, n, ping),
		     (unsigned long)hits_of(rc, n, echo_id), (unsigned long)hits_of(rc, n, staged[0]));
	free(rc);
	ok(santa_service_stats(c, svc.service_id, &st), "service stats");
	if (st.matched != 9 || st.passed < 2 || st.rules != 6)
		fail("service stats: matched %lu, passed %lu, rules %u", (unsigned long)st.matched,
		     (unsigned long)st.passed, st.rules);
	step("stats: rule hits and service counters as sent");

	ok(santa_list_services(c, &svcs, &n), "list services");
	for (i = 0; i < n && svcs[i].service_id != svc.service_id; i++)
		;
	if (i == n)
		fail("service %u not listed", svc.service_id);
	free(svcs);
	ok(santa_status(c, &status), "status");
	for (i = 0; i < status->interface_cnt && strcmp(status->interfaces[i].name, "lo"); i++)
		;
	if (status->rules < 6 || i == status->interface_cnt)
		fail("status: %u rules, lo not attached", status->rules);
	free(status);
	step("services and status");

	refused(santa_attach(c, app, &svc), EEXIST, "a second attach");
	refused(santa_delete_rule(c, svc.service_id, 0xfffffff0u), ENOENT, "deleting an unknown rule");
	step("errors: EEXIST for a second attach, ENOENT for an unknown rule");

	ok(santa_detach(c, svc.service_id), "detach");
	app_receives("ping");
	step("detach: everything reaches the application again");

	for (i = 0; i < 3; i++)
		santa_rule__free(r[i]);
	santa_rule__free(echo);
	santa_client__free(c);
	close(app);
	close(peer);
	puts("live: ok");
	return 0;
}
