package udpask_test

import (
	"bytes"
	"encoding/binary"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/pkttest"
	"github.com/santa-offload/santa/internal/udpask"
)

// Over loopback, whose TX checksum offload is fixed on, a plain write
// leaves the UDP checksum partial (the pseudo-header seed, which does not
// verify) and WriteFullChecksum's datagram carries the full one: as read
// by a raw socket, which gets the datagram's bytes as they were sent.
func TestWriteFullChecksum(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a raw socket reads the checksums")
	}
	raw, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_UDP)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(raw)
	if err := unix.SetsockoptTimeval(raw, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 2}); err != nil {
		t.Fatal(err)
	}
	sink, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	conn, err := net.DialUDP("udp4", nil, sink.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, full := range []bool{false, true} {
		payload := []byte("a request, full checksum: " + map[bool]string{false: "no", true: "yes"}[full])
		if full {
			err = udpask.WriteFullChecksum(conn, payload)
		} else {
			_, err = conn.Write(payload)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := verifies(t, raw, uint16(sink.LocalAddr().(*net.UDPAddr).Port), payload); got != full {
			t.Errorf("full checksum %v: the datagram's checksum verifies: %v", full, got)
		}
	}
}

// verifies reads from raw the IPv4 datagram to port that carries payload
// (others on the host's loopback are skipped) and reports whether its UDP
// checksum verifies.
func verifies(t *testing.T, raw int, port uint16, payload []byte) bool {
	t.Helper()
	buf := make([]byte, 65536)
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		n, _, err := unix.Recvfrom(raw, buf, 0)
		if err != nil {
			t.Fatalf("reading the datagram from the raw socket: %v", err)
		}
		ihl := int(buf[0]&0xf) * 4
		udp := buf[ihl:n]
		if len(udp) < 8 || binary.BigEndian.Uint16(udp[2:]) != port || !bytes.Equal(udp[8:], payload) {
			continue
		}
		pseudo := append(append([]byte{}, buf[12:20]...), 0, unix.IPPROTO_UDP, udp[4], udp[5])
		return pkttest.OnesSum(append(pseudo, udp...)) == 0xffff
	}
	t.Fatal("the datagram did not come")
	return false
}
