#!/usr/bin/env bash
# The README's demo (make demo). hello, the paper's Listing 1, serves UDP in
# one network namespace; a client in another sends 5 × "Hello" and
# 5 × "Hi there" over a veth pair. The kernel answers "Hello" by itself (XDP
# on the server's veth): hello sees, logs and answers only "Hi there".
# Needs root; removes everything it made when it ends, however it ends.
set -euo pipefail
cd "$(dirname "$0")/../.."

GO=${GO:-go}
N=5
RIG=hello$$ # namespaces $RIG-srv and $RIG-cli, veth $RIG-s and $RIG-c
SERVER=10.77.0.1:7777

[ "$(id -u)" = 0 ] || { echo "demo: needs root (network namespaces, BPF)" >&2; exit 1; }

tmp=$(mktemp -d)
hello_pid=
cleanup() {
	if [ -n "$hello_pid" ] && kill -0 "$hello_pid" 2>/dev/null; then
		kill -KILL "$hello_pid" 2>/dev/null || true
		wait "$hello_pid" 2>/dev/null || true
	fi
	bash bench/rig.sh down "$RIG"
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# alive PID: true while the process runs.
alive() { kill -0 "$1" 2>/dev/null; }

echo "== building hello and its client"
"$GO" build -o "$tmp/hello" ./examples/hello
"$GO" build -o "$tmp/client" ./examples/hello/client

echo "== rig: netns $RIG-srv (10.77.0.1, fd77::1) <-- veth --> netns $RIG-cli (10.77.0.2, fd77::2)"
bash bench/rig.sh up "$RIG"

echo "== hello in $RIG-srv, on $RIG-s"
ip netns exec "$RIG-srv" "$tmp/hello" -iface "$RIG-s" >"$tmp/hello.log" 2>&1 &
hello_pid=$! # ip netns exec execs hello in place: this is hello
for _ in $(seq 100); do # up to 10 s
	grep -q '^ready ' "$tmp/hello.log" && break
	alive "$hello_pid" || break
	sleep 0.1
done
if ! grep -q '^ready ' "$tmp/hello.log"; then
	echo "demo: hello did not become ready:" >&2
	cat "$tmp/hello.log" >&2
	exit 1
fi
sed 's/^/   hello | /' "$tmp/hello.log"

echo "== client in $RIG-cli: $N × \"Hello\", $N × \"Hi there\" to $SERVER"
ip netns exec "$RIG-cli" "$tmp/client" -iface "$RIG-c" -server "$SERVER" -n "$N" | sed 's/^/  client | /'

echo "== stopping hello (SIGINT)"
kill -INT "$hello_pid"
for _ in $(seq 100); do # up to 10 s
	alive "$hello_pid" || break
	sleep 0.1
done
if alive "$hello_pid"; then
	echo "demo: hello did not stop" >&2
	exit 1
fi
wait "$hello_pid" || { echo "demo: hello failed:" >&2; cat "$tmp/hello.log" >&2; exit 1; }
hello_pid=
echo "hello's whole output: it logged only the requests it answered itself"
sed 's/^/   hello | /' "$tmp/hello.log"

stats=$(grep '^STATS ' "$tmp/hello.log")
kernel=$(sed -n 's/.* kernel_answered=\([0-9]*\).*/\1/p' <<<"$stats")
app=$(sed -n 's/.* app_answered=\([0-9]*\).*/\1/p' <<<"$stats")
echo
echo "kernel answered $kernel, application answered $app"
