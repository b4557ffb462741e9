// Package procsock finds sockets of running processes through /proc and
// takes copies of them: how santactl attaches a server by its port, and how
// the benchmarks give Santa a real server's socket.
package procsock

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/santa-offload/santa/internal/netns"
)

// UDPSocket is a line of /proc/net/udp or udp6: a socket's local address
// and its inode, which names it in /proc/PID/fd.
type UDPSocket struct {
	Local netip.AddrPort
	Inode uint64
}

// readUDPTables reads the UDP sockets of the calling thread's network
// namespace, IPv4 and IPv6. /proc/thread-self, not /proc/self, because a
// thread may have left the process's namespace (netns.Run).
func readUDPTables() ([]UDPSocket, error) {
	var all []UDPSocket
	for _, name := range []string{"/proc/thread-self/net/udp", "/proc/thread-self/net/udp6"} {
		f, err := os.Open(name)
		if errors.Is(err, fs.ErrNotExist) { // no IPv6
			continue
		}
		if err != nil {
			return nil, err
		}
		sockets, err := parseUDPTable(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		all = append(all, sockets...)
	}
	return all, nil
}

// parseUDPTable parses a /proc/net/udp{,6} table:
//
//	sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ...
//	0: 0100007F:1E61 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 31452 ...
func parseUDPTable(r io.Reader) ([]UDPSocket, error) {
	var sockets []UDPSocket
	lines := bufio.NewScanner(r)
	lines.Scan() // the header
	for n := 2; lines.Scan(); n++ {
		f := strings.Fields(lines.Text())
		if len(f) < 10 {
			return nil, fmt.Errorf("line %d has %d fields, want at least 10", n, len(f))
		}
		local, err := parseProcAddr(f[1])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		inode, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: inode %q: %w", n, f[9], err)
		}
		sockets = append(sockets, UDPSocket{Local: local, Inode: inode})
	}
	return sockets, lines.Err()
}

// parseProcAddr parses an address of /proc/net/udp{,6}: "ADDR:PORT" in
// hex, where the address is 32-bit words, each printed as the number its
// bytes make in the host's byte order, and the port is a plain number.
func parseProcAddr(s string) (netip.AddrPort, error) {
	addrHex, portHex, ok := strings.Cut(s, ":")
	port, err := strconv.ParseUint(portHex, 16, 16)
	if !ok || err != nil || (len(addrHex) != 8 && len(addrHex) != 32) {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	words, err := hex.DecodeString(addrHex)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	b := make([]byte, 0, len(words))
	for w := 0; w < len(words); w += 4 {
		b = binary.NativeEndian.AppendUint32(b, binary.BigEndian.Uint32(words[w:]))
	}
	addr, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(addr, uint16(port)), nil
}

// BoundUDP is the UDP sockets of the network namespace at nsPath (this one
// for "") bound to port, and to addr if it is valid.
func BoundUDP(nsPath string, port uint16, addr netip.Addr) ([]UDPSocket, error) {
	var all []UDPSocket
	err := netns.Run(nsPath, func() (err error) {
		all, err = readUDPTables()
		return err
	})
	if err != nil {
		return nil, err
	}
	var bound []UDPSocket
	for _, s := range all {
		if s.Local.Port() == port && (!addr.IsValid() || s.Local.Addr() == addr) {
			bound = append(bound, s)
		}
	}
	return bound, nil
}
