// Package daemon tests santad from outside: the real binary, in a network
// namespace of its own on lo, real UDP sockets, the Go client, and client
// processes running as another user (this test binary in a helper mode).
// The tests need root (namespaces, BPF, setpriv), nsenter and setpriv, and
// cgroup v2 with the sock_release hook (Linux 5.9); they skip without root.
package daemon

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/santadtest"
	"github.com/santa-offload/santa/rule"
)

// shared is a directory every user may enter: santad, a copy of this test
// binary for the helpers, and each test's socket live below it.
var shared, santadBin, selfBin string

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(runHelper(os.Args[1:]))
	}
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if os.Geteuid() == 0 {
		santadtest.SweepStale()
		var err error
		if shared, err = os.MkdirTemp("", "santa-daemon-test-"); err == nil {
			defer os.RemoveAll(shared)
			err = os.Chmod(shared, 0o755)
		}
		if err == nil {
			santadBin, err = santadtest.Build(shared)
		}
		if err == nil {
			selfBin, err = copyExecutable(filepath.Join(shared, "daemon.test"))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// copyExecutable copies this binary where the helpers' user can run it.
func copyExecutable(to string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	in, err := os.Open(self)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return "", err
	}
	return to, out.Close()
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces, loads BPF programs and runs clients as another user (run go test as root)")
	}
	for _, tool := range []string{"ip", "nsenter", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s on PATH", tool)
		}
	}
}

// env is a santad in a network namespace of its own.
type env struct {
	ns *santadtest.Netns
	d  *santadtest.Santad
}

// newEnv starts santad serving lo in a new namespace named after suffix (a
// few lowercase letters). config, unless empty, is its configuration file;
// args are more flags. Cleanup kills santad and removes the namespace, the
// pins and the files.
func newEnv(t *testing.T, suffix, config string, args ...string) *env {
	t.Helper()
	e := prepareEnv(t, suffix, config, args...)
	if err := e.d.Start(); err != nil {
		t.Fatal(err)
	}
	return e
}

// prepareEnv is newEnv without starting santad.
func prepareEnv(t *testing.T, suffix, config string, args ...string) *env {
	t.Helper()
	requireRoot(t)
	ns, err := santadtest.NewNetns(santadtest.NetnsName(suffix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ns.Delete(); err != nil {
			t.Error(err)
		}
	})
	dir, err := os.MkdirTemp(shared, suffix)
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if config != "" {
		path := filepath.Join(dir, "santad.json")
		if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-config", path)
	}
	d := santadtest.New(santadBin, ns, dir, santadtest.PinPath(suffix), args...)
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("santad's log:\n%s", d.Log())
		}
	})
	return &env{ns: ns, d: d}
}

// client connects to santad as this process (root: an admin).
func (e *env) client(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.Dial(e.d.Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// listenUDP is a UDP socket bound to 127.0.0.1 in the namespace, an
// application's socket that never reads: every answer comes from the
// kernel.
func (e *env) listenUDP(t *testing.T) *net.UDPConn {
	t.Helper()
	var u *net.UDPConn
	err := e.ns.Do(func() (err error) {
		u, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	return u
}

// attachedUDP is a client of santad with one service: a listenUDP socket,
// attached.
func (e *env) attachedUDP(t *testing.T) (*client.Client, *net.UDPConn, client.ServiceInfo) {
	t.Helper()
	c := e.client(t)
	sock := e.listenUDP(t)
	svc, err := c.Attach(sock)
	if err != nil {
		t.Fatal(err)
	}
	return c, sock, svc
}

// dialUDP is a UDP client of port on 127.0.0.1 in the namespace.
func (e *env) dialUDP(t *testing.T, port uint16) *net.UDPConn {
	t.Helper()
	var u *net.UDPConn
	err := e.ns.Do(func() (err error) {
		u, err = net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	return u
}

func portOf(u *net.UDPConn) uint16 { return u.LocalAddr().(*net.UDPAddr).AddrPort().Port() }

// who a client process runs as: uid and gid uid, with the supplementary
// groups groups (setpriv's comma-separated gids; "": none), and no
// capabilities.
type who struct {
	uid    int
	groups string
}

// nobody is a client that is not an admin.
var nobody = who{uid: 65534}

// helper runs this test binary in helper mode in the namespace, as nobody,
// with files as descriptors 3, 4, ...; args are the mode and its arguments.
func (e *env) helper(ctx context.Context, files []*os.File, args ...string) *exec.Cmd {
	return e.helperAs(ctx, nobody, files, args...)
}

// helperAs is helper as w.
func (e *env) helperAs(ctx context.Context, w who, files []*os.File, args ...string) *exec.Cmd {
	cmd := e.as(ctx, w, selfBin, append([]string{e.d.Socket}, args...)...)
	cmd.Env = append(cmd.Env, helperEnv+"=1")
	cmd.ExtraFiles = files
	return cmd
}

// asNobody runs name in the namespace as nobody.
func (e *env) asNobody(ctx context.Context, name string, args ...string) *exec.Cmd {
	return e.as(ctx, nobody, name, args...)
}

// as runs name in the namespace as w.
func (e *env) as(ctx context.Context, w who, name string, args ...string) *exec.Cmd {
	groups := "--clear-groups"
	if w.groups != "" {
		groups = "--groups=" + w.groups
	}
	id := strconv.Itoa(w.uid)
	argv := append([]string{"--reuid=" + id, "--regid=" + id, groups, "--", name}, args...)
	cmd := e.ns.Command(ctx, "setpriv", argv...)
	cmd.Env = os.Environ()
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

var pingRule = rule.Rule{
	Condition:  rule.Condition{Pattern: []byte("ping")},
	Processors: []rule.Processor{rule.Put(0, []byte("pong"))},
	ReplyLen:   4,
}
