package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/santadtest"
	"github.com/santa-offload/santa/rule"
)

// santadRig makes a network namespace named after suffix (removed by the
// test's cleanup), a directory and a santad binary in it.
func santadRig(t *testing.T, suffix string) (ns *santadtest.Netns, dir, bin string) {
	t.Helper()
	requireRoot(t)
	santadtest.SweepStale()
	ns, err := santadtest.NewNetns(santadtest.NetnsName(suffix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Delete() })
	dir = t.TempDir()
	if bin, err = santadtest.Build(dir); err != nil {
		t.Fatal(err)
	}
	return ns, dir, bin
}

// notifySocket is a fake systemd: the datagram socket $NOTIFY_SOCKET names.
type notifySocket struct {
	t *testing.T
	c *net.UnixConn
}

func newNotifySocket(t *testing.T, path string) *notifySocket {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &notifySocket{t: t, c: c}
}

// next is the next state santad sent, skipping keep-alives unless want
// is one.
func (n *notifySocket) next(want string) string {
	n.t.Helper()
	buf := make([]byte, 4096)
	for {
		n.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		k, err := n.c.Read(buf)
		if err != nil {
			n.t.Fatalf("waiting for %s from santad: %v", want, err)
		}
		if got := string(buf[:k]); got != "WATCHDOG=1" || want == "WATCHDOG=1" {
			return got
		}
	}
}

func (n *notifySocket) want(state string) {
	n.t.Helper()
	if got := n.next(state); !strings.HasPrefix(got, state) {
		n.t.Fatalf("santad told systemd %q, want %q", got, state)
	}
}

