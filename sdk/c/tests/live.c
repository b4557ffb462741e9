/*
 * Every operation of libsanta against a live santad, checked in the kernel.
 *
 *   live SOCKET
 *
 * Run in a network namespace where santad serves lo, as any user
 * (test/daemon/sdk_test.go runs it as nobody).  A UDP socket on 127.0.0.1
 * plays the application: rules go onto it, and a second socket asks.  A
 * request the kernel answers never reaches the application; one it does not,
 * does.  The test keeps its own account of the rules it installed and of the
 * requests the kernel answered for each, and wants santad's lists and
 * counters to agree with it.  Prints a line per step and "live: ok"; exits 1
 * at the first failure.  Built by `make`, not run by `make test`: it needs a
 * real santad.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <santa/santa.h>

#define TRIES 3       /* sends of a request the kernel should answer */
#define MAX_HELD 16   /* more rules than the test ever holds at once */

static struct santa_client *c;
static uint32_t sid;      /* the attached service */
static int app, peer;     /* the application's socket, and a client of it */
static uint16_t app_port; /* host order */

/* What santad must hold: each rule under its id, with the requests the
 * kernel answered for it; and what the service's counters must say. */
static struct held {
	uint32_t id;
	struct santa_rule *rule;
	uint64_t hits;
} held[MAX_HELD];
static size_t nheld;
static uint64_t answered, passed; /* by the kernel, to the application */

static void say(const char *prefix, const char *fmt, va_list ap)
{
	fputs(prefix, stdout);
	vprintf(fmt, ap);
	putchar('\n');
	fflush(stdout);
}

__attribute__((format(printf, 1, 2), noreturn)) static void fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say("live: FAILED: ", fmt, ap);
	va_end(ap);
	exit(1);
}

__attribute__((format(printf, 1, 2))) static void step(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say("live: ", fmt, ap);
	va_end(ap);
}

/* A call of libsanta must succeed. */
static void ok(int err, const char *what)
{
	if (err)
		fail("%s: %s: %s", what, santa_strerror(err), santa_client__last_error(c)->message);
}

/* A call of libsanta must be refused by santad with -code, and explained. */
static void refused(int err, int code, const char *what)
{
	const struct santa_error *e = santa_client__last_error(c);

	if (err != -code || !e->from_daemon || !*e->message || !*santa_strerror(err))
		fail("%s: got %d (%s: %s), want -%d from santad", what, err, santa_strerror(err),
		     e->message, code);
}

/* ---- the rules the test holds ---- */

static struct held *find(uint32_t id)
{
	size_t i;

	for (i = 0; i < nheld; i++)
		if (held[i].id == id)
			return &held[i];
	return NULL;
}

static struct held *must_find(uint32_t id)
{
	struct held *h = find(id);

	if (!h)
		fail("rule %u is not one the test installed", id);
	return h;
}

/* santad installed r under id: the test keeps r. */
static void hold(uint32_t id, struct santa_rule *r)
{
	if (find(id))
		fail("santad gave rule id %u twice", id);
	if (nheld == MAX_HELD)
		fail("the test holds more than %d rules", MAX_HELD);
	held[nheld++] = (struct held){ .id = id, .rule = r };
}

/* The rule under id was replaced by r: same id, and its counters go on. */
static void rehold(uint32_t id, struct santa_rule *r)
{
	struct held *h = must_find(id);

	santa_rule__free(h->rule);
	h->rule = r;
}

static void unhold(uint32_t id)
{
	struct held *h = must_find(id);

	santa_rule__free(h->rule);
	*h = held[--nheld];
}

/* Listing 1's kind of rule: pattern at offset 0 is answered with reply. */
static struct santa_rule *rule(const char *pattern, const char *reply)
{
	struct santa_rule *r = santa_rule__new(0, pattern, strlen(pattern), (uint16_t)strlen(reply));

	if (!r || santa_rule__put(r, 0, reply, strlen(reply)))
		fail("building the rule %s: %s", pattern, strerror(errno));
	return r;
}

static bool same_processor(const struct santa_processor *x, const struct santa_processor *y)
{
	return x->kind == y->kind && x->dst == y->dst && x->src == y->src && x->len == y->len &&
	       (x->kind != SANTA_PROC_PUT || !memcmp(x->data, y->data, x->len));
}

