/* An in-memory santad for the tests (see fake_daemon.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <unistd.h>

#include "fake_daemon.h"

#define MAX_THREADS 64
#define MAX_SERVICES 64
#define MAX_TXNS 4 /* per connection, as santad */
#define OPT_SO_COOKIE 57
#define OPT_SO_NETNS_COOKIE 71

struct frule {
	uint32_t id;
	struct santa_rule *rule;
};

struct fservice {
	struct santa_service svc;
	struct frule *rules; /* rising ids */
	size_t n;
};

enum op_kind { OP_ADD, OP_REPLACE, OP_DELETE };

struct op {
	enum op_kind kind;
	uint32_t id;
	struct santa_rule *rule;
};

struct ftxn {
	uint32_t id, service_id;
	struct op *ops;
	size_t n;
};

struct conn {
	struct fake_daemon *d;
	int fd;
	bool hello;
	uint16_t version; /* what HELLO agreed on */
	char name[SANTA_CLIENT_NAME_MAX + 1]; /* HELLO's client: the manager of its services */
	struct ucred cred;
	struct ftxn txns[MAX_TXNS];
};

struct fake_daemon {
	pthread_mutex_t lock;
	uint16_t newest; /* the newest protocol version it speaks */
	uint32_t page_max;
	uint64_t hits;
	struct fservice services[MAX_SERVICES];
	size_t nservices;
	uint32_t next_service, next_rule, next_txn;
	struct fake_stats stats;
	pthread_t threads[MAX_THREADS];
	int fds[MAX_THREADS]; /* connection fds, to shut down */
	size_t nthreads;
	int listen_fd, stop_pipe[2];
	pthread_t acceptor;
	char path[108];
};

/* ---- replies ---- */

struct reply {
	struct santa_msg m;
	char text[1024];
	bool close; /* after EPROTO or EMSGSIZE */
};

__attribute__((format(printf, 4, 5)))
static void error_reply(struct reply *r, int code, uint32_t index, const char *fmt, ...)
{
	va_list ap;

	memset(&r->m, 0, sizeof(r->m));
	r->m.type = SANTA_ERROR;
	r->m.u.error.code = (uint32_t)code;
	r->m.u.error.index = index;
	va_start(ap, fmt);
	vsnprintf(r->text, sizeof(r->text), fmt, ap);
	va_end(ap);
	r->m.u.error.message.ptr = (const uint8_t *)r->text;
	r->m.u.error.message.len = (uint16_t)strlen(r->text);
	r->close = code == EPROTO || code == EMSGSIZE;
}

/* ---- state ---- */

static struct fservice *find_service(struct fake_daemon *d, uint32_t id)
{
	size_t i;

	for (i = 0; i < d->nservices; i++)
		if (d->services[i].svc.service_id == id)
			return &d->services[i];
	return NULL;
}

/* The service a request names, or NULL once r is santad's ENOENT for it. */
static struct fservice *named_service(struct fake_daemon *d, struct reply *r, uint32_t id)
{
	struct fservice *s = find_service(d, id);

	if (!s)
		error_reply(r, ENOENT, SANTA_NO_INDEX, "no service %u", id);
	return s;
}

static struct frule *find_rule(struct fservice *s, uint32_t id)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (s->rules[i].id == id)
			return &s->rules[i];
	return NULL;
}

/* Whether one request could match both: the same offset and pattern, and
 * length ranges (max 0: no bound) that share a length, as santad refuses. */
static bool same_condition(const struct santa_rule *a, const struct santa_rule *b)
{
	uint16_t lo = a->min_len > b->min_len ? a->min_len : b->min_len;

	return a->cond_off == b->cond_off && a->pattern_len == b->pattern_len &&
	       !memcmp(a->pattern, b->pattern, a->pattern_len) &&
	       (!a->max_len || lo <= a->max_len) && (!b->max_len || lo <= b->max_len);
}

