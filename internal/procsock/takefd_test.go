package procsock

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// TestTakeSocketChecksTheInode: the fd must still be the socket found.
func TestTakeSocketChecksTheInode(t *testing.T) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, _ := c.SyscallConn()
	var fd int
	raw.Control(func(f uintptr) { fd = int(f) })
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	h := Held{PID: os.Getpid(), FD: fd}
	got, err := TakeSocket(h, st.Ino, nil)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(got)
	if got, err := TakeSocket(h, st.Ino+1, nil); err == nil {
		unix.Close(got)
		t.Fatal("TakeSocket gave an fd that is another socket than the one asked")
	}
	refuse := errors.New("not the server's")
	if got, err := TakeSocket(h, st.Ino, func(int) error { return refuse }); !errors.Is(err, refuse) {
		unix.Close(got)
		t.Fatalf("TakeSocket with a check that refuses: %v; want the check's error", err)
	}
}

// TestTakeFailsForAnEndedProcess: a process that ends while the check
// reads its /proc/PID, zombie or reaped (its pid free for another
// process, which the check may then have read), gives nothing: the fd is
// taken through the pidfd opened before the check.
func TestTakeFailsForAnEndedProcess(t *testing.T) {
	for _, reap := range []bool{false, true} {
		cmd := exec.Command("sleep", "100")
		if err := cmd.Start(); err != nil {
			t.Skip(err)
		}
		pid := cmd.Process.Pid
		if fd, err := take(pid, 0, nil); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Skipf("cannot take a child's fd here: %v", err)
		} else {
			unix.Close(fd)
		}
		checked := false
		fd, err := take(pid, 0, func(p int) error {
			checked = p == pid
			cmd.Process.Kill()
			if reap {
				cmd.Wait()
				return nil
			}
			// A zombie: ended, not reaped.
			var info unix.Siginfo
			return unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		})
		if !reap {
			cmd.Wait()
		}
		if err == nil {
			unix.Close(fd)
			t.Errorf("reaped %v: took fd 0 of process %d, which ended during the check", reap, pid)
		}
		if !checked {
			t.Errorf("reaped %v: the check did not run on pid %d", reap, pid)
		}
	}
}