static bool same_rule(const struct santa_rule *a, const struct santa_rule *b)
{
	struct santa_processor x, y;
	size_t la, lb, i;
	const void *pa = santa_rule__pattern(a, &la), *pb = santa_rule__pattern(b, &lb);
	uint16_t mina, maxa, minb, maxb;

	if (santa_rule__length(a, &mina, &maxa) != santa_rule__length(b, &minb, &maxb) ||
	    mina != minb || maxa != maxb)
		return false;
	if (santa_rule__cond_off(a) != santa_rule__cond_off(b) || la != lb || memcmp(pa, pb, la) ||
	    santa_rule__reply_len(a) != santa_rule__reply_len(b) ||
	    santa_rule__processor_cnt(a) != santa_rule__processor_cnt(b))
		return false;
	for (i = 0; i < santa_rule__processor_cnt(a); i++)
		if (santa_rule__processor(a, i, &x) || santa_rule__processor(b, i, &y) ||
		    !same_processor(&x, &y))
			return false;
	return true;
}

/* ---- UDP on 127.0.0.1 ---- */

static void timeout(int fd, long usec)
{
	struct timeval tv = { .tv_sec = usec / 1000000, .tv_usec = usec % 1000000 };

	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)))
		fail("SO_RCVTIMEO: %s", strerror(errno));
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
	app_port = ntohs(sin.sin_port);
	timeout(app, 1000000);
	timeout(peer, 1000000);
}

static void send_request(const void *req, size_t len)
{
	if (send(peer, req, len, 0) != (ssize_t)len)
		fail("send: %s", strerror(errno));
}

/* Drops what reached the application: a request that raced its rule. */
static void drain_app(void)
{
	char buf[2048];

	while (recv(app, buf, sizeof(buf), MSG_DONTWAIT) >= 0)
		passed++;
}

/* The kernel answers req with exactly reply, by rule id.  The request is
 * sent a few times if need be: the first may race the rule into the kernel. */
static void kernel_answers(uint32_t id, const void *req, size_t req_len, const void *reply,
			   size_t reply_len)
{
	char got[2048];
	ssize_t n = -1;
	int i;

	for (i = 0; i < TRIES && n < 0; i++) {
		if (i)
			drain_app();
		send_request(req, req_len);
		n = recv(peer, got, sizeof(got), 0);
	}
	if (n < 0)
		fail("%.*s: no reply after %d tries: %s", (int)req_len, (const char *)req, TRIES,
		     strerror(errno));
	if ((size_t)n != reply_len || memcmp(got, reply, reply_len))
		fail("%.*s: got %zd bytes \"%.*s\", want \"%.*s\"", (int)req_len, (const char *)req, n,
		     (int)n, got, (int)reply_len, (const char *)reply);
	must_find(id)->hits++;
	answered++;
}

static void answers(uint32_t id, const char *req, const char *reply)
{
	kernel_answers(id, req, strlen(req), reply, strlen(reply));
}

/* req is not answered by the kernel: it reaches the application. */
static void app_receives(const char *req)
{
	char got[2048];
	ssize_t n;

	send_request(req, strlen(req));
	n = recv(app, got, sizeof(got), 0);
	if (n != (ssize_t)strlen(req) || memcmp(got, req, (size_t)n))
		fail("%s: the application got %zd bytes (%s)", req, n, n < 0 ? strerror(errno) : "other");
	passed++;
	timeout(peer, 100000);
	n = recv(peer, got, sizeof(got), 0);
	timeout(peer, 1000000);
	if (n >= 0)
		fail("%s: answered by the kernel too: \"%.*s\"", req, (int)n, got);
}

/* ---- the steps ---- */

static void test_hello_attach(const char *path)
{
	const struct santa_client_info *info;
	struct santa_service svc;

	ok(santa_client__connect(path, "live", &c), "connecting");
	info = santa_client__info(c);
	if (info->uid != getuid() || info->version != SANTA_PROTOCOL_VERSION)
		fail("hello: uid %u, version %u", info->uid, info->version);
	step("hello: uid %u, admin %u, %s", info->uid, info->admin, info->daemon);

	ok(santa_attach(c, app, &svc), "attach");
	if (svc.port != app_port || svc.family != 4 || svc.protocol != IPPROTO_UDP ||
	    strcmp(svc.manager, "live"))
		fail("attached port %u, family %u, protocol %u, manager \"%s\"", svc.port,
		     svc.family, svc.protocol, svc.manager);
	sid = svc.service_id;
	step("attach: service %u, port %u, manager %s", sid, app_port, svc.manager);
}

/* Returns the id of the "ping" rule. */
static uint32_t test_add(void)
{
	struct santa_rule *pong = rule("ping", "pong");
	struct santa_rule *echo = santa_rule__new(2, "echo", 4, 6);
	uint32_t ping_id, echo_id;

	ok(santa_add_rule(c, sid, pong, &ping_id), "add");
	hold(ping_id, pong);
	answers(ping_id, "ping", "pong");

	/* a DNS-like rule: the reply begins with the request's 2-byte id */
	if (!echo || santa_rule__put(echo, 2, "ECHO", 4) || santa_rule__copy(echo, 0, 2, 0))
		fail("building the copy rule");
	ok(santa_add_rule(c, sid, echo, &echo_id), "add (copy)");
	hold(echo_id, echo);
	kernel_answers(echo_id, "\x12\x34" "echo", 6, "\x12\x34" "ECHO", 6);
	kernel_answers(echo_id, "\xab\xcd" "echo", 6, "\xab\xcd" "ECHO", 6);
	step("add: rules %u (put) and %u (put + copy) answered by the kernel", ping_id, echo_id);
	return ping_id;
}