/* The limit checks the tests rely on (rules.md): pattern 1..256 bytes. */
static bool rule_ok(struct reply *r, const struct santa_rule *rule, uint32_t i)
{
	if (rule->pattern_len < 1 || rule->pattern_len > 256) {
		error_reply(r, EINVAL, i, "condition pattern is %u bytes; the limit is 256",
			    rule->pattern_len);
		return false;
	}
	if (rule->reply_len < 1 || rule->reply_len > 1472) {
		error_reply(r, EINVAL, i, "reply is %u bytes; the limit is 1472", rule->reply_len);
		return false;
	}
	return true;
}

/* Checks a batch against the service (and against itself). */
static bool batch_ok(struct reply *r, struct fservice *s, const struct santa_msg *q, uint16_t type)
{
	uint32_t i, j;

	for (i = 0; i < q->u.batch.count; i++) {
		if (type != SANTA_ADD_RULES && !find_rule(s, q->u.batch.rule_ids[i])) {
			error_reply(r, ENOENT, i, "service %u has no rule %u", s->svc.service_id,
				    q->u.batch.rule_ids[i]);
			return false;
		}
		if (type == SANTA_DELETE_RULES)
			continue;
		if (!rule_ok(r, q->u.batch.rules[i], i))
			return false;
		if (type != SANTA_ADD_RULES)
			continue;
		for (j = 0; j < s->n; j++)
			if (same_condition(s->rules[j].rule, q->u.batch.rules[i])) {
				error_reply(r, EEXIST, i, "rules %u and new have the same condition",
					    s->rules[j].id);
				return false;
			}
		for (j = 0; j < i; j++)
			if (same_condition(q->u.batch.rules[j], q->u.batch.rules[i])) {
				error_reply(r, EEXIST, i, "rules %u and %u of the batch have the same condition", j, i);
				return false;
			}
	}
	return true;
}

static void add_rule(struct fservice *s, uint32_t id, const struct santa_rule *rule)
{
	struct frule *rules = realloc(s->rules, (s->n + 1) * sizeof(*rules));

	if (!rules)
		abort();
	s->rules = rules;
	rules[s->n].id = id;
	rules[s->n].rule = santa_rule__clone(rule);
	s->svc.rules = (uint32_t)++s->n;
}

static void replace_rule(struct fservice *s, uint32_t id, const struct santa_rule *rule)
{
	struct frule *f = find_rule(s, id);

	santa_rule__free(f->rule);
	f->rule = santa_rule__clone(rule);
}

static void delete_rule(struct fservice *s, uint32_t id)
{
	struct frule *f = find_rule(s, id);

	if (!f)
		return;
	santa_rule__free(f->rule);
	memmove(f, f + 1, (size_t)(s->rules + s->n - (f + 1)) * sizeof(*f));
	s->svc.rules = (uint32_t)--s->n;
}

static void drop_service(struct fake_daemon *d, struct fservice *s)
{
	while (s->n)
		delete_rule(s, s->rules[0].id);
	free(s->rules);
	*s = d->services[--d->nservices];
}

static void txn_free(struct ftxn *t)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		santa_rule__free(t->ops[i].rule);
	free(t->ops);
	memset(t, 0, sizeof(*t));
}

static struct ftxn *find_txn(struct conn *c, uint32_t id)
{
	size_t i;

	for (i = 0; id && i < MAX_TXNS; i++)
		if (c->txns[i].id == id)
			return &c->txns[i];
	return NULL;
}

