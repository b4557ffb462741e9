package procsock

import (
	"net"
	"net/netip"
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
	// Other test binaries open and close listeners meanwhile, so the dump
	// is bracketed by two reads of /proc: every listener in both must be
	// in the dump as /proc lists it, and the dump lists nothing /proc saw
	// in neither.
	before := listeners(t)
	got, err := readListeningTCP()
	if err != nil {
		t.Fatal(err)
	}
	after := listeners(t)
	dumped := map[Socket]bool{}
	for _, s := range got {
		if dumped[s] {
			t.Errorf("sock_diag lists %v twice", s)
		}
		dumped[s] = true
	}
	for s := range before {
		if after[s] && !dumped[s] {
			t.Errorf("/proc lists %v throughout; sock_diag does not (it lists %v)", s, got)
		}
	}
	for _, s := range got {
		if !before[s] && !after[s] {
			t.Errorf("sock_diag lists %v; /proc never does (it lists %v, then %v)", s, before, after)
		}
	}
	for _, port := range ports {
		found, err := ListeningTCP("", port, netip.Addr{})
		if err != nil || len(found) != 1 || found[0].Local.Port() != port {
			t.Fatalf("ListeningTCP(port %d) = %v, %v; want the one listener", port, found, err)
		}
	}
}

// listeners reads the listening TCP sockets /proc/net/tcp{,6} lists.
func listeners(t *testing.T) map[Socket]bool {
	t.Helper()
	proc, err := readTables("tcp")
	if err != nil {
		t.Fatal(err)
	}
	found := map[Socket]bool{}
	for _, s := range keep(proc, func(s Socket) bool { return s.State == TCPListen }) {
		s.RecvQ = 0 // /proc's rx_queue; a listener's is not read
		found[s] = true
	}
	return found
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
