package cli

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// binderEnv makes the test binary another user's process that binds
// 127.0.0.1:PORT beside the server (SO_REUSEADDR, as BIND and memcached
// set on theirs), says "bound", and holds the socket until stdin closes.
const binderEnv = "SANTACTL_TEST_BINDER"

func init() {
	port := os.Getenv(binderEnv)
	if port == "" {
		return
	}
	p, _ := strconv.Atoi(port)
	fd, err := reuseUDP(p)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println("bound")
	io.Copy(io.Discard, os.Stdin)
	unix.Close(fd)
	os.Exit(0)
}

// reuseUDP binds a UDP socket with SO_REUSEADDR to 127.0.0.1:port.
func reuseUDP(port int) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// santactl attach -port (root) attaches every UDP socket bound to the
// port, whoever holds it. Any local user may bind the port beside the
// server (with SO_REUSEADDR, or on loopback beside a wildcard; for a port
// from ip_unprivileged_port_start up, with no privilege at all), and
// root's santactl then hands that user's socket to santad as a root-owned
// service: the offload agents refuse exactly this ("sockets ... held by
// processes of more than one user", internal/offload/server.oneUser).
func TestAttachPortRefusesAnotherUsersSocket(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("attach -port needs root, and the other user's process setuid")
	}
	server, err := reuseUDP(0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(server)
	sa, _ := unix.Getsockname(server)
	port := sa.(*unix.SockaddrInet4).Port
	serverCookie, _ := unix.GetsockoptUint64(server, unix.SOL_SOCKET, unix.SO_COOKIE)

	// The other user's process: this test binary, copied where uid 65534
	// may run it.
	dir, err := os.MkdirTemp("", "santactl-users")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	self, _ := os.Executable()
	bin := filepath.Join(dir, "binder")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), binderEnv+"="+strconv.Itoa(port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}, Pdeathsig: syscall.SIGKILL}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "bound\n" {
		t.Fatalf("the other user's process: %q", line)
	}

	f, path := newFake(t)
	out, errOut, code := santactl(t, path, "attach", "-port", strconv.Itoa(port))
	f.mu.Lock()
	cookies := slices.Clone(f.cookies)
	f.mu.Unlock()
	for _, c := range cookies {
		if c != serverCookie {
			t.Errorf("santad was given uid 65534's socket (cookie %d) beside the server's (%d): exit %d\n%s%s",
				c, serverCookie, code, out, errOut)
		}
	}
	if code == 0 || len(cookies) != 0 || !strings.Contains(errOut, "more than one user") || !strings.Contains(errOut, "uid 65534") {
		t.Errorf("exit %d, %d sockets attached; want a refusal naming the users, nothing attached:\n%s%s", code, len(cookies), out, errOut)
	}
}