/* Like santad, an added rule gets its id when staged: ids receives them. */
static void stage(struct fake_daemon *d, struct ftxn *t, const struct santa_msg *q, uint16_t type,
		  uint32_t *ids)
{
	uint32_t i;

	t->ops = realloc(t->ops, (t->n + q->u.batch.count) * sizeof(*t->ops));
	if (!t->ops)
		abort();
	for (i = 0; i < q->u.batch.count; i++) {
		struct op *o = &t->ops[t->n++];

		o->kind = type == SANTA_ADD_RULES ? OP_ADD : type == SANTA_REPLACE_RULES ? OP_REPLACE
											: OP_DELETE;
		o->id = type == SANTA_ADD_RULES ? (ids[i] = d->next_rule++) : q->u.batch.rule_ids[i];
		o->rule = type == SANTA_DELETE_RULES ? NULL : santa_rule__clone(q->u.batch.rules[i]);
	}
}

/* ---- requests ---- */

static void do_attach(struct conn *c, struct reply *r, int *fds, int nfd)
{
	struct fake_daemon *d = c->d;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct fservice *s;
	uint64_t cookie = 0, netns = 0;
	int proto = 0, domain = 0;
	socklen_t ol;
	struct stat st;
	size_t i;

	if (nfd != 1) {
		error_reply(r, EBADF, SANTA_NO_INDEX, "ATTACH carries %d fds; it needs 1", nfd);
		return;
	}
	if (fstat(fds[0], &st) < 0 || !S_ISSOCK(st.st_mode)) {
		error_reply(r, ENOTSOCK, SANTA_NO_INDEX, "the fd is not a socket");
		return;
	}
	ol = sizeof(cookie);
	getsockopt(fds[0], SOL_SOCKET, OPT_SO_COOKIE, &cookie, &ol);
	ol = sizeof(netns);
	getsockopt(fds[0], SOL_SOCKET, OPT_SO_NETNS_COOKIE, &netns, &ol);
	ol = sizeof(proto);
	getsockopt(fds[0], SOL_SOCKET, SO_PROTOCOL, &proto, &ol);
	ol = sizeof(domain);
	getsockopt(fds[0], SOL_SOCKET, SO_DOMAIN, &domain, &ol);
	d->stats.last_cookie = cookie;
	if (proto != IPPROTO_UDP || (domain != AF_INET && domain != AF_INET6)) {
		error_reply(r, EOPNOTSUPP, SANTA_NO_INDEX, "not a UDP socket");
		return;
	}
	memset(&ss, 0, sizeof(ss));
	if (getsockname(fds[0], (struct sockaddr *)&ss, &len) < 0) {
		error_reply(r, EINVAL, SANTA_NO_INDEX, "getsockname: %s", strerror(errno));
		return;
	}
	for (i = 0; i < d->nservices; i++)
		if (d->services[i].svc.cookie == cookie) {
			error_reply(r, EEXIST, SANTA_NO_INDEX, "socket %llu is service %u already",
				    (unsigned long long)cookie, d->services[i].svc.service_id);
			return;
		}
	if (d->nservices == MAX_SERVICES) {
		error_reply(r, ENOSPC, SANTA_NO_INDEX, "no room for a service");
		return;
	}
	s = &d->services[d->nservices++];
	memset(s, 0, sizeof(*s));
	s->svc.service_id = d->next_service++;
	s->svc.protocol = IPPROTO_UDP;
	s->svc.cookie = cookie;
	s->svc.netns_cookie = netns;
	s->svc.owner_uid = c->cred.uid;
	memcpy(s->svc.manager, c->name, sizeof(s->svc.manager));
	if (domain == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

		s->svc.family = 4;
		s->svc.port = ntohs(sin->sin_port);
		memcpy(s->svc.addr, &sin->sin_addr, 4);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

		s->svc.family = 6;
		s->svc.port = ntohs(sin6->sin6_port);
		memcpy(s->svc.addr, &sin6->sin6_addr, 16);
	}
	if (!s->svc.port) {
		d->nservices--;
		error_reply(r, EINVAL, SANTA_NO_INDEX, "the socket is not bound");
		return;
	}
	r->m.u.service = s->svc;
}

