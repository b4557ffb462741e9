#!/usr/bin/env bash
# rig.sh: two network namespaces joined by a veth pair, for Santa's tests,
# demo and benchmarks.
#
#   bench/rig.sh up NAME [--default-offloads] [--threaded-napi] [--server-cpu N] [--client-cpu N] [--socket-queue] [-v]
#   bench/rig.sh down NAME [-v]
#
# up creates:
#   netns NAME-srv   veth NAME-s   10.77.0.1/24  fd77::1/64   MAC 02:77:00:00:00:01
#   netns NAME-cli   veth NAME-c   10.77.0.2/24  fd77::2/64   MAC 02:77:00:00:00:02
# with permanent neighbour entries both ways (no ARP, no ND), no IPv6 DAD,
# TX checksum offload off on both ends (XDP must see full checksums), lo and
# the veth up. NAME is at most 13 characters (veth names are at most 15).
#
# --default-offloads  keeps the veth's default offloads instead: TX checksum
#                  offload on, as in every container network, so that the
#                  client's stack sends only a partial UDP checksum
#                  (CHECKSUM_PARTIAL) and XDP sees no full one.
# --threaded-napi  runs the server veth's NAPI in kthreads (napi/NAME-s-<id>)
#                  instead of the softirq of whichever CPU sent the frame.
#                  veth has NAPI only with XDP attached or GRO on, so GRO is
#                  turned on: the NAPI (and its kthread) then exists from the
#                  start and survives XDP attach/detach.
# --server-cpu N   pins the server veth's NAPI kthreads to CPU N.
# --client-cpu N   also makes the client veth's NAPI threaded (GRO on) and
#                  pins its kthreads to CPU N (where XDP_TX replies arrive).
#                  They run SCHED_FIFO there: a load generator busy on that
#                  CPU must not keep the replies waiting until the veth's
#                  ring overflows.
#                  Both CPU options need --threaded-napi: without it veth NAPI
#                  runs in the sender's softirq and there is nothing to pin.
# --socket-queue   gives each veth a second queue (a ring and a NAPI kthread
#                  of its own, on the same CPU) and steers the client's
#                  socket traffic (TCP, socket clients), sent from any CPU,
#                  into the server's queue that the XDP generator on the
#                  client CPU does not use (veth puts an XDP_TX frame in
#                  the peer's queue <sending CPU> % queues),
#                  as a NIC's RSS spreads flows over its rings. With one
#                  queue, the generator's flood fills the server's 256-frame
#                  ring whenever its NAPI kthread waits behind a task, and
#                  the TCP segments dropped with the flood stall their
#                  connection for a retransmission timeout. Needs
#                  --client-cpu.
#
# down removes both namespaces and everything in them; it is idempotent and
# cleans up after a failed up. Nothing is printed but errors unless -v.
set -euo pipefail

SRV_IP4=10.77.0.1 CLI_IP4=10.77.0.2
SRV_IP6=fd77::1 CLI_IP6=fd77::2
SRV_MAC=02:77:00:00:00:01 CLI_MAC=02:77:00:00:00:02

usage() {
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2
	exit 2
}

verbose=0
say() { if [ "$verbose" = 1 ]; then echo "rig: $*"; fi; }
die() { echo "rig: $*" >&2; exit 1; }
# run CMD...: runs a command, showing it and its output only with -v.
run() {
	if [ "$verbose" = 1 ]; then
		echo "+ $*"
		"$@"
	else
		"$@" >/dev/null
	fi
}

# napi_threads DEV: pids of kthreads that may be DEV's threaded NAPI. They
# are named "napi/DEV-<napi id>"; ps and older kernels' /proc/PID/comm cut
# that to 15 characters, so a long DEV may also match other devices' threads:
# threaded() takes only the threads that are new.
napi_threads() {
	local prefix="napi/$1-" pid comm
	prefix=${prefix:0:15}
	for pid in $(pgrep '^napi/' || true); do
		comm=$(cat "/proc/$pid/comm" 2>/dev/null) || continue
		if [ "${comm:0:${#prefix}}" = "$prefix" ]; then echo "$pid"; fi
	done | sort
}

# threaded NETNS DEV CPU [FIFO]: threaded NAPI on DEV, its kthreads pinned
# to CPU, and real-time (SCHED_FIFO) if FIFO is given.
threaded() {
	local ns=$1 dev=$2 cpu=$3 fifo=${4:-} before pids pid
	# veth creates its NAPI only with XDP or GRO on. With GRO it exists
	# from now on: XDP attach/detach no longer replaces it (and its thread).
	run ip netns exec "$ns" ethtool -K "$dev" gro on
	before=$(napi_threads "$dev")
	# Creates the kthreads before it returns.
	ip netns exec "$ns" sh -c "echo 1 > /sys/class/net/$dev/threaded" ||
		die "cannot enable threaded NAPI on $dev"
	[ -z "$cpu" ] && return 0
	pids=$(comm -13 <(echo "$before") <(napi_threads "$dev"))
	[ -n "$pids" ] || die "no napi/$dev-* kthread appeared after enabling threaded NAPI"
	for pid in $pids; do
		run taskset -p -c "$cpu" "$pid"
		if [ -n "$fifo" ]; then run chrt -f -p 50 "$pid"; fi
		say "napi kthread $pid ($(cat "/proc/$pid/comm")) pinned to CPU $cpu"
	done
}

# cpu_mask_all: the hex mask of every CPU this machine may have, in the
# comma-separated 32-bit groups the kernel's bitmap parser takes.
cpu_mask_all() {
	local n mask= k
	n=$(nproc --all)
	while [ "$n" -gt 0 ]; do
		k=$((n < 32 ? n : 32))
		mask=$(printf '%x' $(((1 << k) - 1)))${mask:+,$mask}
		n=$((n - k))
	done
	echo "$mask"
}