static void test_replace(uint32_t ping_id)
{
	struct santa_rule *r = rule("ping", "PONG!");

	ok(santa_replace_rule(c, sid, ping_id, r), "replace");
	rehold(ping_id, r);
	answers(ping_id, "ping", "PONG!");
	step("replace: rule %u has the new reply", ping_id);
}

/* Returns the batch's ids. */
static void test_batch(uint32_t ids[3])
{
	struct santa_rule *r[3] = { rule("b0", "B0"), rule("b1", "B1"), rule("b2", "B2") };
	size_t i;

	ok(santa_add_rules(c, sid, (const struct santa_rule *const *)r, 3, ids), "batch");
	for (i = 0; i < 3; i++)
		hold(ids[i], r[i]);
	answers(ids[0], "b0", "B0");
	answers(ids[1], "b1", "B1");
	answers(ids[2], "b2", "B2");
	step("batch: rules %u %u %u", ids[0], ids[1], ids[2]);
}

/* Adds t0..t2 and replaces the rule of b0 (id b0) in one transaction. */
static void test_txn(uint32_t b0)
{
	struct santa_rule *r[3] = { rule("t0", "T0"), rule("t1", "T1"), rule("t2", "T2") };
	struct santa_rule *again = rule("b0", "B0 again");
	uint32_t txn, staged[3];
	size_t i, added;

	ok(santa_txn_begin(c, sid, &txn), "begin");
	ok(santa_txn_add_rules(c, sid, txn, (const struct santa_rule *const *)r, 3, staged),
	   "staging adds");
	ok(santa_txn_replace_rules(c, sid, txn, &b0, (const struct santa_rule *const *)&again, 1),
	   "staging a replace");
	app_receives("t0"); /* staged, not applied */
	ok(santa_txn_commit(c, txn, &added), "commit");
	if (added != 3)
		fail("commit added %zu rules, want 3", added);
	for (i = 0; i < 3; i++)
		hold(staged[i], r[i]); /* fails if an id is given twice */
	rehold(b0, again);
	answers(staged[0], "t0", "T0");
	answers(staged[1], "t1", "T1");
	answers(staged[2], "t2", "T2");
	answers(b0, "b0", "B0 again");
	step("transaction: ids %u %u %u known when staged, applied at commit", staged[0], staged[1],
	     staged[2]);
}

static void test_delete(uint32_t id, const char *req)
{
	ok(santa_delete_rule(c, sid, id), "delete");
	unhold(id);
	app_receives(req);
	step("delete: rule %u gone, its request reaches the application", id);
}

/* A rule for requests of exactly 6 bytes: one byte more or less passes. */
static void test_length(void)
{
	struct santa_rule *exact = rule("len?", "LEN!");
	uint32_t id;

	ok(santa_rule__set_length(exact, 6, 6), "set length");
	ok(santa_add_rule(c, sid, exact, &id), "add (length)");
	hold(id, exact);
	answers(id, "len?xx", "LEN!");
	app_receives("len?xxx");
	app_receives("len?x");
	step("length: rule %u answers its length in the kernel, one byte more or less reaches the application",
	     id);
}

struct listing {
	size_t n;
	uint32_t last;
};

static int listed(uint32_t id, const struct santa_rule *r, void *ctx)
{
	struct listing *l = ctx;

	if (l->n++ && id <= l->last)
		fail("rule %u listed after rule %u", id, l->last);
	l->last = id;
	if (!same_rule(r, must_find(id)->rule))
		fail("rule %u does not read back as installed", id);
	return 0;
}

static void test_list(void)
{
	struct listing l = { 0, 0 };

	ok(santa_list_rules(c, sid, listed, &l), "list rules");
	if (l.n != nheld)
		fail("listed %zu rules, want %zu", l.n, nheld);
	step("rules: %zu listed, in rising id order, contents as installed", l.n);
}