static void do_batch(struct conn *c, struct reply *r, const struct santa_msg *q, uint16_t type,
		     uint32_t *ids)
{
	struct fake_daemon *d = c->d;
	struct fservice *s = named_service(d, r, q->u.batch.service_id);
	struct ftxn *t = NULL;
	uint32_t i;

	if (!s)
		return;
	if (q->u.batch.txn) {
		t = find_txn(c, q->u.batch.txn);
		if (!t || t->service_id != s->svc.service_id) {
			error_reply(r, ENOENT, SANTA_NO_INDEX, "no transaction %u on service %u",
				    q->u.batch.txn, s->svc.service_id);
			return;
		}
		d->stats.txn_batches++;
	}
	if (!batch_ok(r, s, q, type))
		return;
	if (t)
		stage(d, t, q, type, ids);
	for (i = 0; !t && i < q->u.batch.count; i++) {
		if (type == SANTA_ADD_RULES)
			add_rule(s, ids[i] = d->next_rule++, q->u.batch.rules[i]);
		else if (type == SANTA_REPLACE_RULES)
			replace_rule(s, q->u.batch.rule_ids[i], q->u.batch.rules[i]);
		else
			delete_rule(s, q->u.batch.rule_ids[i]);
	}
	if (type == SANTA_ADD_RULES) {
		r->m.u.ids.count = q->u.batch.count;
		r->m.u.ids.rule_ids = ids;
	}
}

static void do_commit(struct conn *c, struct reply *r, uint32_t id)
{
	struct fake_daemon *d = c->d;
	struct ftxn *t = find_txn(c, id);
	struct fservice *s;
	uint32_t n = 0;
	size_t i, j;

	if (!t) {
		error_reply(r, ENOENT, SANTA_NO_INDEX, "no transaction %u", id);
		return;
	}
	s = find_service(d, t->service_id);
	if (!s) {
		txn_free(t);
		error_reply(r, ENOENT, SANTA_NO_INDEX, "the service is gone");
		return;
	}
	/* all or nothing: new conditions must not clash with what is there */
	for (i = 0; i < t->n; i++)
		for (j = 0; t->ops[i].kind == OP_ADD && j < s->n; j++)
			if (same_condition(s->rules[j].rule, t->ops[i].rule)) {
				error_reply(r, EEXIST, (uint32_t)i, "rule %u has the same condition",
					    s->rules[j].id);
				txn_free(t);
				return;
			}
	for (i = 0; i < t->n; i++) {
		struct op *o = &t->ops[i];

		if (o->kind == OP_ADD) {
			add_rule(s, o->id, o->rule);
			n++;
		} else if (o->kind == OP_REPLACE && find_rule(s, o->id))
			replace_rule(s, o->id, o->rule);
		else if (o->kind == OP_DELETE)
			delete_rule(s, o->id);
	}
	txn_free(t);
	r->m.u.commit.added = n;
}

/* Items of a page: from start, at most page_max (and max), rising ids. */
static size_t page(struct fake_daemon *d, struct fservice *s, const struct santa_msg *q,
		   size_t *first, uint32_t *next)
{
	size_t i = 0, n, limit = d->page_max;

	if (q->u.page.max && q->u.page.max < limit)
		limit = q->u.page.max;
	while (i < s->n && s->rules[i].id < q->u.page.start)
		i++;
	*first = i;
	n = s->n - i < limit ? s->n - i : limit;
	*next = i + n < s->n ? s->rules[i + n].id : SANTA_NO_NEXT;
	return n;
}

