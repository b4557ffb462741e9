package server

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/procsock"
)

const pidReuseEnv = "SANTA_REVIEW_PIDREUSE_INNER"

// With a cgroup, Scan reads the cgroup's pids (cgroupProcs), then each
// one's /proc/PID/fd (HoldersAmong), and Take opens the pid it found;
// nothing checks that the process behind the pid is still the cgroup's.
// A server process that exits between the two reads (NSD's old server
// processes at each reload, every process at a restart) frees its pid,
// and a process of another user that gets it there, holding a socket
// bound to the port beside the server (SO_REUSEADDR, or on loopback), has
// its socket found as the server's and taken by the root agent. The test
// replays that window step by step, in a pid namespace of its own where
// ns_last_pid hands the freed pid to the other user's process.
func TestTakeChecksTheCgroupAfterPidReuse(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a pid namespace, a cgroup, another user's process")
	}
	if os.Getenv(pidReuseEnv) == "" {
		if _, err := exec.LookPath("unshare"); err != nil {
			t.Skip("needs unshare (util-linux)")
		}
		cmd := exec.Command("unshare", "--pid", "--fork", "--mount-proc", os.Args[0],
			"-test.run=^TestTakeChecksTheCgroupAfterPidReuse$", "-test.v")
		cmd.Env = append(os.Environ(), pidReuseEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("in a pid namespace of its own: %v\n%s", err, out)
		}
		t.Logf("%s", out)
		return
	}
	root, err := cgroup2Root()
	if err != nil {
		t.Skip(err)
	}
	cg := filepath.Join(root, fmt.Sprintf("santa-review-pidreuse-%d", time.Now().UnixNano()%1000000))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(cg)
	l, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.LocalAddr().(*net.UDPAddr).Port
	l.Close()

	for attempt := 0; attempt < 5; attempt++ {
		// A process of the server, in its cgroup.
		srv := exec.Command("sleep", "100")
		srv.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		pid := srv.Process.Pid
		if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			srv.Process.Kill()
			srv.Wait()
			t.Fatal(err)
		}
		// Scan: the cgroup's pids ...
		pids, err := cgroupProcs(cg)
		if err != nil || len(pids) != 1 || pids[0] != pid {
			t.Fatalf("cgroupProcs = %v, %v; want [%d]", pids, err, pid)
		}
		// ... the process exits, and another user's process, outside the
		// cgroup, holding a socket bound to the port, gets its pid ...
		srv.Process.Kill()
		srv.Wait()
		os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0)
		other := startHelper(t, "nobody", "", port, "")
		if other.pid() != pid {
			other.stop()
			continue // a thread of this process took the pid: again
		}
		// ... and the fd walk over the pids read before.
		bound, err := procsock.BoundUDP("", uint16(port), netip.Addr{})
		if err != nil || len(bound) != 1 {
			t.Fatalf("BoundUDP: %v, %v", bound, err)
		}
		held := procsock.HoldersAmong(pids, []uint64{bound[0].Inode})
		h, ok := held[bound[0].Inode]
		if !ok {
			t.Logf("the fd walk did not find the socket (a fixed HoldersAmong)")
			return
		}
		f, err := NewFinder(Target{Cgroup: filepath.Base(cg), Port: uint16(port)})
		if err != nil || f.cgroup != cg {
			t.Fatalf("NewFinder: cgroup %q, %v; want %s", f.cgroup, err, cg)
		}
		fd, err := f.Take(Socket{Inode: bound[0].Inode, Local: bound[0].Local, Holder: h})
		if err == nil {
			unix.Close(fd)
			u, _ := procsock.UserOf(h.PID)
			t.Fatalf("took the socket %v of pid %d (%v), which is not in cgroup %s: a process of that cgroup had pid %d when it was listed",
				bound[0].Local, h.PID, u, cg, pid)
		}
		t.Logf("Take refused: %v", err)
		return
	}
	t.Skip("the freed pid never went to the other user's process")
}
