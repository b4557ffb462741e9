package main

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	"github.com/santa-offload/santa/bench/rig"
)

// kernelCounters are the kernel's own counters of both namespaces, by
// "namespace: source name": the veths' ethtool statistics and the SNMP
// and netstat counters (what nstat reads); and each CPU's backlog drops
// (/proc/net/softnet_stat, the whole host's), where loopback's receive
// queues its packets.
type kernelCounters map[string]uint64

func readKernelCounters(r rig.Rig) kernelCounters {
	k := kernelCounters{}
	for _, side := range []struct{ ns, dev string }{{r.ServerNS(), r.ServerDev()}, {r.ClientNS(), r.ClientDev()}} {
		out, _ := exec.Command("ip", "netns", "exec", side.ns, "ethtool", "-S", side.dev).Output()
		for _, l := range strings.Split(string(out), "\n") {
			name, v, ok := strings.Cut(strings.TrimSpace(l), ":")
			if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); ok && err == nil {
				k[side.dev+": "+name] = n
			}
		}
		out, _ = exec.Command("ip", "netns", "exec", side.ns, "nstat", "-a", "-z", "-s").Output()
		for _, l := range strings.Split(string(out), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 || strings.HasPrefix(f[0], "#") {
				continue
			}
			if n, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				k[side.ns+": "+f[0]] = n
			}
		}
	}
	b, _ := os.ReadFile("/proc/net/softnet_stat")
	for cpu, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(l); len(f) > 2 {
			dropped, _ := strconv.ParseUint(f[1], 16, 64)
			k[fmt.Sprintf("cpu%d: softnet backlog dropped", cpu)] = dropped
		}
	}
	return k
}

// printDiff prints every counter that changed, but for the byte and packet
// counts every run changes.
func printDiff(before, after kernelCounters) {
	var lines []string
	for name, v := range after {
		if d := v - before[name]; d != 0 && !strings.Contains(name, "bytes") && !strings.Contains(name, "Octets") {
			lines = append(lines, fmt.Sprintf("  %s +%d", name, d))
		}
	}
	slices.Sort(lines)
	fmt.Fprintln(os.Stderr, strings.Join(lines, "\n"))
}