/* Answers q; bufs hold what the reply points to until it is sent. */
static void handle(struct conn *c, const struct santa_msg *q, int *fds, int nfd, struct reply *r,
		   void **bufs)
{
	struct fake_daemon *d = c->d;
	uint16_t type = q->type;
	struct fservice *s;
	size_t i, first, n;
	uint64_t *hits;

	memset(r, 0, sizeof(*r));
	r->m.type = type | SANTA_REPLY;
	if (type & SANTA_REPLY) {
		error_reply(r, EPROTO, SANTA_NO_INDEX, "a reply is no request");
		return;
	}
	d->stats.requests[type]++;
	if (!c->hello && type != SANTA_HELLO) {
		error_reply(r, EPROTO, SANTA_NO_INDEX, "HELLO first");
		return;
	}
	if (type != SANTA_ATTACH && nfd) {
		error_reply(r, EBADF, SANTA_NO_INDEX, "only ATTACH carries an fd");
		return;
	}
	switch (type) {
	case SANTA_HELLO: {
		uint16_t v = q->u.hello.max_version < d->newest ? q->u.hello.max_version : d->newest;

		if (v < q->u.hello.min_version || v < 1) {
			error_reply(r, EPROTONOSUPPORT, SANTA_NO_INDEX, "this daemon speaks versions 1 to %u",
				    d->newest);
			return;
		}
		c->hello = true;
		c->version = v;
		snprintf(c->name, sizeof(c->name), "%.*s", (int)q->u.hello.client.len,
			 (const char *)q->u.hello.client.ptr);
		r->m.u.hello_reply.version = v;
		r->m.u.hello_reply.uid = c->cred.uid;
		r->m.u.hello_reply.gid = c->cred.gid;
		r->m.u.hello_reply.pid = (uint32_t)c->cred.pid;
		r->m.u.hello_reply.admin = c->cred.uid == 0;
		r->m.u.hello_reply.quota_rules = 65536;
		r->m.u.hello_reply.quota_bytes = 64 << 20;
		r->m.u.hello_reply.daemon.ptr = (const uint8_t *)"fake-santad 0.1";
		r->m.u.hello_reply.daemon.len = 15;
		return;
	}
	case SANTA_ATTACH:
		if (q->u.attach.flags) {
			error_reply(r, EINVAL, SANTA_NO_INDEX, "flags is %u; it must be 0",
				    q->u.attach.flags);
			return;
		}
		do_attach(c, r, fds, nfd);
		return;
	case SANTA_DETACH:
		s = named_service(d, r, q->u.svc.service_id);
		if (s)
			drop_service(d, s);
		return;
	case SANTA_ADD_RULES:
	case SANTA_REPLACE_RULES:
	case SANTA_DELETE_RULES:
		bufs[0] = calloc(q->u.batch.count + 1, sizeof(uint32_t));
		do_batch(c, r, q, type, bufs[0]);
		return;
	case SANTA_BEGIN:
		s = named_service(d, r, q->u.svc.service_id);
		if (!s)
			return;
		for (i = 0; i < MAX_TXNS && c->txns[i].id; i++)
			;
		if (i == MAX_TXNS) {
			error_reply(r, ENOSPC, SANTA_NO_INDEX, "4 transactions are open already");
			return;
		}
		c->txns[i].id = d->next_txn++;
		c->txns[i].service_id = s->svc.service_id;
		r->m.u.txn.txn = c->txns[i].id;
		return;
	case SANTA_COMMIT:
		do_commit(c, r, q->u.txn.txn);
		return;
	case SANTA_ABORT: {
		struct ftxn *t = find_txn(c, q->u.txn.txn);

		if (!t)
			error_reply(r, ENOENT, SANTA_NO_INDEX, "no transaction %u", q->u.txn.txn);
		else
			txn_free(t);
		return;
	}
	case SANTA_LIST_SERVICES: {
		/* Version 7: a page from start, of at most page_max (and max). */
		struct santa_service *list = calloc(d->nservices + 1, sizeof(*list));
		size_t limit = d->page_max;

		if (c->version < 7 && d->nservices > limit) {
			free(list);
			error_reply(r, EPROTONOSUPPORT, SANTA_NO_INDEX, "%zu services take more than one reply",
				    d->nservices);
			return;
		}
		if (c->version < 7)
			limit = d->nservices;
		else if (q->u.page.max && q->u.page.max < limit)
			limit = q->u.page.max;
		r->m.u.services.next = c->version < 7 ? 0 : SANTA_NO_NEXT;
		n = 0;
		for (i = 0; i < d->nservices; i++) {
			if (d->services[i].svc.service_id < q->u.page.start)
				continue;
			if (n == limit) {
				r->m.u.services.next = d->services[i].svc.service_id;
				break;
			}
			list[n++] = d->services[i].svc;
		}
		bufs[0] = list;
		r->m.u.services.count = (uint32_t)n;
		r->m.u.services.services = list;
		return;
	}
	case SANTA_LIST_RULES:
	case SANTA_RULE_STATS:
		s = named_service(d, r, q->u.page.service_id);
		if (!s)
			return;
		n = page(d, s, q, &first, type == SANTA_LIST_RULES ? &r->m.u.rules.next
								   : &r->m.u.counters.next);
		if (type == SANTA_LIST_RULES) {
			uint32_t *ids = calloc(n + 1, sizeof(*ids));
			const struct santa_rule **rules = calloc(n + 1, sizeof(*rules));

			for (i = 0; i < n; i++) {
				ids[i] = s->rules[first + i].id;
				rules[i] = s->rules[first + i].rule;
			}
			bufs[0] = ids;
			bufs[1] = rules;
			r->m.u.rules.count = (uint32_t)n;
			r->m.u.rules.rule_ids = ids;
			r->m.u.rules.rules = rules;
		} else {
			struct santa_rule_counters *cs = calloc(n + 1, sizeof(*cs));

			for (i = 0; i < n; i++) {
				cs[i].rule_id = s->rules[first + i].id;
				cs[i].hits = d->hits;
				cs[i].bytes = d->hits * s->rules[first + i].rule->reply_len;
			}
			bufs[0] = cs;
			r->m.u.counters.count = (uint32_t)n;
			r->m.u.counters.counters = cs;
		}
		return;
	case SANTA_SERVICE_STATS:
		s = named_service(d, r, q->u.svc.service_id);
		if (!s)
			return;
		hits = &r->m.u.stats.matched;
		*hits = d->hits * s->n;
		r->m.u.stats.passed = 3;
		r->m.u.stats.rules = (uint32_t)s->n;
		for (i = 0; i < s->n; i++)
			r->m.u.stats.rule_bytes += s->rules[i].rule->pattern_len +
						   s->rules[i].rule->reply_len;
		return;
	case SANTA_STATUS: {
		static const struct santa_wire_iface ifaces[] = {
			{ 1, { (const uint8_t *)"lo", 2 }, { (const uint8_t *)"generic", 7 }, 0 },
			{ 2, { (const uint8_t *)"eth0", 4 }, { (const uint8_t *)"native", 6 }, 1 },
		};
		uint32_t total = 0;

		for (i = 0; i < d->nservices; i++)
			total += (uint32_t)d->services[i].n;
		r->m.u.status.daemon.ptr = (const uint8_t *)"fake-santad 0.1";
		r->m.u.status.daemon.len = 15;
		r->m.u.status.rules = total;
		r->m.u.status.capacity = 1u << 20;
		r->m.u.status.services = (uint32_t)d->nservices;
		r->m.u.status.count = 2;
		r->m.u.status.ifaces = ifaces;
		return;
	}
	}
}

