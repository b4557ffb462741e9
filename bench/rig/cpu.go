package rig

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/santa-offload/santa/internal/netproc"
)

// UserHZ is the unit of /proc/stat's tick counts, which Linux fixes at 100.
const UserHZ = 100

// PinAllThreads sets the affinity of every thread of this process; threads
// made later inherit it.
func PinAllThreads(cpu int) error { return netproc.PinThreads(os.Getpid(), cpu) }

// CPUTicks are a CPU's busy and total ticks so far (/proc/stat, UserHZ).
// Busy is user, nice, system, irq and softirq time; total adds idle, iowait
// and steal.
func CPUTicks(cpu int) (busy, total uint64, err error) {
	v, err := cpuStat(cpu)
	if err != nil {
		return 0, 0, err
	}
	busy = v[0] + v[1] + v[2] + v[5] + v[6]
	return busy, busy + v[3] + v[4] + v[7], nil
}

// SoftirqNS is the time a CPU has spent in softirqs so far (ns, from
// /proc/stat's UserHZ ticks). Without CONFIG_IRQ_TIME_ACCOUNTING the
// kernel samples it at every scheduler tick, whichever task the softirq
// interrupted: it is where loopback's receive work (XDP, TC, the stack)
// shows, when RPS sends it to a CPU.
func SoftirqNS(cpu int) (uint64, error) {
	v, err := cpuStat(cpu)
	if err != nil {
		return 0, err
	}
	return v[6] * 1e9 / UserHZ, nil
}

// cpuStat is a CPU's line of /proc/stat: user, nice, system, idle, iowait,
// irq, softirq, steal and what follows, in UserHZ ticks.
func cpuStat(cpu int) ([]uint64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return nil, err
	}
	prefix := fmt.Sprintf("cpu%d ", cpu)
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, prefix) {
			continue
		}
		f := strings.Fields(l)[1:]
		if len(f) < 8 {
			break
		}
		v := make([]uint64, len(f))
		for i := range f {
			v[i], _ = strconv.ParseUint(f[i], 10, 64)
		}
		return v, nil
	}
	return nil, fmt.Errorf("no %q line in /proc/stat", prefix)
}

// IdleBusy is a CPU's busy share (%) over d while nothing of ours runs: the
// idle check before a run.
func IdleBusy(cpu int, d time.Duration) (float64, error) {
	b0, t0, err := CPUTicks(cpu)
	if err != nil {
		return 0, err
	}
	time.Sleep(d)
	b1, t1, err := CPUTicks(cpu)
	if err != nil {
		return 0, err
	}
	if t1 == t0 {
		return 0, nil
	}
	return 100 * float64(b1-b0) / float64(t1-t0), nil
}

// NapiThreads are the pids of dev's threaded-NAPI kthreads
// ("napi/<dev>-<id>", cut to 15 characters).
func NapiThreads(dev string) []int {
	prefix := "napi/" + dev + "-"
	if len(prefix) > 15 {
		prefix = prefix[:15]
	}
	var out []int
	dirs, _ := os.ReadDir("/proc")
	for _, e := range dirs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err == nil && strings.HasPrefix(strings.TrimSpace(string(comm)), prefix) {
			out = append(out, pid)
		}
	}
	return out
}

// TaskTime sums the CPU time (ns, /proc/PID/schedstat) of tasks: unlike
// /proc/stat it does not count other people's work on the same CPU.
func TaskTime(pids []int) (uint64, error) {
	var sum uint64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
		if err != nil {
			return 0, err
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return 0, fmt.Errorf("empty schedstat for %d", pid)
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

// Threads are the thread ids of process pid (/proc/PID/task), for TaskTime:
// a process's own schedstat counts its first thread alone.
func Threads(pid int) ([]int, error) {
	dirs, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, err
	}
	var tids []int
	for _, e := range dirs {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}
