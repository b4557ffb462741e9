// Package santadtest runs a real santad for tests and benchmarks: built
// from cmd/santad, in a network namespace of its own with lo attached (or
// other interfaces), with its own socket, journal and pins, all removed
// afterwards. Needs root.
package santadtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/santa-offload/santa/internal/netns"
)

const (
	readyTimeout = 30 * time.Second // santad: start to "ready"
	stopTimeout  = 10 * time.Second // santad: SIGTERM to exit
)

// Netns is a network namespace with lo up.
type Netns struct{ Name string }

// NewNetns creates network namespace name.
func NewNetns(name string) (*Netns, error) {
	if err := command("ip", "netns", "add", name); err != nil {
		return nil, err
	}
	ns := &Netns{Name: name}
	if err := command("ip", "-n", name, "link", "set", "lo", "up"); err != nil {
		ns.Delete()
		return nil, err
	}
	return ns, nil
}

// Delete removes the namespace.
func (n *Netns) Delete() error { return command("ip", "netns", "del", n.Name) }

func (n *Netns) path() string { return netns.Named(n.Name) }

// Do runs f in the namespace (internal/netns): sockets f creates stay in
// it whichever thread uses them later.
func (n *Netns) Do(f func() error) error { return netns.Run(n.path(), f) }

// Command runs name in the namespace. nsenter joins the network namespace
// only, so the process shares the host's mounts, /sys/fs/bpf among them:
// what a santad started so pins outlives it, as it must for a restart.
// (ip netns exec gives it a /sys of its own: santad then pins through its
// parent's view, IPNetnsExec.)
func (n *Netns) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + n.path(), "--", name}, args...)...)
}

// IPNetnsExec runs name in the namespace as an operator may type it, with
// `ip netns exec`: in a mount namespace of its own, with the network
// namespace's sysfs mounted over /sys. ip execs name in place.
func (n *Netns) IPNetnsExec(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// command runs a short command to completion.
func command(name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// GoBin is the go command: the one on PATH, else the one that built the
// test.
func GoBin() string {
	if gobin, err := exec.LookPath("go"); err == nil {
		return gobin
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// Build builds santad into dir. The working directory must be inside the
// module.
func Build(dir string) (string, error) { return BuildCommand(dir, "santad") }

// BuildCommand builds the module's command cmd/NAME into dir and returns
// its path. The working directory must be inside the module.
func BuildCommand(dir, name string) (string, error) {
	bin := filepath.Join(dir, name)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, GoBin(), "build", "-o", bin, "github.com/santa-offload/santa/cmd/"+name).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building %s: %w\n%s", name, err, out)
	}
	return bin, nil
}

// Names of what a run leaves behind, with its pid, so that a later run can
// remove what a killed one could not.
const (
	netnsPrefix = "sdt"
	pinPrefix   = "santa-test-"
)

// A namespace named NetnsName(suffix), or one of the two of a bench/rig.sh
// rig of that name.
var staleNetns = regexp.MustCompile(`^` + netnsPrefix + `([0-9]+)[a-z]+(-srv|-cli)?$`)
var stalePins = regexp.MustCompile(`^` + pinPrefix + `([0-9]+)-[a-z]+$`)

// NetnsName and PinPath name a test's namespace and pins after this
// process and a suffix of lowercase letters.
func NetnsName(suffix string) string { return fmt.Sprintf("%s%d%s", netnsPrefix, os.Getpid(), suffix) }
func PinPath(suffix string) string {
	return filepath.Join("/sys/fs/bpf", fmt.Sprintf("%s%d-%s", pinPrefix, os.Getpid(), suffix))
}

// SweepStale removes namespaces and pins of earlier runs whose process is
// gone (a test binary killed by -timeout skips its cleanups).
func SweepStale() {
	sweep := func(dir string, re *regexp.Regexp, remove func(string)) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			m := re.FindStringSubmatch(e.Name())
			if m == nil {
				continue
			}
			if _, err := os.Stat(filepath.Join("/proc", m[1])); err == nil {
				continue // still running
			}
			remove(e.Name())
		}
	}
	sweep("/run/netns", staleNetns, func(name string) { command("ip", "netns", "del", name) })
	sweep("/sys/fs/bpf", stalePins, func(name string) { os.RemoveAll(filepath.Join("/sys/fs/bpf", name)) })
}

