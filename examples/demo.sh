#!/usr/bin/env bash
# The README's demo (make demo): santad, and the C SDK's hello (the paper's
# Listing 1) as an unprivileged server, in one network namespace; a client in
# another sends 5 × "Hello" and 5 × "Hi there" over a veth pair. hello asks
# santad to answer "Hello" with "COMSYS"; the kernel then does (XDP on the
# server's veth), and hello sees, logs and answers only "Hi there".
# Needs root; removes everything it made when it ends, however it ends.
#
#   examples/demo.sh               builds santad, santactl and hello from the tree
#   examples/demo.sh --installed   runs the installed santad and santactl (PATH),
#                                  and hello built against the installed libsanta
#                                  (pkg-config): .ci/package after installing the .debs
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
N=5
RIG=demo$$ # namespaces $RIG-srv and $RIG-cli, veth $RIG-s and $RIG-c
ADDR=10.77.0.1
PORT=7777
PINS=/sys/fs/bpf/santa-demo$$ # santad leaves the data plane pinned on exit, by design

[ "$(id -u)" = 0 ] || { echo "demo: needs root (network namespaces, BPF)" >&2; exit 1; }

tmp=$(mktemp -d)
chmod 755 "$tmp" # hello runs as nobody and needs its binary and santad's socket
santad_pid= hello_pid=
stop() { # stop PID: SIGKILL, and reap
	if [ -n "$1" ] && kill -0 "$1" 2>/dev/null; then
		kill -KILL "$1" 2>/dev/null || true
		wait "$1" 2>/dev/null || true
	fi
}
cleanup() {
	stop "$hello_pid"
	stop "$santad_pid"
	bash bench/rig.sh down "$RIG"
	rm -rf "$PINS" "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# "${SRV[@]}" CMD...: runs CMD in the server's namespace. nsenter joins the
# network namespace only (`ip netns exec` would remount /sys, and santad
# would pin through its parent's view: docs/operations.md), and execs CMD
# in place: $! of a background "${SRV[@]}" CMD is CMD itself, and signals
# reach it.
SRV=(nsenter --net="/run/netns/$RIG-srv" --)

# wait_for FILE PATTERN PID WHAT: until FILE holds PATTERN (10 s at most).
wait_for() {
	for _ in $(seq 100); do
		grep -q "$2" "$1" && return 0
		kill -0 "$3" 2>/dev/null || break
		sleep 0.1
	done
	echo "demo: $4 did not start:" >&2
	cat "$1" >&2
	exit 1
}

if [ "${1:-}" = --installed ]; then
	echo "== the installed santad, santactl and libsanta (hello linked with pkg-config's flags); building the client"
	santad=$(command -v santad) santactl=$(command -v santactl)
	# shellcheck disable=SC2046 # pkg-config's flags are words
	cc -o "$tmp/hello" sdk/c/examples/hello.c $(pkg-config --cflags --libs santa)
	# ldd's whole output first: under pipefail, grep -q leaving at the
	# first match can end ldd with SIGPIPE and fail the check (seen in CI).
	libs=$(ldd "$tmp/hello")
	grep -Eq 'libsanta.so.0 => /(usr/)?lib/' <<<"$libs" || { echo "demo: hello is not linked with the installed libsanta" >&2; exit 1; }
else
	echo "== building santad, santactl, libsanta with its hello, and the client"
	santad=$tmp/santad santactl=$tmp/santactl
	"$GO" build -o "$santad" ./cmd/santad
	"$GO" build -o "$santactl" ./cmd/santactl
	make -s -C sdk/c build/hello
	install -m 0755 sdk/c/build/hello "$tmp/hello"
fi
"$GO" build -o "$tmp/client" ./test/hello/client
ctl() { "$santactl" -socket "$tmp/santa.sock" "$@"; }

echo "== rig: netns $RIG-srv ($ADDR) <-- veth --> netns $RIG-cli (10.77.0.2)"
bash bench/rig.sh up "$RIG"

echo "== santad in $RIG-srv, on $RIG-s"
# Mode 0666: any local user may connect; each still touches only its own
# sockets' rules (docs/operations.md). A real host would use a group.
"${SRV[@]}" "$santad" -socket "$tmp/santa.sock" -socket-mode 0666 -state-dir "$tmp/state" \
	-pin-path "$PINS" -interfaces "$RIG-s" >"$tmp/santad.log" 2>&1 &
santad_pid=$!
wait_for "$tmp/santad.log" 'msg=ready' "$santad_pid" santad
sed -e 's/^time=[^ ]* //' -e 's/^/  santad | /' "$tmp/santad.log"

echo "== hello (C, libsanta) in $RIG-srv as nobody, on $ADDR:$PORT"
"${SRV[@]}" setpriv --reuid=65534 --regid=65534 --clear-groups -- \
	"$tmp/hello" -s "$tmp/santa.sock" "$ADDR" "$PORT" >"$tmp/hello.out" 2>"$tmp/hello.log" &
hello_pid=$!
wait_for "$tmp/hello.log" '^hello: serving' "$hello_pid" hello
sed 's/^/   hello | /' "$tmp/hello.log"

echo "== client in $RIG-cli: $N × \"Hello\", $N × \"Hi there\" to $ADDR:$PORT"
ip netns exec "$RIG-cli" "$tmp/client" -iface "$RIG-c" -server "$ADDR:$PORT" -n "$N" | sed 's/^/  client | /'

echo "== what santad says (santactl, as root)"
ctl services | sed 's/^/santactl | /'
service=$(ctl -json services | sed -n 's/.*"service_id": *\([0-9]*\).*/\1/p' | head -n 1)
ctl stats "$service" | sed 's/^/santactl | /'

echo "== stopping hello (SIGINT): it reads its rule's counter and detaches"
kill -INT "$hello_pid"
status=0
wait "$hello_pid" || status=$?
hello_pid=
[ "$status" = 0 ] || { echo "demo: hello failed ($status):" >&2; cat "$tmp/hello.log" >&2; exit 1; }
sed 's/^/   hello | /' "$tmp/hello.out"

kernel=$(sed -n 's/^STATS kernel=\([0-9]*\) .*/\1/p' "$tmp/hello.out")
app=$(sed -n 's/^STATS .* app=\([0-9]*\)$/\1/p' "$tmp/hello.out")
echo
echo "kernel answered ${kernel:-?}, application answered ${app:-?}"
if [ "$kernel" != "$N" ] || [ "$app" != "$N" ]; then
	echo "demo: expected $N and $N" >&2
	exit 1
fi
