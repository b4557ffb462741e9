// client: the load generator of bench/udp-e2e, run in the client namespace.
// It sends DNS queries (payloads from a requests file, transaction id =
// sequence number) with sendmmsg as fast as it can while at most WINDOW are
// unanswered (with the window full it sleeps in poll, so that the client
// veth's NAPI thread on the same CPU can deliver replies), drains replies
// with non-blocking recvmmsg, and stops after
// DURATION_MS or MAX packets, whichever comes first, then drains for up to
// 100 ms more. /proc/stat is read at the start and the end of that window.
//
//   client DST_IP PORT REQUESTS_FILE REPLY_LEN CPU DURATION_MS MAX [BATCH] [WINDOW]
//
// Prints one line of key=value pairs: sent, replies (any), good (replies of
// REPLY_LEN bytes whose id is one we sent), send_ns (first to last send),
// window_ns (whole window), stalls (10 ms without a reply with a full
// window: the outstanding requests are then counted lost), and per CPU cpuN_busy / cpuN_total in USER_HZ
// ticks (busy = user+nice+system+irq+softirq), plus hz.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define MAXB 256
#define MAXCPU 64

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static int read_stat(unsigned long long busy[MAXCPU], unsigned long long total[MAXCPU])
{
	FILE *f = fopen("/proc/stat", "r");
	char line[512];
	int n = 0;
	if (!f) return 0;
	while (fgets(line, sizeof(line), f)) {
		int cpu;
		unsigned long long v[10] = {0};
		if (strncmp(line, "cpu", 3) || line[3] < '0' || line[3] > '9') continue;
		if (sscanf(line, "cpu%d %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &cpu,
			   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]) < 8)
			continue;
		if (cpu < 0 || cpu >= MAXCPU) continue;
		// user nice system idle iowait irq softirq steal (guest is in user)
		busy[cpu] = v[0] + v[1] + v[2] + v[5] + v[6];
		total[cpu] = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
		if (cpu + 1 > n) n = cpu + 1;
	}
	fclose(f);
	return n;
}

// Takes what replies are waiting, without blocking, and counts them: good
// ones have the expected length and the DNS response bit (QR) set.
static int receive(int fd, struct mmsghdr *rmsg, uint8_t in[][2048], size_t reply_len,
		   uint64_t *replies, uint64_t *good)
{
	int n = recvmmsg(fd, rmsg, MAXB, MSG_DONTWAIT, NULL);

	for (int i = 0; i < n; i++)
		if (rmsg[i].msg_len == reply_len && (in[i][2] & 0x80))
			(*good)++;
	if (n > 0)
		*replies += n;
	return n;
}

