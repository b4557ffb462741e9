package kubernetes

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

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
	needSantad(t)

	dir := t.TempDir()
	r := render(t, nil)
	c := container(t, find[*appsv1.DaemonSet](r, "r1-santad").Spec.Template.Spec, "santad")
	wrapper := withCapabilities(t, c, build(t, dir, "santad"))

	ns, sd := startSantad(t, "kcaps", wrapper, filepath.Join(dir, "run"), "-socket-group", "65534")
	checkRestricted(t, sd.PID())

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
	// santad's log reaches the test through a pipe: the line may come
	// after ATTACH's reply.
	adopted := regexp.MustCompile(`msg="connections adopted" .* adopted=1 skipped=0`)
	for deadline := time.Now().Add(5 * time.Second); !adopted.MatchString(sd.Log()); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("santad did not take over the accepted connection:\n%s", sd.Log())
		}
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

// needSantad skips a test that runs santad where it cannot run.
func needSantad(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("santad needs root")
	}
	if _, err := os.Stat(filepath.Join(repo, "internal/datapath/santa_bpfel.o")); err != nil {
		t.Skip("no BPF objects: run make build first")
	}
	santadtest.SweepStale()
}

// startSantad starts bin as santad in a network namespace of its own,
// with its socket and journal in dir and its pins named after suffix;
// args are more flags. Both go when the test ends.
func startSantad(t *testing.T, suffix, bin, dir string, args ...string) (*santadtest.Netns, *santadtest.Santad) {
	t.Helper()
	ns, err := santadtest.NewNetns(santadtest.NetnsName(suffix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Delete() })
	sd := santadtest.New(bin, ns, dir, santadtest.PinPath(suffix), args...)
	t.Cleanup(func() { sd.Close() })
	if err := sd.Start(); err != nil {
		t.Fatal(err)
	}
	return ns, sd
}

// build builds the main module's command cmd/NAME into dir.
func build(t *testing.T, dir, name string) string {
	t.Helper()
	cmd := exec.Command(santadtest.GoBin(), "build", "-o", dir+"/", "./cmd/"+name)
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", name, err, out)
	}
	return filepath.Join(dir, name)
}

// withCapabilities writes a script beside bin that runs it, as root, with
// container c's capabilities and no others (setpriv --bounding-set), and
// without privilege escalation if c forbids it: as the container runs it.
func withCapabilities(t *testing.T, c corev1.Container, bin string) string {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Fatalf("%s does not drop every capability", c.Name)
	}
	bounding := "-all"
	for _, capability := range sc.Capabilities.Add {
		bounding += ",+" + strings.ToLower(string(capability))
	}
	flags := "--bounding-set " + bounding
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		flags += " --no-new-privs"
	}
	wrapper := bin + "-caps"
	script := "#!/bin/sh\nexec setpriv " + flags + " -- " + bin + ` "$@"` + "\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return wrapper
}

// checkRestricted checks that process pid runs with a restricted bounding
// set: without CAP_DAC_OVERRIDE (bit 1), which root has and no container
// of the chart does.
func checkRestricted(t *testing.T, pid int) {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`CapBnd:\s+([0-9a-f]+)`).FindSubmatch(status)
	if m == nil {
		t.Fatalf("no CapBnd in\n%s", status)
	}
	bnd, err := strconv.ParseUint(string(m[1]), 16, 64)
	if err != nil || bnd&(1<<1) != 0 {
		t.Fatalf("bounding set %s: not restricted (%v)", m[1], err)
	}
}

// TestOffloadAgentWithTheChartsCapabilities runs santa-offload dns as the
// chart's node agent container would, with only its capabilities and no
// privilege escalation, next to a server of another uid (nobody): it must
// find the server's socket by the port and attach it (another user's
// /proc/PID/fd, pidfd_getfd).
func TestOffloadAgentWithTheChartsCapabilities(t *testing.T) {
	needSantad(t)
	dir := t.TempDir()
	r := render(t, map[string]any{"offloadAgents": []any{map[string]any{"name": "dns", "kind": "dns"}}})
	c := container(t, find[*appsv1.DaemonSet](r, "r1-offload-dns").Spec.Template.Spec, "santa-offload")
	agentBin := withCapabilities(t, c, build(t, dir, "santa-offload"))

	ns, sd := startSantad(t, "kagent", build(t, dir, "santad"), filepath.Join(dir, "run"))

	// The server: a UDP socket of nobody's, bound to the port.
	const port = "5353"
	server := ns.Command(context.Background(), "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
		"/usr/bin/python3", "-c", "import socket, time\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"+
			"s.bind(('127.0.0.1', "+port+"))\nprint('bound', flush=True)\ntime.sleep(60)\n")
	out, err := server.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Process.Kill(); server.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "bound\n" {
		t.Fatalf("the server did not bind: %q %v", line, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var log strings.Builder
	// 5353 is any user's to bind: the test's binds are trusted.
	agent := ns.Command(ctx, agentBin, "dns", "-port", port, "-uniform-answers", "-trusted-local-binds", "-socket", sd.Socket)
	agent.Stdout, agent.Stderr = &log, &log
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	defer agent.Wait()
	defer cancel()

	cl, err := client.Dial(sd.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		services, err := cl.Services()
		if err != nil {
			t.Fatal(err)
		}
		if len(services) == 1 && services[0].Manager == "santa-offload dns" && fmt.Sprint(services[0].Port) == port {
			checkRestricted(t, agent.Process.Pid) // nsenter and setpriv exec'd it by now
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent attached %+v within 10 s, not the server's socket; its log:\n%s", services, log.String())
		}
	}
}
