package daemon

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/protocol"
)

// Who is an admin is decided from what the kernel recorded when the client
// connected. These tests connect from other processes, this test binary
// re-executed as a client (runClient) with credentials of its own, to a
// real socket that the server accepts on: they need root.

// clientEnv, when set, makes this test binary a client of the socket
// named by its first argument; the value is the mode:
//
//	hello     say HELLO, print "uid=U admin=A"
//	escalate  connect as nobody (uid and gid 65534, no groups), then become
//	          root again at the same pid, with every capability and in the
//	          group of the second argument, print "escalated", and wait for
//	          a line on stdin before going on as hello
const clientEnv = "SANTA_DAEMON_TEST_CLIENT"

const nobody = 65534

func runClient(mode string, args []string) int {
	var c *net.UnixConn
	var err error
	switch mode {
	case "hello":
		c, err = dial(args[0])
	case "escalate":
		c, err = dialThenEscalate(args[0], args[1])
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err == nil {
		err = hello(c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	return 0
}

func dial(path string) (*net.UnixConn, error) {
	return net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
}

// dialThenEscalate is the attack: the process that connects is nobody;
// the one that talks is the same process, root by then (as after exec of
// a setuid-root program). The saved uid stays 0 so that it can come back.
func dialThenEscalate(path, group string) (*net.UnixConn, error) {
	gid, err := strconv.Atoi(group)
	if err != nil {
		return nil, err
	}
	if err := syscall.Setgroups(nil); err != nil {
		return nil, err
	}
	if err := syscall.Setresgid(nobody, nobody, nobody); err != nil {
		return nil, err
	}
	if err := syscall.Setresuid(nobody, nobody, 0); err != nil {
		return nil, err
	}
	c, err := dial(path)
	if err != nil {
		return nil, err
	}
	if err := syscall.Setresuid(0, 0, 0); err != nil {
		return nil, err
	}
	if err := syscall.Setgroups([]int{gid}); err != nil {
		return nil, err
	}
	fmt.Println("escalated")
	_, err = bufio.NewReader(os.Stdin).ReadString('\n')
	return c, err
}

func hello(c *net.UnixConn) error {
	msg, err := protocol.Encode(1, 1, &protocol.Hello{MinVersion: 1, MaxVersion: 1, Client: "peer_test"})
	if err != nil {
		return err
	}
	if _, err := c.Write(msg); err != nil {
		return err
	}
	buf := make([]byte, protocol.MaxMessage)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	_, body, err := protocol.Decode(buf[:n])
	if err != nil {
		return err
	}
	r, ok := body.(*protocol.HelloReply)
	if !ok {
		return fmt.Errorf("HELLO gives %v", body)
	}
	fmt.Printf("uid=%d admin=%t\n", r.UID, r.Admin)
	return nil
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs clients with other credentials")
	}
}

// listen is a socket s accepts clients on once accept is called: an
// abstract one, which every user may connect to.
func (s *testServer) listen(t *testing.T) (path string, accept func()) {
	t.Helper()
	path = fmt.Sprintf("@santa-daemon-test/%d/%d", os.Getpid(), sockets.Add(1))
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return path, func() { go s.Accept(l) }
}

// clientCmd runs this test binary as a client of path in mode. It execs
// /proc/self/exe, which a process with other credentials can run although
// it may not enter the directory go test built it in.
func clientCmd(t *testing.T, attr *syscall.SysProcAttr, mode, path string, args ...string) *exec.Cmd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, "/proc/self/exe", append([]string{path}, args...)...)
	cmd.Env = append(os.Environ(), clientEnv+"="+mode)
	cmd.SysProcAttr = attr
	cmd.Stderr = os.Stderr
	return cmd
}

const adminGID = 4242

// sockets numbers the sockets of listen.
var sockets atomic.Int64

// A client that connected as nobody and is root with every capability and
// in the admin group by the time santad accepts and hears its HELLO is
// still not an admin: what it was at connect time is what it proved.
func TestAdminDecidedAtConnect(t *testing.T) {
	requireRoot(t)
	s := newTestServer(t, func(c *Config) { c.AdminGroup = strconv.Itoa(adminGID) })
	path, accept := s.listen(t)
	cmd := clientCmd(t, nil, "escalate", path, strconv.Itoa(adminGID))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(stdout)
	if line, err := out.ReadString('\n'); line != "escalated\n" {
		t.Fatalf("client says %q, %v", line, err)
	}
	// The connection waits in the backlog; its process now has what the
	// attack is after.
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nUid:\t0\t0\t0\t0\n", "\nGroups:\t4242 \n"} {
		if !strings.Contains(string(status), want) {
			t.Fatalf("the client did not escalate: no %q in its status:\n%s", want, status)
		}
	}
	const capNetAdmin = 12
	_, capEff, _ := strings.Cut(string(status), "\nCapEff:\t")
	if caps, err := strconv.ParseUint(capEff[:16], 16, 64); err != nil || caps&(1<<capNetAdmin) == 0 {
		t.Fatalf("the client did not gain CAP_NET_ADMIN: CapEff %.16s", capEff)
	}
	accept()
	stdin.Write([]byte("go on\n"))
	line, _ := out.ReadString('\n')
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if line != "uid=65534 admin=false\n" {
		t.Errorf("HELLO says %q; want uid 65534 and no admin", line)
	}
}

// Clients in the admin group when they connected are admins, by their gid
// or a supplementary group; others are not, container root included.
func TestAdminGroup(t *testing.T) {
	requireRoot(t)
	s := newTestServer(t, func(c *Config) { c.AdminGroup = strconv.Itoa(adminGID) })
	path, accept := s.listen(t)
	accept()
	as := func(uid, gid uint32, groups ...uint32) *syscall.SysProcAttr {
		return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: groups}}
	}
	// Root of a user namespace mapped to nobody, with every capability in
	// that namespace.
	container := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: nobody, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: nobody, Size: 1}},
		Credential:  &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true}}
	for _, tc := range []struct {
		name string
		attr *syscall.SysProcAttr
		want string
	}{
		{"root", nil, "uid=0 admin=true"},
		{"supplementary group", as(nobody, nobody, 100, adminGID), "uid=65534 admin=true"},
		{"primary group", as(nobody, adminGID), "uid=65534 admin=true"},
		{"other groups", as(nobody, nobody, 100, adminGID+1), "uid=65534 admin=false"},
		{"container root", container, "uid=65534 admin=false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := clientCmd(t, tc.attr, "hello", path).Output()
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(string(out)); got != tc.want {
				t.Errorf("HELLO says %q; want %q", got, tc.want)
			}
		})
	}
	// Without an admin group, no group makes a client an admin.
	plain := newTestServer(t, nil)
	path, accept = plain.listen(t)
	accept()
	out, err := clientCmd(t, as(nobody, adminGID, adminGID), "hello", path).Output()
	if got := strings.TrimSpace(string(out)); err != nil || got != "uid=65534 admin=false" {
		t.Errorf("without admin_group, HELLO says %q, %v", got, err)
	}
}