/* ---- connections ---- */

static int recv_request(struct conn *c, uint8_t *buf, size_t cap, int *fds, int *nfd)
{
	struct iovec iov = { .iov_base = buf, .iov_len = cap };
	union {
		char b[CMSG_SPACE(8 * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
			     .msg_controllen = sizeof(ctl.b) };
	struct cmsghdr *cm;
	ssize_t n;

	*nfd = 0;
	do
		n = recvmsg(c->fd, &mh, MSG_TRUNC | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return -1;
	for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		size_t k, cnt;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		cnt = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (k = 0; k < cnt && *nfd < 8; k++)
			memcpy(&fds[(*nfd)++], CMSG_DATA(cm) + k * sizeof(int), sizeof(int));
	}
	return (int)n;
}

static void *serve(void *arg)
{
	struct conn *c = arg;
	struct fake_daemon *d = c->d;
	uint8_t *in = malloc(SANTA_MSG_MAX + 1), *out = malloc(SANTA_MSG_MAX);
	socklen_t cl = sizeof(c->cred);
	struct reply *r = malloc(sizeof(*r));

	if (!in || !out || !r)
		abort();
	getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &c->cred, &cl);
	for (;;) {
		struct santa_msg q;
		void *bufs[2] = { NULL, NULL };
		int fds[8], nfd, n, k, err, len;

		n = recv_request(c, in, SANTA_MSG_MAX + 1, fds, &nfd);
		if (n < 0)
			break;
		pthread_mutex_lock(&d->lock);
		if ((size_t)n > d->stats.max_len)
			d->stats.max_len = (size_t)n;
		err = santa_msg_decode(in, (size_t)(n > SANTA_MSG_MAX ? SANTA_MSG_MAX + 1 : n), &q);
		if (err) {
			if (err == -EMSGSIZE)
				d->stats.oversize++;
			memset(r, 0, sizeof(*r));
			error_reply(r, -err, SANTA_NO_INDEX, "cannot decode the request: %s",
				    santa_strerror(err));
			r->m.seq = n >= 16 ? (uint32_t)(in[12] | in[13] << 8 | in[14] << 16 |
							(uint32_t)in[15] << 24) : 0;
		} else {
			handle(c, &q, fds, nfd, r, bufs);
			r->m.seq = q.seq;
			r->m.version = q.version;
			santa_msg_release(&q);
		}
		/* In the version HELLO agreed on, its reply the first; before it, in
		 * the request's, or 1 if that is unknown. */
		if (c->hello)
			r->m.version = c->version;
		else if (!r->m.version)
			r->m.version = 1;
		pthread_mutex_unlock(&d->lock);
		for (k = 0; k < nfd; k++)
			close(fds[k]); /* santad keeps no copy */
		len = santa_msg_encode(&r->m, out, SANTA_MSG_MAX);
		free(bufs[0]);
		free(bufs[1]);
		if (len < 0) {
			fprintf(stderr, "fake santad: cannot encode a reply: %s\n", santa_strerror(len));
			abort();
		}
		if (send(c->fd, out, (size_t)len, MSG_NOSIGNAL) != len || r->close)
			break;
	}
	pthread_mutex_lock(&d->lock);
	for (int k = 0; k < MAX_TXNS; k++)
		txn_free(&c->txns[k]); /* closing the connection aborts them */
	pthread_mutex_unlock(&d->lock);
	shutdown(c->fd, SHUT_RDWR);
	free(in);
	free(out);
	free(r);
	free(c);
	return NULL;
}

static int start_thread(struct fake_daemon *d, void *(*fn)(void *), void *arg, int fd)
{
	int err;

	pthread_mutex_lock(&d->lock);
	if (d->nthreads == MAX_THREADS) {
		pthread_mutex_unlock(&d->lock);
		return -EAGAIN;
	}
	err = pthread_create(&d->threads[d->nthreads], NULL, fn, arg);
	if (!err)
		d->fds[d->nthreads++] = fd;
	pthread_mutex_unlock(&d->lock);
	return -err;
}

int fake_serve(struct fake_daemon *d, int fd)
{
	struct conn *c = calloc(1, sizeof(*c));
	int err;

	if (!c)
		return -ENOMEM;
	c->d = d;
	c->fd = fd;
	pthread_mutex_lock(&d->lock);
	d->stats.connections++;
	pthread_mutex_unlock(&d->lock);
	err = start_thread(d, serve, c, fd);
	if (err)
		free(c);
	return err;
}

static void *accept_loop(void *arg)
{
	struct fake_daemon *d = arg;

	for (;;) {
		struct pollfd p[2] = { { d->listen_fd, POLLIN, 0 }, { d->stop_pipe[0], POLLIN, 0 } };
		int fd;

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		fd = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0 && fake_serve(d, fd) < 0)
			close(fd);
	}
	return NULL;
}

