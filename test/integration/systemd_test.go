package integration

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/santadtest"
)

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
	requireRoot(t)
	santadtest.SweepStale()
	ns, err := santadtest.NewNetns(santadtest.NetnsName("sysd"))
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Delete()
	dir := t.TempDir()
	bin, err := santadtest.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
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