// Santad is a santad process.
type Santad struct {
	Socket   string
	StateDir string
	PinPath  string
	// Interfaces are what santad attaches to (-interfaces): lo unless
	// changed before Start.
	Interfaces []string
	// Launch, if set, makes santad's command in place of Netns.Command
	// (Netns.IPNetnsExec, say).
	Launch func(ctx context.Context, name string, args ...string) *exec.Cmd

	bin  string
	ns   *Netns
	args []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	log  strings.Builder
}

// New describes a santad serving lo in ns (set Interfaces for others),
// with its socket and journal in dir and its pins at pinPath; args are
// more flags. Start starts it.
func New(bin string, ns *Netns, dir, pinPath string, args ...string) *Santad {
	return &Santad{Socket: filepath.Join(dir, "santa.sock"), StateDir: filepath.Join(dir, "state"), PinPath: pinPath,
		Interfaces: []string{"lo"}, bin: bin, ns: ns, args: args}
}

// Start starts santad and waits until it is ready. Killed or stopped, it
// can be started again: the restart keeps the journal and the pins.
func (s *Santad) Start() error {
	args := append([]string{"-socket", s.Socket, "-state-dir", s.StateDir, "-pin-path", s.PinPath,
		"-interfaces", strings.Join(s.Interfaces, ",")}, s.args...)
	launch := s.ns.Command
	if s.Launch != nil {
		launch = s.Launch
	}
	cmd := launch(context.Background(), s.bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	// If this process dies, santad dies with it. Pdeathsig fires when the
	// thread that started santad ends, so that thread stays locked until
	// santad has exited.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	done, ready, started := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(done)
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		sc := bufio.NewScanner(stderr)
		for signalled := false; sc.Scan(); {
			s.mu.Lock()
			s.log.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if !signalled && strings.Contains(sc.Text(), " msg=ready ") {
				close(ready)
				signalled = true
			}
		}
		cmd.Wait()
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("starting santad: %w", err)
	}
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-done:
		return fmt.Errorf("santad exited before it was ready: %v\n%s", cmd.ProcessState, s.Log())
	case <-time.After(readyTimeout):
		s.Kill()
		return fmt.Errorf("santad not ready after %v\n%s", readyTimeout, s.Log())
	}
}

// Bin is the santad binary it runs.
func (s *Santad) Bin() string { return s.bin }

// PID is santad's process id (nsenter and ip netns exec exec it in place).
func (s *Santad) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd.Process.Pid
}

// Kill sends SIGKILL and waits for santad to exit.
func (s *Santad) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// Stop sends SIGTERM and waits for santad to exit.
func (s *Santad) Stop() error {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(stopTimeout):
		s.Kill()
		return fmt.Errorf("santad still running %v after SIGTERM", stopTimeout)
	}
	if !cmd.ProcessState.Success() {
		return fmt.Errorf("santad: %v\n%s", cmd.ProcessState, s.Log())
	}
	return nil
}

// Close kills santad if it runs and removes its pins, which detaches the
// data plane it left.
func (s *Santad) Close() error {
	s.Kill()
	if err := os.RemoveAll(s.PinPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Log is what santad logged so far, over all its starts.
func (s *Santad) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// OpenFDs is the number of descriptors santad holds.
func (s *Santad) OpenFDs() (int, error) {
	entries, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(s.PID()), "fd"))
	return len(entries), err
}

// Ask sends one request on a connected UDP socket and returns the reply
// that comes within timeout.
func Ask(u *net.UDPConn, req []byte, timeout time.Duration) ([]byte, error) {
	if err := u.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	if _, err := u.Write(req); err != nil {
		return nil, err
	}
	buf := make([]byte, 2048)
	n, err := u.Read(buf)
	return buf[:n], err
}

// HoldsSocket reports whether santad has a descriptor of the socket with
// inode ino.
func (s *Santad) HoldsSocket(ino uint64) (bool, error) {
	dir := filepath.Join("/proc", strconv.Itoa(s.PID()), "fd")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	want := fmt.Sprintf("socket:[%d]", ino)
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && target == want {
			return true, nil
		}
	}
	return false, nil
}