int fake_listen(struct fake_daemon *d, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int err;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	strcpy(d->path, path);
	d->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (d->listen_fd < 0 || bind(d->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(d->listen_fd, 16) < 0 || pipe2(d->stop_pipe, O_CLOEXEC) < 0) {
		err = -errno;
		if (d->listen_fd >= 0)
			close(d->listen_fd);
		d->listen_fd = -1;
		return err;
	}
	err = pthread_create(&d->acceptor, NULL, accept_loop, d);
	if (err) {
		close(d->listen_fd);
		d->listen_fd = -1;
	}
	return -err;
}

struct fake_daemon *fake_new(uint32_t page_max, uint64_t hits_per_rule)
{
	struct fake_daemon *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	pthread_mutex_init(&d->lock, NULL);
	d->newest = SANTA_PROTOCOL_VERSION;
	d->page_max = page_max ? page_max : 1000;
	d->hits = hits_per_rule;
	d->next_service = 1;
	d->next_rule = 1;
	d->next_txn = 1;
	d->listen_fd = -1;
	d->stop_pipe[0] = d->stop_pipe[1] = -1;
	return d;
}

void fake_speak_v1(struct fake_daemon *d)
{
	fake_speak(d, 1);
}

void fake_speak(struct fake_daemon *d, uint16_t newest)
{
	pthread_mutex_lock(&d->lock);
	d->newest = newest;
	pthread_mutex_unlock(&d->lock);
}

struct fake_stats fake_stats(struct fake_daemon *d)
{
	struct fake_stats s;

	pthread_mutex_lock(&d->lock);
	s = d->stats;
	pthread_mutex_unlock(&d->lock);
	return s;
}

size_t fake_rule_count(struct fake_daemon *d)
{
	size_t i, n = 0;

	pthread_mutex_lock(&d->lock);
	for (i = 0; i < d->nservices; i++)
		n += d->services[i].n;
	pthread_mutex_unlock(&d->lock);
	return n;
}

bool fake_has_rule(struct fake_daemon *d, uint32_t id)
{
	bool found = false;
	size_t i;

	pthread_mutex_lock(&d->lock);
	for (i = 0; i < d->nservices && !found; i++)
		found = find_rule(&d->services[i], id) != NULL;
	pthread_mutex_unlock(&d->lock);
	return found;
}

void fake_free(struct fake_daemon *d)
{
	size_t i;

	if (!d)
		return;
	if (d->listen_fd >= 0) {
		if (write(d->stop_pipe[1], "x", 1) < 0)
			perror("fake santad: stop");
		pthread_join(d->acceptor, NULL);
	}
	/* connections: EOF for both ends */
	for (i = 0; i < d->nthreads; i++)
		if (d->fds[i] >= 0)
			shutdown(d->fds[i], SHUT_RDWR);
	for (i = 0; i < d->nthreads; i++) {
		pthread_join(d->threads[i], NULL);
		if (d->fds[i] >= 0)
			close(d->fds[i]);
	}
	if (d->listen_fd >= 0) {
		close(d->listen_fd);
		unlink(d->path);
	}
	if (d->stop_pipe[0] >= 0) {
		close(d->stop_pipe[0]);
		close(d->stop_pipe[1]);
	}
	while (d->nservices)
		drop_service(d, &d->services[0]);
	pthread_mutex_destroy(&d->lock);
	free(d);
}