static void test_stats(void)
{
	struct santa_rule_counters *rc;
	struct santa_service_stats st;
	size_t i, n;

	ok(santa_rule_stats(c, sid, &rc, &n), "rule stats");
	if (n != nheld)
		fail("counters for %zu rules, want %zu", n, nheld);
	for (i = 0; i < n; i++)
		if (rc[i].hits != must_find(rc[i].rule_id)->hits)
			fail("rule %u: %lu hits, the kernel answered %lu", rc[i].rule_id,
			     (unsigned long)rc[i].hits, (unsigned long)must_find(rc[i].rule_id)->hits);
	free(rc);

	ok(santa_service_stats(c, sid, &st), "service stats");
	/* passed may count more: whatever else reached the socket */
	if (st.matched != answered || st.passed < passed || st.rules != nheld)
		fail("service stats: matched %lu, passed %lu, rules %u; want %lu, %lu or more, %zu",
		     (unsigned long)st.matched, (unsigned long)st.passed, st.rules,
		     (unsigned long)answered, (unsigned long)passed, nheld);
	step("stats: every rule's hits as answered, service matched %lu, passed %lu",
	     (unsigned long)st.matched, (unsigned long)st.passed);
}

static void test_services_status(void)
{
	struct santa_service *svcs;
	struct santa_status *status;
	size_t i, n;

	ok(santa_list_services(c, &svcs, &n), "list services");
	for (i = 0; i < n && svcs[i].service_id != sid; i++)
		;
	if (i == n || svcs[i].rules != nheld || svcs[i].port != app_port ||
	    strcmp(svcs[i].manager, "live"))
		fail("service %u not listed as attached by live with %zu rules", sid, nheld);
	free(svcs);

	ok(santa_status(c, &status), "status");
	for (i = 0; i < status->interface_cnt && strcmp(status->interfaces[i].name, "lo"); i++)
		;
	if (status->rules < nheld || i == status->interface_cnt)
		fail("status: %u rules, lo not attached", status->rules);
	step("services and status: %s, %u rules on the host", status->daemon, status->rules);
	free(status);
}

static void test_errors(void)
{
	refused(santa_attach(c, app, NULL), EEXIST, "a second attach");
	refused(santa_delete_rule(c, sid, 0xfffffff0u), ENOENT, "deleting an unknown rule");
	step("errors: EEXIST for a second attach, ENOENT for an unknown rule");
}

/* A TCP listener: a request sent before accept() is answered by the kernel
 * once the application announces the connection with santa_accepted(), and
 * its first receive finds nothing. */
static void test_tcp_accepted(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sin);
	struct santa_rule *r = rule("GET /t\n", "TCP!\n");
	struct santa_service svc;
	char buf[16];
	uint32_t id;
	ssize_t n;
	int ln, cl, conn;

	ln = socket(AF_INET, SOCK_STREAM, 0);
	cl = socket(AF_INET, SOCK_STREAM, 0);
	if (ln < 0 || cl < 0 || bind(ln, (struct sockaddr *)&sin, sizeof(sin)) || listen(ln, 4) ||
	    getsockname(ln, (struct sockaddr *)&sin, &len))
		fail("TCP listener: %s", strerror(errno));
	ok(santa_attach(c, ln, &svc), "attach a TCP listener");
	ok(santa_add_rule(c, svc.service_id, r, &id), "a TCP rule");
	if (connect(cl, (struct sockaddr *)&sin, sizeof(sin)) || send(cl, "GET /t\n", 7, 0) != 7)
		fail("TCP client: %s", strerror(errno));
	conn = accept(ln, NULL, NULL); /* the request is in already: loopback */
	if (conn < 0)
		fail("accept: %s", strerror(errno));
	ok(santa_accepted(conn), "santa_accepted");
	timeout(cl, 1000000);
	n = recv(cl, buf, sizeof(buf), 0);
	if (n != 5 || memcmp(buf, "TCP!\n", 5))
		fail("TCP reply: %zd bytes, want \"TCP!\\n\" from the kernel", n);
	if (recv(conn, buf, sizeof(buf), MSG_DONTWAIT) != -1 || errno != EAGAIN)
		fail("the application received the request the kernel answered");
	ok(santa_detach(c, svc.service_id), "detach the TCP listener");
	santa_rule__free(r);
	close(conn);
	close(cl);
	close(ln);
	step("tcp: a request sent before accept() answered by the kernel after santa_accepted()");
}

static void test_detach(void)
{
	ok(santa_detach(c, sid), "detach");
	while (nheld)
		unhold(held[0].id);
	app_receives("ping");
	app_receives("b0");
	step("detach: everything reaches the application again");
}

int main(int argc, char **argv)
{
	uint32_t batch[3];

	if (argc != 2) {
		fprintf(stderr, "usage: live SOCKET\n");
		return 2;
	}
	sockets();
	test_hello_attach(argv[1]);
	test_replace(test_add());
	test_batch(batch);
	test_txn(batch[0]);
	test_delete(batch[1], "b1");
	test_length();
	test_list();
	test_stats();
	test_services_status();
	test_errors();
	test_tcp_accepted();
	test_detach();
	santa_client__free(c);
	close(app);
	close(peer);
	puts("live: ok");
	return 0;
}
