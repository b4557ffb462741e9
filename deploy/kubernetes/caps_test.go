package kubernetes

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/santadtest"
	"github.com/santa-offload/santa/rule"
)

// repo is the main module's directory.
const repo = "../.."

// TestSantadWithTheChartsCapabilities runs santad as the chart's container
// would: root with exactly the capabilities the DaemonSet adds (setpriv
// --bounding-set: no DAC_OVERRIDE, no other), in a network namespace. It
// must start with a socket group (CHOWN), load and attach the data plane,
// answer a UDP rule, take over a TCP listener's accepted connection from
// another process (SYS_PTRACE, DAC_READ_SEARCH), and restart over its
// pins with the TCP handover. Needs root and the BPF objects of make
// build; CI's make test builds them first.
func TestSantadWithTheChartsCapabilities(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("santad needs root")
	}
	if _, err := os.Stat(filepath.Join(repo, "internal/datapath/santa_bpfel.o")); err != nil {
		t.Skip("no BPF objects: run make build first")
	}
	santadtest.SweepStale()

	r := render(t, nil)
	c := container(t, find[*appsv1.DaemonSet](r, "r1-santad").Spec.Template.Spec, "santad")
	bounding := "-all"
	for _, capability := range c.SecurityContext.Capabilities.Add {
		bounding += ",+" + strings.ToLower(string(capability))
	}

	dir := t.TempDir()
	build := exec.Command(santadtest.GoBin(), "build", "-o", dir+"/", "./cmd/santad")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building santad: %v\n%s", err, out)
	}
	// nsenter (santadtest) runs the wrapper, which runs santad with only
	// the chart's capabilities.
	wrapper := filepath.Join(dir, "santad-caps")
	script := "#!/bin/sh\nexec setpriv --bounding-set " + bounding + " -- " + filepath.Join(dir, "santad") + ` "$@"` + "\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}

	ns, err := santadtest.NewNetns(santadtest.NetnsName("kcaps"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Delete() })
	sd := santadtest.New(wrapper, ns, filepath.Join(dir, "run"), santadtest.PinPath("kcaps"), "-socket-group", "65534")
	t.Cleanup(func() { sd.Close() })
	if err := sd.Start(); err != nil {
		t.Fatal(err)
	}
	if status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", sd.PID())); err != nil || !regexp.MustCompile(`CapEff:\s+0*[1-9a-f]`).Match(status) {
		t.Fatalf("santad's capabilities: %v\n%s", err, status)
	}

	// A UDP server, its rule, and the kernel's answer.
	var server *net.UDPConn
	var listener *net.TCPListener
	var accepted, dialed net.Conn
	if err := ns.Do(func() error {
		var err error
		if server, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
			return err
		}
		// Plain TCP: Go's listeners are Multipath TCP by default, which
		// santad refuses.
		var lc net.ListenConfig
		lc.SetMultipathTCP(false)
		l, err := lc.Listen(context.Background(), "tcp4", "127.0.0.1:0")
		if err != nil {
			return err
		}
		listener = l.(*net.TCPListener)
		if dialed, err = net.Dial("tcp4", listener.Addr().String()); err != nil {
			return err
		}
		accepted, err = listener.Accept()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	defer listener.Close()
	defer dialed.Close()
	defer accepted.Close()

	cl, err := client.Dial(sd.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	svc, err := cl.Attach(server)
	if err != nil {
		t.Fatal(err)
	}
	r1 := rule.Rule{Condition: rule.Condition{Pattern: []byte("Hello")}, Processors: []rule.Processor{rule.Put(0, []byte("COMSYS"))}, ReplyLen: 6}
	if _, err := cl.AddRules(svc.ServiceID, []rule.Rule{r1}); err != nil {
		t.Fatal(err)
	}
	ask := func() {
		t.Helper()
		var u *net.UDPConn
		if err := ns.Do(func() (err error) { u, err = net.DialUDP("udp4", nil, server.LocalAddr().(*net.UDPAddr)); return err }); err != nil {
			t.Fatal(err)
		}
		defer u.Close()
		if got, err := santadtest.Ask(u, []byte("Hello"), 2*time.Second); err != nil || string(got) != "COMSYS" {
			t.Fatalf("reply %q, %v; want the kernel's COMSYS", got, err)
		}
	}
	ask()

	// The TCP listener's accepted connection is this process's: santad
	// takes it from here (/proc/PID/fd, pidfd_getfd).
	if _, err := cl.Attach(listener); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`msg="connections adopted" .* adopted=1 skipped=0`).MatchString(sd.Log()) {
		t.Fatalf("santad did not take over the accepted connection:\n%s", sd.Log())
	}

	// A restart takes the pins and the connection over.
	cl.Close()
	if err := sd.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := sd.Start(); err != nil {
		t.Fatal(err)
	}
	ask()
	if !strings.Contains(sd.Log(), "msg=restored services=2 rules=1") ||
		!strings.Contains(sd.Log(), `msg="took over the earlier run's TCP connections" moved=1`) {
		t.Errorf("the restart did not restore both services and the connection:\n%s", sd.Log())
	}
	if strings.Contains(sd.Log(), "level=ERROR") || strings.Contains(sd.Log(), "level=WARN") {
		t.Errorf("santad complained:\n%s", sd.Log())
	}
	if err := sd.Stop(); err != nil {
		t.Fatal(err)
	}
}
