// Package integration runs Santa end to end: the real test/hello binary
// in one network namespace, real UDP sockets in another, joined by the veth
// rig of bench/rig.sh. The tests need root (namespaces, veth, BPF) and a
// kernel with native XDP on veth, tcx and bpf_rdonly_cast (Linux 6.6+);
// they skip without root.
package integration

import (
	"bufio"
	"bytes"
	"context"
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
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/netns"
	"github.com/santa-offload/santa/internal/xdppass"
)

const (
	replyTimeout = 3 * time.Second  // one request's round trip
	readyTimeout = 30 * time.Second // hello: start to "ready"
	stopTimeout  = 10 * time.Second // hello: SIGINT to exit
	helloLife    = 2 * time.Minute  // hello is killed after this, whatever happens
)

// requireRoot skips the test unless it can build the rig.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and veth pairs and loads BPF programs (run go test as root)")
	}
	for _, tool := range []string{"ip", "ethtool", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s on PATH (make setup installs it)", tool)
		}
	}
}

// repoRoot is the module's root directory, two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// uniqueName names this process's namespaces and links, so that concurrent
// runs do not meet: "i" + pid + a one-letter suffix per test (at most 9
// characters: veth names, NAME-s, must stay within 15).
func uniqueName(suffix string) string {
	return fmt.Sprintf("i%d%s", os.Getpid(), suffix)
}

var staleName = regexp.MustCompile(`^i([0-9]+)[a-z](-srv|-cli)?$`)

// sweepStale removes the namespaces of earlier runs of these tests that died
// without cleaning up (a -timeout panic skips cleanups): those named by
// uniqueName for a process that no longer exists.
func sweepStale(t *testing.T) {
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		return // no namespaces at all
	}
	for _, e := range entries {
		m := staleName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		if _, err := os.Stat(filepath.Join("/proc", m[1])); err == nil {
			continue // its test is still running
		}
		t.Logf("removing namespace %s of a test run that died", e.Name())
		command(t, 10*time.Second, "ip", "netns", "del", e.Name())
	}
}

// command runs a short command to completion, bounded in time.
func command(t *testing.T, timeout time.Duration, name string, args ...string) error {
	t.Helper()
	_, err := commandOutput(t, timeout, name, args...)
	return err
}

// commandOutput is command that returns what the command printed.
func commandOutput(t *testing.T, timeout time.Duration, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// buildHello builds test/hello into the test's temporary directory.
func buildHello(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "hello")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, "build", "-o", bin, "./test/hello")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building test/hello: %v\n%s", err, out)
	}
	return bin
}

// rig is a two-namespace veth rig made by bench/rig.sh.
type rig struct {
	name     string
	srv, cli string // namespaces
	srvDev   string // server end of the veth, in srv
	cliDev   string // client end, in cli
}

const (
	serverIPv4 = "10.77.0.1"
	serverIPv6 = "fd77::1"
)

// newRig brings up a rig (options: bench/rig.sh up's); the test's cleanup
// takes it down.
func newRig(t *testing.T, suffix string, options ...string) *rig {
	t.Helper()
	r := &rig{name: uniqueName(suffix)}
	r.srv, r.cli, r.srvDev, r.cliDev = r.name+"-srv", r.name+"-cli", r.name+"-s", r.name+"-c"
	script := filepath.Join(repoRoot(t), "bench", "rig.sh")
	sweepStale(t)
	t.Cleanup(func() {
		if err := command(t, 30*time.Second, "bash", script, "down", r.name); err != nil {
			t.Error(err)
		}
	})
	if err := command(t, 30*time.Second, "bash", append([]string{script, "up", r.name}, options...)...); err != nil {
		t.Fatal(err)
	}
	return r
}

// newNetns creates an empty namespace with lo up; cleanup deletes it.
func newNetns(t *testing.T, suffix string) string {
	t.Helper()
	ns := uniqueName(suffix)
	sweepStale(t)
	if err := command(t, 10*time.Second, "ip", "netns", "add", ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := command(t, 10*time.Second, "ip", "netns", "del", ns); err != nil {
			t.Error(err)
		}
	})
	if err := command(t, 10*time.Second, "ip", "-n", ns, "link", "set", "lo", "up"); err != nil {
		t.Fatal(err)
	}
	return ns
}

// inNetns runs f in the rig's network namespace ns (internal/netns).
func inNetns(ns string, f func() error) error { return netns.Run(netns.Named(ns), f) }

