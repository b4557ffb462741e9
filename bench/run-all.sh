#!/usr/bin/env bash
# run-all.sh: Santa's benchmarks. Prints the machine, the settings and every
# RESULT line on stdout (progress goes to stderr). Needs root; `make bench`
# builds first and turns the output into docs/benchmarks.md (bench/report).
#
#   (a) bench/dataplane/cmd/dpbench: XDP ns/packet through BPF_PROG_TEST_RUN,
#       rule sets x reply sizes x request mixes, interleaved over rounds.
#       bench/memlat: what one random access to a BPF array costs here.
#   (b) bench/udp-e2e: Santa vs a userspace recvmmsg/sendmmsg responder in
#       the two-namespace veth rig (bench/rig.sh), interleaved A B A B,
#       with the C client and with the XDP generator.
#   (c) bench/daemon: a real santad: 1M rules installed in one transaction,
#       and how soon a single REPLACE_RULES is answered by the kernel.
#   (d) bench/genrate: the XDP load generator's own rate in the rig.
#   (e) bench/dns: BIND, Knot and NSD alone and with Santa answering the
#       top-N names on their own sockets; dnsperf against each alone; what
#       counting the passed queries (learning, issue 22) costs each. Then
#       BIND with 1M names: the top-N sweep up to 1M and Santa answering
#       every request from 1 to 1M rules (the paper's Figure 4).
#   (f) bench/memcached: memcached UDP GETs alone and with Santa answering
#       the top-N keys (the paper's Figure 7b).
#   (g) bench/http: nginx with and without sendfile, against wrk, by reply
#       size (the baseline of the paper's Figure 8).
#   (h) bench/dns -agent: the offload agent (santa-offload dns, issue 22)
#       choosing the rules for BIND, Knot and NSD, against the oracle's
#       top N, Zipf over 10k and 1M names; its first seconds; dnsperf in
#       every configuration; Knot's own XDP mode (knot-xdp). Not part of
#       a plain run: BENCH_ONLY=h.
#   (i) bench/defaultveth: BIND and memcached alone and with Santa, for
#       local clients (a veth with its default offloads; loopback), against
#       a closed-loop socket client, with the client's checksums full and
#       partial (a local client's), interleaved; one query per syscall,
#       then sendmmsg/recvmmsg batches of up to 64 (about 13 minutes).
#   (j) bench/memcached -agent: santa-offload memcached choosing the keys
#       (guarded rules) against the oracle's top N and memcached alone,
#       GETs only and a 95/5 GET/SET mix, the XDP generator and a socket
#       client with full checksums; the write path's added cost per SET;
#       then bench/mccheck -agent, 10^6 operations checked for staleness
#       (issue 23; the agent converges 90 s from no rules before each
#       measurement; about 40 minutes).
#
# Environment:
#   BENCH_QUICK=1     skip the 1M-rule and 1M-name sets, shorten (b) and
#                     use fewer memcached keys
#   BENCH_ONLY=LIST   run only these parts, e.g. e or d,e,f,g
#   DP_RULES, DP_SIZES, DP_ROUNDS, DP_K            override (a)
#   E2E_RULES, E2E_SIZES, E2E_ROUNDS, E2E_DURATION override (b)
#   DAEMON_RULES, DAEMON_UPDATES, DAEMON_ROUNDS    override (c)
#   DNS_SERVERS, DNS_NAMES, DNS_ROUNDS             override (e)
#   MC_KEYS, MC_OFFLOAD, MC_ROUNDS                 override (f)
#   HTTP_SIZES, HTTP_ROUNDS, HTTP_DURATION         override (g)
#   AGENT_SERVERS, AGENT_NAMES, AGENT_ROUNDS, AGENT_CONVERGE, AGENT_DNSPERF
#                                                  override (h)
#   VETH_SERVERS, VETH_ROUNDS, VETH_DURATION       override (i)
#   MCJ_KEYS, MCJ_LEVELS, MCJ_ROUNDS, MCJ_CONVERGE, MCJ_AGENT_FLAGS
#                                                  override (j)
#   SERVER_CPU (1), CLIENT_CPU (0)
set -euo pipefail

cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "run-all.sh: needs root" >&2; exit 1; }

quick=${BENCH_QUICK:-0}
only=${BENCH_ONLY:-}
server_cpu=${SERVER_CPU:-1}
client_cpu=${CLIENT_CPU:-0}
rig=santab

if [ "$quick" = 1 ]; then
	dp_rules=${DP_RULES:-1,10000,100000}
	e2e_sizes=${E2E_SIZES:-64,512}
	e2e_duration=${E2E_DURATION:-1s}
	mc_keys=${MC_KEYS:-100000}
	mc_offload=${MC_OFFLOAD:-0,1000,10000,all}
else
	dp_rules=${DP_RULES:-1,10000,100000,1000000}
	e2e_sizes=${E2E_SIZES:-64,512,1400}
	e2e_duration=${E2E_DURATION:-2s}
	mc_keys=${MC_KEYS:-1000000}
	mc_offload=${MC_OFFLOAD:-0,10000,100000,all}
fi
dp_sizes=${DP_SIZES:-64,512,1400}
dp_rounds=${DP_ROUNDS:-7}
dp_k=${DP_K:-5000}
e2e_rules=${E2E_RULES:-100000}
e2e_rounds=${E2E_ROUNDS:-3}
daemon_rules=${DAEMON_RULES:-1000000}
daemon_updates=${DAEMON_UPDATES:-200}
daemon_rounds=${DAEMON_ROUNDS:-3}
dns_servers=${DNS_SERVERS:-bind,knot,nsd}
dns_names=${DNS_NAMES:-1000}
dns_rounds=${DNS_ROUNDS:-3}
mc_rounds=${MC_ROUNDS:-3}
http_sizes=${HTTP_SIZES:-64,500,1000,2000,5000}
http_rounds=${HTTP_ROUNDS:-3}
http_duration=${HTTP_DURATION:-5s}
agent_servers=${AGENT_SERVERS:-bind,knot,nsd,knot-xdp}
if [ "$quick" = 1 ]; then agent_names=${AGENT_NAMES:-10000}; else agent_names=${AGENT_NAMES:-10000,1000000}; fi
agent_rounds=${AGENT_ROUNDS:-3}
agent_converge=${AGENT_CONVERGE:-20s}
agent_dnsperf=${AGENT_DNSPERF:-5s}
veth_servers=${VETH_SERVERS:-bind,memcached}
veth_rounds=${VETH_ROUNDS:-5}
veth_duration=${VETH_DURATION:-4s}
if [ "$quick" = 1 ]; then mcj_keys=${MCJ_KEYS:-100000}; else mcj_keys=${MCJ_KEYS:-1000000}; fi
mcj_levels=${MCJ_LEVELS:-10000,100000}
mcj_rounds=${MCJ_ROUNDS:-3}
mcj_converge=${MCJ_CONVERGE:-90s}
mcj_agent_flags=${MCJ_AGENT_FLAGS:--hot-max 10000}

# bounded LIMIT CMD...: CMD under timeout LIMIT (killed 30 s after the
# TERM if a wait of its own outlasts it). Its command line goes to
# stdout as a header line, so the report shows exactly what ran (the
# programs are go build ./bench/NAME; dpbench is ./bench/dataplane/cmd/dpbench).
bounded() {
	local limit=$1
	shift
	echo "# ran: ${*//$bin\//}"
	timeout -k 30s "$limit" "$@"
}

# part X: is part X to run? (h only when asked for)
part() { if [ -z "$only" ]; then [ "$1" != h ]; else [[ ",$only," == *",$1,"* ]]; fi; }

bin=$(mktemp -d /tmp/santa-bench.XXXXXX)
cleanup() {
	bash bench/rig.sh down "$rig" 2>/dev/null || true
	rm -rf "$bin"
}
trap cleanup EXIT

