// responder: the userspace baseline for bench/udp-e2e. It answers the same
// DNS rules as Santa from a UDP socket it inherits (fd 3, bound by the
// orchestrator in the server namespace), with recvmmsg/sendmmsg batches:
// exact match of payload[2:] against the rule's condition in an open-address
// hash table, reply = template with the request's transaction id copied.
//
//   responder RULES_FILE CPU [BATCH]
//
// SIGUSR1 prints "received=N answered=N unmatched=N" on stdout; SIGTERM ends.
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define MAXB 256
#define BUFSZ 2048

struct rule {
	uint16_t off, clen, rlen;
	const uint8_t *cond, *reply;
};

static struct rule *rules;
static uint32_t nrules, *table, mask;
static volatile sig_atomic_t stop, report;
static unsigned long long received, answered, unmatched;

static uint64_t fnv(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

static void load(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) { perror(path); exit(1); }
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *buf = malloc(size);
	if (!buf || fread(buf, 1, size, f) != (size_t)size) { fprintf(stderr, "reading %s failed\n", path); exit(1); }
	fclose(f);
	if (size < 8 || memcmp(buf, "SNTR", 4)) { fprintf(stderr, "%s: not a rules file\n", path); exit(1); }
	memcpy(&nrules, buf + 4, 4);
	rules = calloc(nrules, sizeof(*rules));
	uint32_t cap = 1;
	while (cap < 2 * nrules) cap <<= 1;
	table = calloc(cap, sizeof(*table));
	mask = cap - 1;
	uint8_t *p = buf + 8;
	for (uint32_t i = 0; i < nrules; i++) {
		struct rule *r = &rules[i];
		memcpy(&r->off, p, 2); memcpy(&r->clen, p + 2, 2); memcpy(&r->rlen, p + 4, 2);
		r->cond = p + 8;
		r->reply = p + 8 + r->clen;
		p += 8 + r->clen + r->rlen;
		if (r->off != 2) { fprintf(stderr, "rule %u: only conditions at offset 2 are supported\n", i); exit(1); }
		uint32_t h = fnv(r->cond, r->clen) & mask;
		while (table[h]) h = (h + 1) & mask;
		table[h] = i + 1;
	}
}

static const struct rule *lookup(const uint8_t *pl, size_t len)
{
	if (len < 2) return NULL;
	const uint8_t *key = pl + 2;
	size_t klen = len - 2;
	for (uint32_t h = fnv(key, klen) & mask; table[h]; h = (h + 1) & mask) {
		const struct rule *r = &rules[table[h] - 1];
		if (r->clen == klen && !memcmp(r->cond, key, klen))
			return r;
	}
	return NULL;
}

static void on_term(int sig) { (void)sig; stop = 1; }
static void on_usr1(int sig) { (void)sig; report = 1; }

int main(int argc, char **argv)
{
	if (argc < 3) { fprintf(stderr, "usage: responder RULES_FILE CPU [BATCH]\n"); return 2; }
	int batch = argc > 3 ? atoi(argv[3]) : 64;
	if (batch < 1 || batch > MAXB) batch = 64;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(atoi(argv[2]), &set);
	if (sched_setaffinity(0, sizeof(set), &set)) { perror("sched_setaffinity"); return 1; }
	load(argv[1]);

	struct sigaction sa = {0};
	sa.sa_handler = on_term; // no SA_RESTART: recvmmsg returns EINTR
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);

	int fd = 3;
	static uint8_t in[MAXB][BUFSZ], out[MAXB][BUFSZ];
	static struct sockaddr_storage from[MAXB];
	struct mmsghdr rmsg[MAXB], smsg[MAXB];
	struct iovec riov[MAXB], siov[MAXB];
	for (int i = 0; i < batch; i++) {
		riov[i] = (struct iovec){in[i], BUFSZ};
		siov[i] = (struct iovec){out[i], 0};
	}
	fprintf(stderr, "responder: %u rules, batch %d\n", nrules, batch);
	printf("ready\n");
	fflush(stdout);
	while (!stop) {
		if (report) {
			report = 0;
			printf("received=%llu answered=%llu unmatched=%llu\n", received, answered, unmatched);
			fflush(stdout);
		}
		for (int i = 0; i < batch; i++) {
			memset(&rmsg[i].msg_hdr, 0, sizeof(rmsg[i].msg_hdr));
			rmsg[i].msg_hdr.msg_iov = &riov[i];
			rmsg[i].msg_hdr.msg_iovlen = 1;
			rmsg[i].msg_hdr.msg_name = &from[i];
			rmsg[i].msg_hdr.msg_namelen = sizeof(from[i]);
		}
		int n = recvmmsg(fd, rmsg, batch, MSG_WAITFORONE, NULL);
		if (n < 0) {
			if (errno == EINTR) continue;
			perror("recvmmsg");
			return 1;
		}
		received += n;
		int m = 0;
		for (int i = 0; i < n; i++) {
			const struct rule *r = lookup(in[i], rmsg[i].msg_len);
			if (!r) { unmatched++; continue; }
			memcpy(out[m], r->reply, r->rlen);
			out[m][0] = in[i][0];
			out[m][1] = in[i][1];
			siov[m].iov_len = r->rlen;
			memset(&smsg[m].msg_hdr, 0, sizeof(smsg[m].msg_hdr));
			smsg[m].msg_hdr.msg_iov = &siov[m];
			smsg[m].msg_hdr.msg_iovlen = 1;
			smsg[m].msg_hdr.msg_name = &from[i];
			smsg[m].msg_hdr.msg_namelen = rmsg[i].msg_hdr.msg_namelen;
			m++;
		}
		for (int done = 0; done < m;) {
			int k = sendmmsg(fd, smsg + done, m - done, 0);
			if (k < 0) {
				if (errno == EINTR) continue;
				if (errno == EAGAIN || errno == ENOBUFS) break; // dropped
				perror("sendmmsg");
				return 1;
			}
			done += k;
			answered += k;
		}
	}
	printf("received=%llu answered=%llu unmatched=%llu\n", received, answered, unmatched);
	return 0;
}