// TestSantadUnderSystemd runs santad as santad.service does (Type=notify,
// WatchdogSec=, ExecReload= SIGHUP) against a fake notify socket: READY=1
// once ready, keep-alives at half the watchdog period, RELOADING=1 and
// READY=1 around a reload (a good file and a broken one), STOPPING=1.
func TestSantadUnderSystemd(t *testing.T) {
	ns, dir, bin := santadRig(t, "sysd")
	config := filepath.Join(dir, "santad.json")
	writeConfig := func(text string) {
		if err := os.WriteFile(config, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeConfig(`{"quota_rules": 5, "max_rules": 4096}`)
	n := newNotifySocket(t, filepath.Join(dir, "notify"))
	// santad inherits these (exec.Cmd without Env); WATCHDOG_PID unset
	// means santad itself.
	t.Setenv("NOTIFY_SOCKET", filepath.Join(dir, "notify"))
	t.Setenv("WATCHDOG_USEC", "200000")
	d := santadtest.New(bin, ns, dir, santadtest.PinPath("sysd"), "-config", config)
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	}()
	n.want("READY=1")
	start := time.Now()
	for range 3 {
		n.want("WATCHDOG=1")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("3 keep-alives took %v; a watchdog of 200 ms wants one every 100 ms", took)
	}

	hup := func() {
		t.Helper()
		if err := syscall.Kill(d.PID(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		got := n.next("RELOADING=1")
		if !strings.HasPrefix(got, "RELOADING=1\nMONOTONIC_USEC=") {
			t.Errorf("santad told systemd %q on SIGHUP, want RELOADING=1 with MONOTONIC_USEC", got)
		}
		n.want("READY=1")
	}
	// santad logs before it says READY=1: the line is there once it has.
	writeConfig(`{"quota_rules": 7, "max_rules": 8192}`)
	hup()
	logged(t, d, `msg="configuration reloaded" restart_needed_for=[max_rules]`)
	writeConfig(`{"quota_rules": `)
	hup()
	logged(t, d, `msg="reload refused; the running configuration stays"`)
	n.want("WATCHDOG=1") // still alive

	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	n.want("STOPPING=1")
}

// logged waits a moment for santad's log to hold text: its stderr is read
// by another goroutine.
func logged(t *testing.T, d *santadtest.Santad, text string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if strings.Contains(d.Log(), text) {
			return
		}
	}
	t.Errorf("santad never logged %s:\n%s", text, d.Log())
}

// sandbox is a wrapper that runs santad (the binary SANTAD) as santad.service's sandbox
// leaves it, as far as the data plane is concerned: a mount namespace of
// its own (slave, as systemd's), every mount under /sys read-only
// (ProtectKernelTunables=, ProtectControlGroups=) but the host's bpffs at
// /sys/fs/bpf (ReadWritePaths=), no new privileges, the unit's
// capability bounding set (CAPS, setpriv's spelling) and the unit's
// system call filter and address families (UNITFILTER UNIT, test/unitfilter).
const sandbox = `#!/bin/sh
exec unshare --mount --propagation slave -- /bin/sh -ec '
for m in $(awk '"'"'$2 ~ "^/sys" { print $2 }'"'"' /proc/self/mounts | sort -u); do
	case $m in /sys/fs/bpf|/sys/fs/bpf/*) continue ;; esac
	mount -o remount,bind,ro "$m"
done
exec setpriv --no-new-privs --bounding-set -all,CAPS -- UNITFILTER UNIT "$@"' sh SANTAD "$@"
`

// unitCaps is santad.service's CapabilityBoundingSet= as setpriv writes
// it: "+bpf,+perfmon,...".
func unitCaps(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "santad.service"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^CapabilityBoundingSet=(.+)$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("santad.service has no CapabilityBoundingSet=")
	}
	var caps []string
	for _, c := range strings.Fields(string(m[1])) {
		caps = append(caps, "+"+strings.ToLower(strings.TrimPrefix(c, "CAP_")))
	}
	return strings.Join(caps, ",")
}

// TestSantadSandboxedRestart checks what santad.service's mount namespace,
// capabilities and system call filter must not break: rules answer after
// santad in its own namespace stopped (the pins are in the host's bpffs),
// and a santad started again, in a new namespace, restores and takes them
// over; no system call santad made was refused.
func TestSantadSandboxedRestart(t *testing.T) {
	for _, tool := range []string{"unshare", "setpriv", "systemd-analyze"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (util-linux, systemd)", tool)
		}
	}
	ns, dir, bin := santadRig(t, "sbox")
	unitfilter := filepath.Join(dir, "unitfilter")
	if out, err := exec.Command(santadtest.GoBin(), "build", "-o", unitfilter, "github.com/santa-offload/santa/test/unitfilter").CombinedOutput(); err != nil {
		t.Fatalf("building unitfilter: %v\n%s", err, out)
	}
	wrapper := filepath.Join(dir, "sandboxed")
	script := strings.NewReplacer("SANTAD", bin, "CAPS", unitCaps(t), "UNITFILTER", unitfilter,
		"UNIT", filepath.Join(repoRoot(t), "deploy", "santad.service")).Replace(sandbox)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	d := santadtest.New(wrapper, ns, dir, santadtest.PinPath("sbox"))
	start := func() {
		t.Helper()
		if err := d.Start(); err != nil {
			t.Fatal(err)
		}
		own, _ := os.Readlink("/proc/self/ns/mnt")
		its, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", d.PID()))
		if err != nil || its == own {
			t.Fatalf("santad's mount namespace %q (%v), the test's %q: want its own", its, err, own)
		}
		info, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", d.PID()))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{" /sys ro,", " /sys/fs/bpf rw,"} {
			if !strings.Contains(string(info), want) {
				t.Fatalf("santad's mounts have no %q: not the sandbox meant\n%s", want, info)
			}
		}
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.PID()))
		if !strings.Contains(string(status), "NoNewPrivs:\t1") || strings.Contains(string(status), "CapBnd:\t000001ffffffffff") ||
			!strings.Contains(string(status), "Seccomp:\t2") {
			t.Fatalf("santad runs without the unit's NoNewPrivileges=, capabilities and system call filter:\n%s", status)
		}
	}
	start()
	defer d.Close()

	// The server's socket and a client's, both in ns, over lo.
	var server, asker *net.UDPConn
	var listener *net.TCPListener
	var dialed, accepted net.Conn
	if err := ns.Do(func() error {
		var err error
		if server, err = net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
			return err
		}
		if asker, err = net.DialUDP("udp", nil, server.LocalAddr().(*net.UDPAddr)); err != nil {
			return err
		}
		// and a TCP listener with a connection it accepted before it is
		// attached, which santad adopts: /proc, pidfd_getfd
		var lc net.ListenConfig
		lc.SetMultipathTCP(false) // Go's default for listeners; santad serves TCP
		l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		listener = l.(*net.TCPListener)
		if dialed, err = net.Dial("tcp", listener.Addr().String()); err != nil {
			return err
		}
		accepted, err = listener.Accept()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	defer asker.Close()
	defer listener.Close()
	defer dialed.Close()
	defer accepted.Close()
	c, err := client.Dial(d.Socket)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := c.Attach(server)
	if err == nil {
		_, err = c.AddRules(svc.ServiceID, []rule.Rule{{
			Condition:  rule.Condition{Pattern: []byte("Hello")},
			Processors: []rule.Processor{rule.Put(0, []byte("COMSYS"))},
			ReplyLen:   6,
		}})
	}
	if err == nil {
		_, err = c.Attach(listener)
	}
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	logged(t, d, `msg="connections adopted" service=1 adopted=1 skipped=0`)
	answered := func(when string) {
		t.Helper()
		reply, err := santadtest.Ask(asker, []byte("Hello"), 3*time.Second)
		if err != nil || string(reply) != "COMSYS" {
			t.Fatalf("%s: %q, %v; want the kernel's COMSYS", when, reply, err)
		}
	}
	answered("santad running in its namespace")
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	answered("santad stopped, its namespace gone")
	start()
	if !strings.Contains(d.Log(), "msg=restored services=2 rules=1") {
		t.Errorf("the second santad did not restore the service:\n%s", d.Log())
	}
	answered("santad restarted in a new namespace")
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	// SystemCallErrorNumber=EPERM: a refused call is an error, not a kill
	if strings.Contains(d.Log(), "operation not permitted") {
		t.Errorf("santad under the unit's filter was refused something:\n%s", d.Log())
	}
}