go build -o "$bin/dpbench" ./bench/dataplane/cmd/dpbench
go build -o "$bin/memlat" ./bench/memlat
go build -o "$bin/udp-e2e" ./bench/udp-e2e
go build -o "$bin/daemon" ./bench/daemon
go build -o "$bin/genrate" ./bench/genrate
go build -o "$bin/dns" ./bench/dns
go build -o "$bin/memcached" ./bench/memcached
go build -o "$bin/http" ./bench/http
go build -o "$bin/defaultveth" ./bench/defaultveth
go build -o "$bin/mccheck" ./bench/mccheck

start=$(date +%s)
{
	echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(uname -r) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
	echo "# commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
	echo "# command: BENCH_QUICK=$quick BENCH_ONLY=$only bash bench/run-all.sh"
	echo "# quick=$quick dp_rules=$dp_rules dp_sizes=$dp_sizes dp_rounds=$dp_rounds dp_k=$dp_k e2e_rules=$e2e_rules e2e_sizes=$e2e_sizes e2e_rounds=$e2e_rounds e2e_duration=$e2e_duration dns_servers=$dns_servers dns_names=$dns_names dns_rounds=$dns_rounds mc_keys=$mc_keys mc_offload=$mc_offload mc_rounds=$mc_rounds http_sizes=$http_sizes http_rounds=$http_rounds http_duration=$http_duration agent_servers=$agent_servers agent_names=$agent_names agent_rounds=$agent_rounds agent_converge=$agent_converge agent_dnsperf=$agent_dnsperf veth_servers=$veth_servers veth_rounds=$veth_rounds veth_duration=$veth_duration mcj_keys=$mcj_keys mcj_levels=$mcj_levels mcj_rounds=$mcj_rounds mcj_converge=$mcj_converge mcj_agent_flags=$mcj_agent_flags"
} | tee /dev/stderr

if part a; then
	echo "== (a) data plane through BPF_PROG_TEST_RUN" >&2
	bounded 20m "$bin/dpbench" -rules "$dp_rules" -sizes "$dp_sizes" -rounds "$dp_rounds" -k "$dp_k" \
		-cpu "$server_cpu"
	# The machine's cost of a random access, the floor under (a) at 1M rules.
	bounded 5m taskset -c "$server_cpu" "$bin/memlat"
fi

if part b; then
	echo "== (b) end to end in the veth rig" >&2
	bash bench/rig.sh down "$rig" 2>/dev/null || true
	bounded 15m taskset -c "$client_cpu" "$bin/udp-e2e" -rig "$rig" -rules "$e2e_rules" -sizes "$e2e_sizes" \
		-rounds "$e2e_rounds" -duration "$e2e_duration" -server-cpu "$server_cpu" -client-cpu "$client_cpu"
	# The C client never saturates Santa's side: the XDP generator does,
	# and 100 k/s is about the responder's best load.
	bounded 15m taskset -c "$client_cpu" "$bin/udp-e2e" -rig "$rig" -client xdp -rates 100000,0 \
		-rules "$e2e_rules" -sizes 64,512 -rounds "$e2e_rounds" -duration "$e2e_duration" \
		-server-cpu "$server_cpu" -client-cpu "$client_cpu"
fi

if part c; then
	echo "== (c) santad: install and update visibility" >&2
	for round in $(seq "$daemon_rounds"); do
		echo "# round $round of $daemon_rounds" >&2
		bounded 10m "$bin/daemon" -rules "$daemon_rules" -updates "$daemon_updates"
	done
fi

if part d; then
	echo "== (d) the load generator" >&2
	bash bench/rig.sh down "$rig" 2>/dev/null || true
	for rate in 0 1000000 3000000; do
		bounded 5m "$bin/genrate" -rig "$rig" -rate "$rate" -server-cpu "$server_cpu" -client-cpu "$client_cpu"
	done
fi

