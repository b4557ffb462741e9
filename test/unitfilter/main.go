// Command unitfilter runs a command under a systemd unit file's system
// call filter, for tests on machines without systemd as PID 1, where no
// unit can run. It installs a seccomp filter made from the unit's
// SystemCallFilter= (an allow list, each @group expanded by
// `systemd-analyze syscall-filter` as this machine's systemd would),
// SystemCallErrorNumber= (what a refused call returns),
// SystemCallArchitectures=native (i386 and x32 calls are refused too) and
// RestrictAddressFamilies= (socket(2) with another family gets
// EAFNOSUPPORT, as under systemd), then executes the command.
//
//	unitfilter UNIT COMMAND [ARG...]
//
// It supports what deploy/'s units use, no more: an allow list (a "~"
// deny list is refused), on x86-64. systemd builds its filter with
// libseccomp; this one is a plain classic BPF program with the same
// verdicts, not the same instructions.
package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// syscallHeader lists x86-64's system call numbers (linux-libc-dev).
const syscallHeader = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"

// families are the address families RestrictAddressFamilies= may name
// here: those of deploy/'s units and a few more.
var families = map[string]uint32{
	"AF_UNIX": unix.AF_UNIX, "AF_INET": unix.AF_INET, "AF_INET6": unix.AF_INET6,
	"AF_NETLINK": unix.AF_NETLINK, "AF_PACKET": unix.AF_PACKET, "AF_VSOCK": unix.AF_VSOCK,
}

// unit is what of a unit file shapes its filter.
type unit struct {
	allow    []string // names and @groups
	errno    syscall.Errno
	families []uint32 // nil: any
}

func parseUnit(path string) (*unit, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	u := &unit{errno: unix.EPERM}
	for _, line := range strings.Split(string(data), "\n") {
		key, value, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		switch key {
		case "SystemCallFilter":
			if strings.HasPrefix(value, "~") {
				return nil, fmt.Errorf("%s: SystemCallFilter=%s: a deny list, which unitfilter does not build", path, value)
			}
			u.allow = append(u.allow, strings.Fields(value)...)
		case "SystemCallErrorNumber":
			if u.errno = errnoNamed(value); u.errno == 0 {
				return nil, fmt.Errorf("%s: SystemCallErrorNumber=%s: no such error number", path, value)
			}
		case "SystemCallArchitectures":
			if value != "native" {
				return nil, fmt.Errorf("%s: SystemCallArchitectures=%s: unitfilter knows only native", path, value)
			}
		case "RestrictAddressFamilies":
			for _, name := range strings.Fields(value) {
				f, ok := families[name]
				if !ok {
					return nil, fmt.Errorf("%s: RestrictAddressFamilies= names %s, which unitfilter does not know", path, name)
				}
				u.families = append(u.families, f)
			}
		}
	}
	if len(u.allow) == 0 {
		return nil, fmt.Errorf("%s: no SystemCallFilter=", path)
	}
	return u, nil
}

func errnoNamed(name string) syscall.Errno {
	for e := syscall.Errno(1); e < 4096; e++ {
		if unix.ErrnoName(e) == name {
			return e
		}
	}
	return 0
}

// expand turns names and @groups into the system calls they allow: a
// group's members as `systemd-analyze syscall-filter GROUP` lists them
// (names, nested @groups, # comments).
func expand(items []string, into map[string]bool, seen map[string]bool) error {
	for _, item := range items {
		if !strings.HasPrefix(item, "@") {
			into[item] = true
			continue
		}
		if seen[item] {
			continue
		}
		seen[item] = true
		out, err := exec.Command("systemd-analyze", "syscall-filter", "--no-pager", item).Output()
		if err != nil {
			return fmt.Errorf("systemd-analyze syscall-filter %s: %w", item, err)
		}
		var members []string
		for _, line := range strings.Split(string(out), "\n")[1:] { // the first is the group's name
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				members = append(members, line)
			}
		}
		if len(members) == 0 {
			return fmt.Errorf("systemd-analyze syscall-filter %s lists nothing", item)
		}
		if err := expand(members, into, seen); err != nil {
			return err
		}
	}
	return nil
}

