package main

import (
	"fmt"
	"os/exec"
	"strings"
)

// steerLoopback sends the receive work of ns's loopback to cpu with RPS.
// Loopback has no NAPI thread to pin or to measure: what it sends is
// received in the softirq of the sending CPU, in whichever task is current
// there (the client, for a request; the kernel accounts softirq time to
// that task, CONFIG_IRQ_TIME_ACCOUNTING being off here). With RPS, a
// request's receive (generic XDP, TC, Santa's answer, the stack up to the
// server's socket) and a reply's receive (up to the client's socket) run
// in the server CPU's softirq, which /proc/stat samples at every tick
// (rig.SoftirqNS): the server side's cost, as the server veth's NAPI
// thread is on veth. Every cell puts the replies' receive there too, so
// cells compare like with like; other work's softirqs on that CPU (timers,
// other namespaces' traffic) are noise counted in every cell.
func steerLoopback(ns string, cpu int) error {
	const queue = "/sys/class/net/lo/queues/rx-0/rps_cpus"
	mask := fmt.Sprintf("%x", 1<<cpu)
	// ip netns exec mounts the namespace's own /sys.
	out, err := exec.Command("ip", "netns", "exec", ns, "sh", "-c", fmt.Sprintf("echo %s > %s && cat %s", mask, queue, queue)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("RPS on lo in %s: %v\n%s", ns, err, out)
	}
	if got := strings.TrimLeft(strings.TrimSpace(string(out)), "0,"); got != mask {
		return fmt.Errorf("RPS on lo in %s: rps_cpus is %q, want %s", ns, out, mask)
	}
	return nil
}
