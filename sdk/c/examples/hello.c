/*
 * hello: the paper's Listing 1 as a real UDP server on libsanta.
 *
 *   hello [-s santad.sock] [-t seconds] [address [port]]   (127.0.0.1 7777)
 *
 * It binds the UDP socket, attaches it to santad and installs one rule:
 * "Hello" at offset 0 is answered by the kernel with "COMSYS".  Every other
 * request reaches hello, which answers "APP:" + the request.  On SIGINT or
 * SIGTERM (or after -t seconds) it prints
 *   STATS kernel=<hits of the rule> app=<requests it answered>
 * and exits 0.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <santa/santa.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int fail(struct santa_client *c, const char *what, int err)
{
	const struct santa_error *e = santa_client__last_error(c);

	fprintf(stderr, "hello: %s: %s%s%s\n", what, santa_strerror(err),
		e && *e->message ? ": " : "", e ? e->message : "");
	return 1;
}

static int bind_udp(const char *addr, const char *port)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM,
				  .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV };
	struct addrinfo *ai;
	int fd, err = getaddrinfo(addr, port, &hints, &ai);

	if (err) {
		fprintf(stderr, "hello: %s port %s: %s\n", addr, port, gai_strerror(err));
		return -1;
	}
	fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		fprintf(stderr, "hello: binding %s:%s: %s\n", addr, port, strerror(errno));
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	return fd;
}

/* Answers requests until a signal: "APP:" + the request. */
static unsigned long long serve(int fd)
{
	unsigned long long answered = 0;
	char req[1472], reply[4 + sizeof(req)];

	while (!stop) {
		struct sockaddr_storage peer;
		socklen_t plen = sizeof(peer);
		ssize_t n = recvfrom(fd, req, sizeof(req), 0, (struct sockaddr *)&peer, &plen);

		if (n < 0) {
			if (errno != EINTR)
				perror("hello: recvfrom");
			continue;
		}
		memcpy(reply, "APP:", 4);
		memcpy(reply + 4, req, (size_t)n);
		if (sendto(fd, reply, 4 + (size_t)n, 0, (struct sockaddr *)&peer, plen) >= 0)
			answered++;
	}
	return answered;
}

int main(int argc, char **argv)
{
	const char *sock = NULL, *addr = "127.0.0.1", *port = "7777";
	struct santa_rule_counters *counters = NULL;
	struct sigaction sa = { .sa_handler = on_signal }; /* no SA_RESTART: recvfrom returns */
	struct santa_client *c = NULL;
	struct santa_rule *rule;
	struct santa_service svc;
	unsigned long long app, kernel = 0;
	uint32_t rule_id;
	size_t i, n = 0;
	int opt, fd, err, seconds = 0;

	while ((opt = getopt(argc, argv, "s:t:h")) != -1) {
		switch (opt) {
		case 's':
			sock = optarg;
			break;
		case 't':
			seconds = atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: hello [-s santad.sock] [-t seconds] [address [port]]\n");
			return 2;
		}
	}
	if (optind < argc)
		addr = argv[optind++];
	if (optind < argc)
		port = argv[optind++];

	fd = bind_udp(addr, port);
	if (fd < 0)
		return 1;
	err = santa_client__connect(sock, "hello", &c);
	if (err)
		return fail(NULL, "connecting to santad", err);
	err = santa_attach(c, fd, &svc);
	if (err)
		return fail(c, "attaching the socket", err);

	/* Listing 1: match "Hello" at offset 0, reply "COMSYS" */
	rule = santa_rule__new(0, "Hello", 5, 6);
	if (!rule)
		return fail(c, "building the rule", -errno);
	santa_rule__put(rule, 0, "COMSYS", 6);
	err = santa_add_rule(c, svc.service_id, rule, &rule_id);
	santa_rule__free(rule);
	if (err)
		return fail(c, "adding the rule", err);
	fprintf(stderr, "hello: serving %s:%s, service %u, rule %u\n", addr, port,
		svc.service_id, rule_id);

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGALRM, &sa, NULL);
	if (seconds > 0)
		alarm((unsigned)seconds);
	app = serve(fd);

	err = santa_rule_stats(c, svc.service_id, &counters, &n);
	if (err)
		return fail(c, "reading the rule's counters", err);
	for (i = 0; i < n; i++)
		if (counters[i].rule_id == rule_id)
			kernel = counters[i].hits;
	free(counters);
	printf("STATS kernel=%llu app=%llu\n", kernel, app);
	fflush(stdout);

	santa_detach(c, svc.service_id);
	santa_client__free(c);
	close(fd);
	return 0;
}