// attachXDPPass runs xdp_pass on dev in ns, so that dev receives the XDP_TX
// frames of its veth peer; cleanup detaches it.
func attachXDPPass(t *testing.T, ns, dev string) {
	t.Helper()
	err := inNetns(ns, func() error {
		l, err := xdppass.Attach(dev)
		if err != nil {
			return err
		}
		t.Cleanup(func() { l.Close() })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// dialIn opens a UDP socket in ns connected to server; cleanup closes it.
func dialIn(t *testing.T, ns, server string) *net.UDPConn {
	t.Helper()
	var conn *net.UDPConn
	err := inNetns(ns, func() error {
		c, err := net.Dial("udp", server)
		if err != nil {
			return err
		}
		conn = c.(*net.UDPConn)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// exchange sends one request and returns its reply.
func exchange(t *testing.T, conn *net.UDPConn, req []byte) []byte {
	t.Helper()
	if err := conn.SetDeadline(time.Now().Add(replyTimeout)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(req); err != nil {
		t.Fatalf("sending %q: %v", abbrev(req), err)
	}
	buf := make([]byte, 65536)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no reply to %q from %s: %v", abbrev(req), conn.RemoteAddr(), err)
	}
	return buf[:n]
}

func abbrev(b []byte) string {
	if len(b) > 40 {
		return fmt.Sprintf("%s... (%d bytes)", b[:40], len(b))
	}
	return string(b)
}

// hello is a running test/hello.
type hello struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc
	done   <-chan struct{} // closed when the process has exited
	err    error           // its exit status, once done

	mu     sync.Mutex
	lines  []string // stdout so far
	stderr bytes.Buffer
	xdp    map[string]string // interface -> XDP mode, from its "attached" lines
}

// startHello starts bin in netns ns and waits until it is ready.
// startTied starts cmd so that it dies with this test binary, even one
// that dies without cleaning up (a -timeout panic): Pdeathsig fires when
// the *thread* that started it ends, and threads locked by inNetns do end,
// so cmd is started, read (read, if not nil) and waited for on a thread
// locked until it has exited. exited gets Wait's error; done is closed
// after it.
func startTied(cmd *exec.Cmd, read func(), exited func(error)) (done <-chan struct{}, err error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started, closed := make(chan error, 1), make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(closed)
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		if read != nil {
			read()
		}
		err := cmd.Wait()
		if exited != nil {
			exited(err)
		}
	}()
	return closed, <-started
}

func startHello(t *testing.T, bin, ns string, args ...string) *hello {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), helloLife)
	h := &hello{cancel: cancel, xdp: map[string]string{}}
	// ip netns exec execs hello in place: signals reach it directly. It
	// also gives hello a mount namespace of its own, so hello's pins live
	// on a bpffs of its own and vanish with it, even if it is killed.
	h.cmd = exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, bin}, args...)...)
	h.cmd.WaitDelay = 5 * time.Second
	h.cmd.Stderr = &lockedWriter{mu: &h.mu, w: &h.stderr}
	stdout, err := h.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	h.done, err = startTied(h.cmd, func() {
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			h.mu.Lock()
			h.lines = append(h.lines, line)
			if f := fields(line, "attached"); f != nil {
				h.xdp[f["iface"]] = f["xdp"]
			}
			h.mu.Unlock()
			if !signalled && strings.HasPrefix(line, "ready ") {
				close(ready)
				signalled = true
			}
		}
	}, func(err error) { h.err = err })
	if err != nil {
		cancel()
		t.Fatalf("starting hello: %v", err)
	}
	t.Cleanup(func() {
		cancel() // kills it if it still runs
		<-h.done
	})

	select {
	case <-ready:
		return h
	case <-h.done:
		t.Fatalf("hello exited before it was ready: %v\n%s", h.err, h.output())
	case <-time.After(readyTimeout):
		t.Fatalf("hello not ready after %v\n%s", readyTimeout, h.output())
	}
	return nil
}

// stop interrupts hello as Ctrl-C would and returns its STATS counters.
func (h *hello) stop(t *testing.T) map[string]uint64 {
	t.Helper()
	if err := h.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatalf("interrupting hello: %v", err)
	}
	select {
	case <-h.done:
	case <-time.After(stopTimeout):
		h.cancel()
		<-h.done
		t.Fatalf("hello still running %v after SIGINT\n%s", stopTimeout, h.output())
	}
	if h.err != nil {
		t.Fatalf("hello failed: %v\n%s", h.err, h.output())
	}
	for _, line := range h.stdout() {
		if f := fields(line, "STATS"); f != nil {
			stats := map[string]uint64{}
			for k, v := range f {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					t.Fatalf("STATS field %s=%q: %v", k, v, err)
				}
				stats[k] = n
			}
			return stats
		}
	}
	t.Fatalf("hello printed no STATS line\n%s", h.output())
	return nil
}

func (h *hello) stdout() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.lines...)
}

// output is everything hello printed, for failure messages.
func (h *hello) output() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return "hello stdout:\n  " + strings.Join(h.lines, "\n  ") + "\nhello stderr:\n  " + h.stderr.String()
}

// xdpMode is the XDP mode hello reported for an interface.
func (h *hello) xdpMode(iface string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.xdp[iface]
}

// requests are hello's log lines for requests it answered itself.
func (h *hello) requests() []string {
	var out []string
	for _, line := range h.stdout() {
		if strings.HasPrefix(line, "request ") {
			out = append(out, line)
		}
	}
	return out
}

// fields parses "WORD k=v k=v ..." lines; nil if line does not start with word.
func fields(line, word string) map[string]string {
	parts := strings.Fields(line)
	if len(parts) == 0 || parts[0] != word {
		return nil
	}
	out := map[string]string{}
	for _, p := range parts[1:] {
		if k, v, ok := strings.Cut(p, "="); ok {
			out[k] = v
		}
	}
	return out
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// wantStats checks hello's counters against want.
func wantStats(t *testing.T, got map[string]uint64, want map[string]uint64) {
	t.Helper()
	for k, v := range want {
		if n, ok := got[k]; !ok {
			t.Errorf("STATS has no %s", k)
		} else if n != v {
			t.Errorf("STATS %s = %d, want %d", k, n, v)
		}
	}
}
