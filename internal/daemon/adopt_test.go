package daemon

import (
	"net"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/model"
)

// adopted records the connections AdoptConnections hands over.
type adopted []model.SocketInfo

func (a *adopted) AdoptConnection(_ model.ServiceID, fd int) error {
	info, err := model.InspectSocket(fd)
	if err != nil {
		return err
	}
	*a = append(*a, info)
	return nil
}

// Another uid's connection that only shares the listener's port is not
// adopted for a client that is not an admin: with SO_REUSEADDR, root's
// outgoing connection from port P and nobody's listener on *:P coexist,
// and before adoption checked the owner, nobody's ATTACH of its listener
// put root's connection under nobody's rules.
func TestAdoptOnlyTheOwnersConnections(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: gives sockets to another uid and takes them from their process")
	}
	// Root's connection: from 127.0.0.1:P to a peer.
	peer, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	go func() {
		for {
			c, err := peer.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	rootConn := tcpSocket(t)
	bind(t, rootConn, [4]byte{127, 0, 0, 1}, 0)
	sa, err := unix.Getsockname(rootConn)
	if err != nil {
		t.Fatal(err)
	}
	port := sa.(*unix.SockaddrInet4).Port
	peerPort := peer.Addr().(*net.TCPAddr).Port
	if err := unix.Connect(rootConn, &unix.SockaddrInet4{Port: peerPort, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}

	// nobody's listener on *:P, and a connection it accepts. The sockets
	// are made here, as root; fchown gives them the owner they would have
	// had in nobody's process.
	listener := tcpSocket(t)
	bind(t, listener, [4]byte{}, port)
	if err := unix.Listen(listener, 8); err != nil {
		t.Fatal(err)
	}
	client := tcpSocket(t)
	if err := unix.Connect(client, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	accepted, _, err := unix.Accept(listener)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(accepted)
	for _, fd := range []int{listener, accepted} {
		if err := unix.Fchown(fd, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	info, err := model.InspectSocket(listener)
	if err != nil {
		t.Fatal(err)
	}
	acceptedInfo, err := model.InspectSocket(accepted)
	if err != nil {
		t.Fatal(err)
	}

	var dp adopted
	got, err := AdoptConnections(&dp, 1, info, "", 65534)
	if err != nil {
		t.Fatal(err)
	}
	if got.Adopted != 1 || len(dp) != 1 || dp[0].Cookie != acceptedInfo.Cookie ||
		len(got.Skipped) != 1 || !strings.Contains(got.Skipped[0].Error(), "owned by uid 0, not by uid 65534") {
		t.Fatalf("adopted %d, skipped %v; want nobody's accepted connection adopted and root's skipped", got.Adopted, got.Skipped)
	}
	// An admin (root) may take both, as it may attach any socket.
	dp = nil
	if got, err = AdoptConnections(&dp, 1, info, "", model.AnyUID); err != nil || got.Adopted != 2 || len(dp) != 2 {
		t.Fatalf("an admin adopted %+v, %v; want both connections", got, err)
	}
}

// tcpSocket is an IPv4 TCP socket with SO_REUSEADDR; cleanup closes it.
func tcpSocket(t *testing.T) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		t.Fatal(err)
	}
	return fd
}

func bind(t *testing.T, fd int, addr [4]byte, port int) {
	t.Helper()
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: addr}); err != nil {
		t.Fatal(err)
	}
}
