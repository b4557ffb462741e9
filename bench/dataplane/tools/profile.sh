#!/usr/bin/env bash
# profile.sh: where santa_udp's time goes, for one rule count, reply size and
# mix. Records cpu-clock samples (the VM has no hardware PMU) with call
# graphs on the measuring CPU while dpbench runs that one cell, then
# attributes the samples inside BPF_PROG_TEST_RUN to BPF source lines and
# the helpers they call (tools/perfattr.py), scaled to the cell's median.
#
#   bench/dataplane/tools/profile.sh RULES SIZE MIX [CPU]
#   e.g. bench/dataplane/tools/profile.sh 1000000 512 uniform
#   ROUNDS=20 K=50000 bench/dataplane/tools/profile.sh 1 512 hot   (more samples)
#
# Needs root, perf, python3. Writes to a temp directory it prints.
set -euo pipefail
cd "$(dirname "$0")/../../.."
rules=${1:?rules} size=${2:?size} mix=${3:?mix} cpu=${4:-1}
out=$(mktemp -d /tmp/santa-profile.XXXXXX)
go build -o "$out/dpbench" ./bench/dataplane/cmd/dpbench
perf record -q -e cpu-clock -F 10000 -g -C "$cpu" -o "$out/perf.data" -- \
	"$out/dpbench" -rules "$rules" -sizes "$size" -mixes "$mix" -rounds "${ROUNDS:-6}" -k "${K:-20000}" -stats=false \
	-cpu "$cpu" -dump "$out/dump" >"$out/dpbench.out" 2>"$out/dpbench.err"
median=$(awk -v m="mix=$mix" '$2 ~ m && $4 == "unit=ns/pkt" {split($3, v, "="); print v[2]}' "$out/dpbench.out" | head -1)
perf script -i "$out/perf.data" -F comm,tid,ip,sym 2>/dev/null >"$out/perf.txt"
echo "# rules=$rules reply=$size mix=$mix median=${median} ns/pkt; files in $out"
python3 bench/dataplane/tools/perfattr.py "$out/perf.txt" "$out/dump" "$median"