int main(int argc, char **argv)
{
	if (argc < 8) {
		fprintf(stderr, "usage: client DST_IP PORT REQUESTS_FILE REPLY_LEN CPU DURATION_MS MAX [BATCH] [WINDOW]\n");
		return 2;
	}
	const char *dst = argv[1];
	int port = atoi(argv[2]);
	size_t reply_len = strtoul(argv[4], NULL, 10);
	int cpu = atoi(argv[5]);
	uint64_t duration = strtoull(argv[6], NULL, 10) * 1000000ull;
	uint64_t max = strtoull(argv[7], NULL, 10);
	int batch = argc > 8 ? atoi(argv[8]) : 32;
	uint64_t window = argc > 9 ? strtoull(argv[9], NULL, 10) : 1024;
	if (batch < 1 || batch > MAXB) batch = 32;

	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) { perror("sched_setaffinity"); return 1; }

	// Requests: "SNTQ", u32 count, then u16 length + payload each.
	FILE *f = fopen(argv[3], "rb");
	if (!f) { perror(argv[3]); return 1; }
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *buf = malloc(size);
	if (!buf || fread(buf, 1, size, f) != (size_t)size || size < 8 || memcmp(buf, "SNTQ", 4)) {
		fprintf(stderr, "%s: not a requests file\n", argv[3]);
		return 1;
	}
	fclose(f);
	uint32_t nreq;
	memcpy(&nreq, buf + 4, 4);
	uint8_t **req = calloc(nreq, sizeof(*req));
	uint16_t *rlen = calloc(nreq, sizeof(*rlen));
	uint8_t *p = buf + 8;
	for (uint32_t i = 0; i < nreq; i++) {
		memcpy(&rlen[i], p, 2);
		req[i] = p + 2;
		p += 2 + rlen[i];
	}

	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	int big = 32 << 20;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
	setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big));
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	if (inet_pton(AF_INET, dst, &sa.sin_addr) != 1) { fprintf(stderr, "bad address %s\n", dst); return 1; }
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) { perror("connect"); return 1; }

	static uint8_t out[MAXB][2048], in[MAXB][2048];
	struct mmsghdr smsg[MAXB], rmsg[MAXB];
	struct iovec siov[MAXB], riov[MAXB];
	memset(smsg, 0, sizeof(smsg));
	memset(rmsg, 0, sizeof(rmsg));
	for (int i = 0; i < MAXB; i++) {
		siov[i] = (struct iovec){out[i], 0};
		smsg[i].msg_hdr.msg_iov = &siov[i];
		smsg[i].msg_hdr.msg_iovlen = 1;
		riov[i] = (struct iovec){in[i], sizeof(in[i])};
		rmsg[i].msg_hdr.msg_iov = &riov[i];
		rmsg[i].msg_hdr.msg_iovlen = 1;
	}

	unsigned long long b0[MAXCPU] = {0}, t0c[MAXCPU] = {0}, b1[MAXCPU] = {0}, t1c[MAXCPU] = {0};
	uint64_t sent = 0, replies = 0, good = 0, lost = 0, stalls = 0, next = 0;
	int ncpu = read_stat(b0, t0c);
	uint64_t t0 = now_ns(), deadline = t0 + duration, last_progress = t0, t_send_end;

	for (;;) {
		uint64_t now = now_ns();
		if (now >= deadline || sent >= max) break;
		uint64_t inflight = sent > replies + lost ? sent - replies - lost : 0;
		if (inflight + batch <= window) {
			int k = batch;
			if (sent + k > max) k = max - sent;
			for (int i = 0; i < k; i++) {
				uint32_t r = (next++) % nreq;
				uint16_t id = (uint16_t)(sent + i);
				memcpy(out[i], req[r], rlen[r]);
				out[i][0] = id >> 8;
				out[i][1] = id;
				siov[i].iov_len = rlen[r];
			}
			int s = sendmmsg(fd, smsg, k, 0);
			if (s < 0) {
				if (errno != EAGAIN && errno != ENOBUFS && errno != EINTR) { perror("sendmmsg"); return 1; }
			} else {
				sent += s;
			}
		} else {
			// Window full: sleep until a reply comes, so that the client
			// veth's NAPI thread (on this CPU too) gets to deliver it.
			struct pollfd pfd = {.fd = fd, .events = POLLIN};
			if (poll(&pfd, 1, 1) == 0 && now_ns() - last_progress > 10000000) {
				// Nothing for 10 ms with a full window: count the
				// outstanding requests as lost and go on.
				lost += inflight;
				stalls++;
				last_progress = now_ns();
			}
		}
		for (;;) {
			if (receive(fd, rmsg, in, reply_len, &replies, &good) <= 0) break;
			last_progress = now_ns();
		}
	}
	t_send_end = now_ns();
	// Drain: until 100 ms pass without a reply.
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		if (poll(&pfd, 1, 100) <= 0) break;
		receive(fd, rmsg, in, reply_len, &replies, &good);
	}
	uint64_t t_end = now_ns();
	read_stat(b1, t1c);
	printf("sent=%llu replies=%llu good=%llu stalls=%llu send_ns=%llu window_ns=%llu hz=%ld",
	       (unsigned long long)sent, (unsigned long long)replies, (unsigned long long)good,
	       (unsigned long long)stalls, (unsigned long long)(t_send_end - t0),
	       (unsigned long long)(t_end - t0), sysconf(_SC_CLK_TCK));
	for (int c = 0; c < ncpu; c++)
		printf(" cpu%d_busy=%llu cpu%d_total=%llu", c, b1[c] - b0[c], c, t1c[c] - t0c[c]);
	printf("\n");
	return 0;
}