var define = regexp.MustCompile(`^#define __NR_([a-z0-9_]+) ([0-9]+)$`)

// numbers maps x86-64's system call names to their numbers.
func numbers() (map[string]uint32, error) {
	f, err := os.Open(syscallHeader)
	if err != nil {
		return nil, fmt.Errorf("%w (linux-libc-dev)", err)
	}
	defer f.Close()
	nr := map[string]uint32{}
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if m := define.FindStringSubmatch(sc.Text()); m != nil {
			n, _ := strconv.ParseUint(m[2], 10, 32)
			nr[m[1]] = uint32(n)
		}
	}
	if nr["socket"] == 0 {
		return nil, fmt.Errorf("%s: no __NR_socket", syscallHeader)
	}
	return nr, nil
}

// seccomp_data's offsets: nr, arch, then (after ip) the arguments, of
// which a family is the low 32 bits of the first (little-endian).
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16
	x32Bit  = 0x40000000 // __X32_SYSCALL_BIT
)

func stmt(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
func jeq(k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: jt, Jf: jf, K: k}
}

// program is the filter: system calls of allowed numbers pass (socket
// only with an allowed family), every other returns errno.
func program(allowed []uint32, socketNr uint32, families []uint32, errno syscall.Errno) []unix.SockFilter {
	const ld = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	const ret = unix.BPF_RET | unix.BPF_K
	allow := stmt(ret, unix.SECCOMP_RET_ALLOW)
	refuse := stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(errno))
	p := []unix.SockFilter{
		stmt(ld, offArch), jeq(unix.AUDIT_ARCH_X86_64, 1, 0), refuse,
		stmt(ld, offNr), {Code: unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, Jt: 0, Jf: 1, K: x32Bit}, refuse,
	}
	if families != nil {
		// socket: its own block, which the jump over skips for others
		block := []unix.SockFilter{stmt(ld, offArg0)}
		for _, f := range families {
			block = append(block, jeq(f, 0, 1), allow)
		}
		block = append(block, stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EAFNOSUPPORT)))
		p = append(append(p, jeq(socketNr, 0, uint8(len(block)))), block...)
	}
	for _, nr := range allowed {
		p = append(p, jeq(nr, 0, 1), allow)
	}
	return append(p, refuse)
}

// filterOf builds the unit's filter.
func filterOf(path string) ([]unix.SockFilter, error) {
	u, err := parseUnit(path)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	if err := expand(u.allow, names, map[string]bool{}); err != nil {
		return nil, err
	}
	nr, err := numbers()
	if err != nil {
		return nil, err
	}
	// socket passes through its family block if the unit restricts them
	block := u.families != nil && names["socket"]
	var allowed []uint32
	for name := range names {
		// the groups list calls of every architecture; x86-64's are those
		// the header names (systemd skips the others alike)
		if n, ok := nr[name]; ok && !(name == "socket" && block) {
			allowed = append(allowed, n)
		}
	}
	slices.Sort(allowed)
	if !block {
		u.families = nil
	}
	p := program(allowed, nr["socket"], u.families, u.errno)
	if len(p) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("%s: a filter of %d instructions, more than the kernel's %d", path, len(p), unix.BPF_MAXINSNS)
	}
	return p, nil
}

// run installs the filter on this thread and executes the command there:
// the new program inherits it (and no new privileges, which seccomp needs
// without CAP_SYS_ADMIN and the unit's sandbox sets anyway).
func run(filter []unix.SockFilter, argv []string) error {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return err
	}
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no new privileges: %w", err)
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return syscall.Exec(path, argv, os.Environ())
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: unitfilter UNIT COMMAND [ARG...]")
		os.Exit(2)
	}
	filter, err := filterOf(os.Args[1])
	if err == nil {
		err = run(filter, os.Args[2:])
	}
	fmt.Fprintf(os.Stderr, "unitfilter: %v\n", err)
	os.Exit(1)
}
