package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/santa-offload/santa/internal/offload/server"
)

// scanEnv makes the test binary scan as the memcached agent does: it binds
// a UDP socket and a TCP listener on one port, then looks for them with a
// Finder whose TCPPort is set (santa-offload memcached's), takes what it
// found as the agent does (Finder.Take: pidfd_open, a check of the
// holder, pidfd_getfd), and prints what it found and took or the error.
const scanEnv = "UNITFILTER_AGENT_SCAN"

func init() {
	if os.Getenv(scanEnv) == "" {
		return
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(0)
	}
	port := l.Addr().(*net.TCPAddr).Port
	u, err := net.ListenPacket("udp4", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		fmt.Println("udp:", err)
		os.Exit(0)
	}
	defer u.Close()
	f, err := server.NewFinder(server.Target{PID: os.Getpid(), Port: uint16(port), TCPPort: uint16(port)})
	if err != nil {
		fmt.Println("finder:", err)
		os.Exit(0)
	}
	_, fresh, err := f.Scan(nil)
	if err != nil {
		fmt.Println("scan:", err)
		os.Exit(0)
	}
	tcp, udp := 0, 0
	for _, s := range fresh {
		if s.TCP {
			tcp++
		} else {
			udp++
		}
		fd, err := f.Take(s)
		if err != nil {
			fmt.Println("take:", err)
			os.Exit(0)
		}
		syscall.Close(fd)
	}
	fmt.Printf("found and took tcp=%d udp=%d\n", tcp, udp)
	os.Exit(0)
}

// The memcached agent finds memcached's TCP listeners with a sock_diag
// dump (AF_NETLINK, NETLINK_SOCK_DIAG: internal/procsock/diag.go), but its
// unit's RestrictAddressFamilies= leaves AF_NETLINK out (and
// TestUnitFilter checks that it does): under the unit every scan fails,
// and the agent never attaches memcached.
func TestMemcachedAgentScansUnderItsUnit(t *testing.T) {
	requireTools(t)
	bin := build(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, unit := range []string{"", "santa-offload-memcached@.service"} {
		cmd := exec.Command(self, "-test.run=^$")
		if unit != "" {
			cmd = exec.Command(bin, filepath.Join("../../deploy", unit), self, "-test.run=^$")
		}
		cmd.Env = append(os.Environ(), scanEnv+"=1")
		out, err := cmd.CombinedOutput()
		if got := strings.TrimSpace(string(out)); err != nil || got != "found and took tcp=1 udp=1" {
			t.Errorf("the memcached agent's scan under %q: %v, %s; want both sockets found and taken", unit, err, out)
		}
	}
}
