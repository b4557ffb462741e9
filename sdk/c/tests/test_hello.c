/*
 * examples/hello against the fake santad: it attaches, installs Listing 1,
 * answers what reaches it with "APP:" + the request, and on SIGTERM (or
 * after -t) prints STATS with the rule's hits and its own count.
 * The fake daemon answers nothing in the kernel, so hello sees "Hello" too;
 * it reports 5 hits per rule.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "fake_daemon.h"

static uint16_t free_port(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sin, &len) < 0)
		exit(2);
	close(fd);
	return ntohs(sin.sin_port);
}

static pid_t start_hello(const char *hello, const char *sock, const char *seconds, uint16_t port,
			 int *out)
{
	char portstr[8];
	int p[2];
	pid_t pid;

	snprintf(portstr, sizeof(portstr), "%u", port);
	if (pipe(p) < 0)
		exit(2);
	pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		if (seconds)
			execl(hello, "hello", "-s", sock, "-t", seconds, "127.0.0.1", portstr, (char *)NULL);
		else
			execl(hello, "hello", "-s", sock, "127.0.0.1", portstr, (char *)NULL);
		perror("exec hello");
		_exit(127);
	}
	close(p[1]);
	*out = p[0];
	return pid;
}

/* Waits until hello has installed its rule (at most 5 s). */
static bool wait_rule(struct fake_daemon *d)
{
	int i;

	for (i = 0; i < 500; i++) {
		if (fake_rule_count(d) == 1)
			return true;
		usleep(10000);
	}
	return false;
}

static bool ask(int fd, uint16_t port, const char *req, const char *want)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char buf[256];
	ssize_t n;

	if (sendto(fd, req, strlen(req), 0, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		return false;
	n = recv(fd, buf, sizeof(buf) - 1, 0);
	if (n < 0)
		return false;
	buf[n] = '\0';
	CHECK(!strcmp(buf, want), "reply to %s: %s", req, buf);
	return true;
}

static void finish(pid_t pid, int out, const char *want)
{
	char buf[256] = "";
	ssize_t n, got = 0;
	int status = 0;

	while ((n = read(out, buf + got, sizeof(buf) - 1 - (size_t)got)) > 0)
		got += n;
	buf[got] = '\0';
	close(out);
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "hello exited with status %d", status);
	CHECK(!strcmp(buf, want), "hello printed \"%s\", want \"%s\"", buf, want);
}

int main(int argc, char **argv)
{
	const char *hello = argc > 1 ? argv[1] : "build/hello";
	char dir[] = "/tmp/santa-hello-XXXXXX", sock[128];
	struct timeval tv = { .tv_sec = 5 };
	struct fake_daemon *d = fake_new(0, 5);
	uint16_t port;
	pid_t pid;
	int out, fd;

	if (!d || !mkdtemp(dir))
		return 2;
	snprintf(sock, sizeof(sock), "%s/santa.sock", dir);
	if (fake_listen(d, sock))
		return 2;
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));

	/* until SIGTERM */
	port = free_port();
	pid = start_hello(hello, sock, NULL, port, &out);
	CHECK(wait_rule(d), "hello installed no rule");
	CHECK(ask(fd, port, "ping", "APP:ping"), "no reply to ping");
	CHECK(ask(fd, port, "Hello", "APP:Hello"), "no reply to Hello");
	CHECK(ask(fd, port, "x", "APP:x"), "no reply to x");
	kill(pid, SIGTERM);
	finish(pid, out, "STATS kernel=5 app=3\n");
	CHECK(fake_rule_count(d) == 0, "hello left its rule");

	/* -t 1 */
	port = free_port();
	pid = start_hello(hello, sock, "1", port, &out);
	finish(pid, out, "STATS kernel=5 app=0\n");

	close(fd);
	fake_free(d);
	rmdir(dir);
	printf("test_hello: %s\n", failures ? "FAIL" : "ok");
	return failures ? 1 : 0;
}