if part e; then
	echo "== (e) DNS servers, alone and with Santa" >&2
	bash bench/rig.sh down "$rig" 2>/dev/null || true
	bounded 30m "$bin/dns" -rig "$rig" -servers "$dns_servers" -names "$dns_names" -rounds "$dns_rounds" \
		-learn-cost -server-cpu "$server_cpu" -client-cpu "$client_cpu"
	if [ "$quick" != 1 ]; then
		bounded 30m "$bin/dns" -rig "$rig" -servers bind -names 1000000 -popularity zipf:1 \
			-offload 0,100,1000,10000,100000,all -rates 100000,0 -rule-counts 1,100,10000,100000,1000000 \
			-dnsperf 0 -rounds "$dns_rounds" -server-cpu "$server_cpu" -client-cpu "$client_cpu"
	fi
fi

if part f; then
	echo "== (f) memcached, alone and with Santa" >&2
	bash bench/rig.sh down "$rig" 2>/dev/null || true
	bounded 30m "$bin/memcached" -rig "$rig" -keys "$mc_keys" -offload "$mc_offload" -rounds "$mc_rounds" \
		-server-cpu "$server_cpu" -client-cpu "$client_cpu"
fi

if part g; then
	echo "== (g) nginx and wrk" >&2
	bash bench/rig.sh down "$rig" 2>/dev/null || true
	bounded 30m "$bin/http" -rig "$rig" -sizes "$http_sizes" -rounds "$http_rounds" -duration "$http_duration" \
		-server-cpu "$server_cpu" -client-cpu "$client_cpu"
fi

if part h; then
	echo "== (h) DNS with the offload agent" >&2
	for names in ${agent_names//,/ }; do
		# The oracle's and the agent's top-N levels: 100 up to every name.
		levels=100,1000,all
		if [ "$names" -gt 100000 ]; then levels=100,1000,10000,100000,all; fi
		bash bench/rig.sh down "$rig" 2>/dev/null || true
		bounded 150m "$bin/dns" -rig "$rig" -servers "$agent_servers" -names "$names" -popularity zipf:1 \
			-offload "0,$levels" -agent "$levels" -rates 100000,200000,0 -rounds "$agent_rounds" \
			-agent-converge "$agent_converge" -dnsperf "$agent_dnsperf" \
			-server-cpu "$server_cpu" -client-cpu "$client_cpu"
	done
fi

if part i; then
	echo "== (i) local clients: a veth with its default offloads, and loopback" >&2
	# One query per syscall, then the issue's client shape: sendmmsg and
	# recvmmsg, up to 64 a call.
	for batch in 1 64; do
		for srv in ${veth_servers//,/ }; do
			bash bench/rig.sh down "$rig" 2>/dev/null || true
			bounded 30m "$bin/defaultveth" -rig "$rig" -server "$srv" -rounds "$veth_rounds" -duration "$veth_duration" \
				-batch "$batch" -server-cpu "$server_cpu" -client-cpu "$client_cpu"
		done
	done
fi

if part j; then
	echo "== (j) memcached with the offload agent" >&2
	# GETs only, with the cost per SET; then 5 % SETs over TCP.
	for share in 0 0.05; do
		setcost=0
		if [ "$share" = 0 ]; then setcost=2s; fi
		bash bench/rig.sh down "$rig" 2>/dev/null || true
		bounded 30m "$bin/memcached" -rig "$rig" -keys "$mcj_keys" -popularity zipf:1 -offload "0,$mcj_levels" \
			-agent "$mcj_levels" -rates 0 -rounds "$mcj_rounds" -agent-converge "$mcj_converge" \
			-agent-flags "$mcj_agent_flags" -client 2s -set-share "$share" -set-cost "$setcost" \
			-server-cpu "$server_cpu" -client-cpu "$client_cpu"
	done
	bounded 3m "$bin/mccheck" -agent -ops 1000000 -keys 1024 -write-pause 20ms
fi

echo "# run-all took $(($(date +%s) - start)) s" >&2
