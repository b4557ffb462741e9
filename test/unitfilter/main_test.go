package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// probeEnv makes the test binary a probe: it makes the system calls
// below and prints what each returned.
const probeEnv = "UNITFILTER_PROBE"

func TestMain(m *testing.M) {
	if os.Getenv(probeEnv) != "" {
		probe()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func result(err error) string {
	if err == nil {
		return "ok"
	}
	return unix.ErrnoName(err.(unix.Errno))
}

func probe() {
	socket := func(family, typ, proto int) string {
		fd, err := unix.Socket(family, typ, proto)
		unix.Close(fd)
		return result(err)
	}
	path, _ := unix.BytePtrFromString("/nonexistent")
	_, _, swapoff := unix.Syscall(unix.SYS_SWAPOFF, uintptr(unsafe.Pointer(path)), 0, 0)
	_, _, bpf := unix.Syscall(unix.SYS_BPF, 0xffff, 0, 0) // no such command
	for _, line := range []string{
		"swapoff=" + result(errnoOrNil(swapoff)),
		"bpf=" + result(errnoOrNil(bpf)),
		"inet=" + socket(unix.AF_INET, unix.SOCK_DGRAM, 0),
		"netlink=" + socket(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE),
		"packet=" + socket(unix.AF_PACKET, unix.SOCK_RAW, 0),
	} {
		fmt.Println(line)
	}
}

func errnoOrNil(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// build builds unitfilter into a temporary directory.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "unitfilter")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func requireTools(t *testing.T) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("unitfilter knows x86-64 only")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the probe's control run opens raw sockets")
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("no systemd-analyze: apt-get install systemd")
	}
	if _, err := os.Stat(syscallHeader); err != nil {
		t.Skipf("no %s: apt-get install linux-libc-dev", syscallHeader)
	}
}

// TestUnitFilter runs the probe under deploy/'s units' filters and
// without one: each unit refuses what it leaves out with its error number
// (a system call) or EAFNOSUPPORT (a family), and lets the rest through.
func TestUnitFilter(t *testing.T) {
	requireTools(t)
	bin := build(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		unit string // "": no filter, the control
		want string
	}{
		// bpf with no such command: EINVAL once it reaches the kernel
		{"", "swapoff=ENOENT bpf=EINVAL inet=ok netlink=ok packet=ok"},
		{"santad.service", "swapoff=EPERM bpf=EINVAL inet=ok netlink=ok packet=EAFNOSUPPORT"},
		{"santa-offload-dns@.service", "swapoff=EPERM bpf=EPERM inet=ok netlink=EAFNOSUPPORT packet=EAFNOSUPPORT"},
		{"santa-offload-memcached@.service", "swapoff=EPERM bpf=EPERM inet=ok netlink=ok packet=EAFNOSUPPORT"},
	} {
		cmd := exec.Command(self)
		if c.unit != "" {
			cmd = exec.Command(bin, filepath.Join("../../deploy", c.unit), self)
		}
		cmd.Env = append(os.Environ(), probeEnv+"=1")
		out, err := cmd.CombinedOutput()
		if got := strings.Join(strings.Fields(string(out)), " "); err != nil || got != c.want {
			t.Errorf("under %q: %v\n%s\nwant %s", c.unit, err, out, c.want)
		}
	}
}

// TestUnitFilterRefuses checks that a unit unitfilter cannot build the
// filter of is refused, saying why, and nothing runs.
func TestUnitFilterRefuses(t *testing.T) {
	requireTools(t)
	bin := build(t)
	for _, c := range []struct{ unit, want string }{
		{"SystemCallFilter=~@mount\n", "a deny list, which unitfilter does not build"},
		{"SystemCallFilter=@system-service\nRestrictAddressFamilies=AF_CAN\n", "names AF_CAN, which unitfilter does not know"},
		{"SystemCallFilter=@system-service\nSystemCallErrorNumber=EWHAT\n", "SystemCallErrorNumber=EWHAT: no such error number"},
		{"SystemCallFilter=@no-such-group\n", "systemd-analyze syscall-filter @no-such-group"},
		{"[Service]\nExecStart=/bin/true\n", "no SystemCallFilter="},
	} {
		path := filepath.Join(t.TempDir(), "x.service")
		if err := os.WriteFile(path, []byte(c.unit), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, path, "echo", "COMMAND-RAN").CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) || strings.Contains(string(out), "COMMAND-RAN") {
			t.Errorf("unit %q: %v, %q; want a failure saying %q", c.unit, err, out, c.want)
		}
	}
}
