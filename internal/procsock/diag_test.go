package procsock

import (
	"net"
	"net/netip"
	"slices"
	"testing"
)

// sock_diag lists exactly the listening TCP sockets /proc/net/tcp{,6}
// lists, inodes and addresses alike; connections and UDP sockets are not.
func TestListeningTCPAsProc(t *testing.T) {
	var ports []uint16
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		c, err := net.Dial("tcp", l.Addr().String()) // an established pair beside it
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		u, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer u.Close()
		ports = append(ports, uint16(l.Addr().(*net.TCPAddr).Port))
	}
	proc, err := readTables("tcp")
	if err != nil {
		t.Fatal(err)
	}
	want := keep(proc, func(s Socket) bool { return s.State == TCPListen })
	got, err := readListeningTCP()
	if err != nil {
		t.Fatal(err)
	}
	byInode := func(a, b Socket) int { return int(a.Inode) - int(b.Inode) }
	slices.SortFunc(want, byInode)
	slices.SortFunc(got, byInode)
	for i := range want {
		want[i].RecvQ = 0 // /proc's rx_queue; a listener's is not read
	}
	if !slices.Equal(got, want) {
		t.Fatalf("sock_diag lists %v; /proc lists %v", got, want)
	}
	for _, port := range ports {
		found, err := ListeningTCP("", port, netip.Addr{})
		if err != nil || len(found) != 1 || found[0].Local.Port() != port {
			t.Fatalf("ListeningTCP(port %d) = %v, %v; want the one listener", port, found, err)
		}
	}
}

// The scan an agent makes each second, both ways.
func BenchmarkListeningTCP(b *testing.B) {
	b.Run("sock_diag", func(b *testing.B) {
		for b.Loop() {
			if _, err := readListeningTCP(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("proc", func(b *testing.B) {
		for b.Loop() {
			if _, err := readTables("tcp"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
