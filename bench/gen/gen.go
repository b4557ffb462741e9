// Package gen is the benchmark's load generator: an XDP program run by the
// kernel in BPF_PROG_TEST_RUN live-frames mode writes precomputed request
// frames onto a veth and transmits them with XDP_TX, with no syscall, no
// socket and no copy per request; a second XDP program on the same
// interface counts (and optionally checks) the replies and drops them.
// One core sends several million requests per second this way, so that a
// server can be driven past saturation on a two-core machine, where a
// socket client (dnsperf: about 10 µs per request) saturates first.
package gen

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel -type gen_frame -type gen_counter -type gen_counters -type gen_pace gen ../bpf/gen.bpf.c -- -I../../bpf/include