# steer_sockets NETNS DEV CPU: DEV's socket traffic leaves by the transmit
# queue (and so reaches the peer's receive queue) that XDP_TX from CPU does
# not: XPS maps every CPU to that queue alone. Every CPU, not CPU alone: TCP
# also sends from other CPUs (segments the TCP small-queues limit held back
# go out when the peer's NAPI frees the ones before them, on the server
# CPU), and a CPU without a map would hash the flow onto either queue.
steer_sockets() {
	local ns=$1 dev=$2 cpu=$3 xdp_queue
	xdp_queue=$((cpu % 2))
	ip netns exec "$ns" sh -c "echo 0 > /sys/class/net/$dev/queues/tx-$xdp_queue/xps_cpus &&
		echo $(cpu_mask_all) > /sys/class/net/$dev/queues/tx-$((1 - xdp_queue))/xps_cpus" ||
		die "cannot steer $dev's socket traffic away from CPU $cpu's XDP_TX queue"
}

up() {
	local name=$1 srv=$1-srv cli=$1-cli s=$1-s c=$1-c
	run ip netns add "$srv"
	run ip netns add "$cli"
	run ip link add "$s" netns "$srv" address "$SRV_MAC" type veth peer name "$c" netns "$cli" address "$CLI_MAC"
	local ns dev mac ip4 ip6 peer_mac peer4 peer6
	for side in srv cli; do
		if [ $side = srv ]; then
			ns=$srv dev=$s ip4=$SRV_IP4 ip6=$SRV_IP6 peer_mac=$CLI_MAC peer4=$CLI_IP4 peer6=$CLI_IP6
		else
			ns=$cli dev=$c ip4=$CLI_IP4 ip6=$CLI_IP6 peer_mac=$SRV_MAC peer4=$SRV_IP4 peer6=$SRV_IP6
		fi
		run ip -n "$ns" link set lo up
		run ip -n "$ns" addr add "$ip4/24" dev "$dev"
		run ip -n "$ns" addr add "$ip6/64" dev "$dev" nodad
		if [ "$default_offloads" = 0 ]; then run ip netns exec "$ns" ethtool -K "$dev" tx off; fi
		run ip -n "$ns" link set "$dev" up
		run ip -n "$ns" neigh replace "$peer4" lladdr "$peer_mac" dev "$dev" nud permanent
		run ip -n "$ns" neigh replace "$peer6" lladdr "$peer_mac" dev "$dev" nud permanent
	done
	if [ "$socket_queue" = 1 ]; then # before the NAPI threads are made and pinned
		run ip netns exec "$srv" ethtool -L "$s" rx 2 tx 2
		run ip netns exec "$cli" ethtool -L "$c" rx 2 tx 2
	fi
	if [ "$threaded_napi" = 1 ]; then
		threaded "$srv" "$s" "$server_cpu"
		if [ -n "$client_cpu" ]; then threaded "$cli" "$c" "$client_cpu" fifo; fi
	fi
	if [ "$socket_queue" = 1 ]; then steer_sockets "$cli" "$c" "$client_cpu"; fi
	say "rig $name up: $srv/$s $SRV_IP4 $SRV_IP6 <-> $cli/$c $CLI_IP4 $CLI_IP6"
}

down() {
	local name=$1 ns
	# Deleting the veth first takes both ends down even if some process
	# still holds a namespace open; then the names go.
	ip -n "$name-srv" link del "$name-s" 2>/dev/null || true
	ip -n "$name-cli" link del "$name-c" 2>/dev/null || true
	ip link del "$name-s" 2>/dev/null || true
	ip link del "$name-c" 2>/dev/null || true
	for ns in "$name-srv" "$name-cli"; do
		if [ -e "/run/netns/$ns" ]; then run ip netns del "$ns"; fi
	done
	say "rig $name down"
}

[ $# -ge 2 ] || usage
cmd=$1 name=$2
shift 2
threaded_napi=0 default_offloads=0 socket_queue=0 server_cpu= client_cpu=
while [ $# -gt 0 ]; do
	case $1 in
	--default-offloads) default_offloads=1 ;;
	--threaded-napi) threaded_napi=1 ;;
	--server-cpu) server_cpu=${2:?--server-cpu needs a CPU number}; shift ;;
	--client-cpu) client_cpu=${2:?--client-cpu needs a CPU number}; shift ;;
	--socket-queue) socket_queue=1 ;;
	-v) verbose=1 ;;
	*) usage ;;
	esac
	shift
done
case $name in
'' | -* | *[!A-Za-z0-9_.-]*) die "bad NAME '$name'" ;;
esac
[ ${#name} -le 13 ] || die "NAME '$name' is too long: veth $name-s would exceed 15 characters"
if [ "$threaded_napi" = 0 ] && [ -n "$server_cpu$client_cpu" ]; then
	die "--server-cpu and --client-cpu need --threaded-napi"
fi
if [ "$socket_queue" = 1 ] && [ -z "$client_cpu" ]; then
	die "--socket-queue needs --client-cpu"
fi
for cpu in $server_cpu $client_cpu; do
	[ -d "/sys/devices/system/cpu/cpu$cpu" ] || die "no CPU $cpu"
done

case $cmd in
up)
	if [ -e "/run/netns/$name-srv" ] || [ -e "/run/netns/$name-cli" ]; then
		die "rig $name exists already: run '$0 down $name' first"
	fi
	# Whatever fails on the way up, nothing of the rig stays behind.
	trap 'if [ $? -ne 0 ]; then echo "rig: up failed, removing rig $name" >&2; down "$name"; fi' EXIT
	up "$name"
	trap - EXIT
	;;
down) down "$name" ;;
*) usage ;;
esac
