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

// Socket is a line of /proc/net/{udp,tcp}{,6}: a socket's local address,
// its state (TCP's numbering, 1 established, 10 listening), its inode,
// which names it in /proc/PID/fd, and its receive queue (for a TCP
// connection, the bytes received and not yet read: ss's Recv-Q).
type Socket struct {
	Local netip.AddrPort
	State int
	UID   uint32 // the socket's owner (sk_uid), in the reader's user namespace
	Inode uint64
	RecvQ uint32
}

// TCP states in /proc/net/tcp.
const (
	TCPEstablished = 1
	TCPListen      = 10
)

// readTables reads the sockets of a protocol ("udp" or "tcp") of the
// calling thread's network namespace, IPv4 and IPv6. /proc/thread-self,
// not /proc/self, because a thread may have left the process's namespace
// (netns.Run).
func readTables(proto string) ([]Socket, error) {
	var all []Socket
	for _, name := range []string{"/proc/thread-self/net/" + proto, "/proc/thread-self/net/" + proto + "6"} {
		f, err := os.Open(name)
		if errors.Is(err, fs.ErrNotExist) { // no IPv6
			continue
		}
		if err != nil {
			return nil, err
		}
		sockets, err := parseTable(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		all = append(all, sockets...)
	}
	return all, nil
}

// parseTable parses a /proc/net/{udp,tcp}{,6} table:
//
//	sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ...
//	0: 0100007F:1E61 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 31452 ...
func parseTable(r io.Reader) ([]Socket, error) {
	var sockets []Socket
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
		state, err := strconv.ParseUint(f[3], 16, 8)
		if err != nil {
			return nil, fmt.Errorf("line %d: state %q: %w", n, f[3], err)
		}
		_, rxHex, _ := strings.Cut(f[4], ":")
		recvQ, err := strconv.ParseUint(rxHex, 16, 32)
		if err != nil {
			return nil, fmt.Errorf("line %d: queues %q: %w", n, f[4], err)
		}
		uid, err := strconv.ParseUint(f[7], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("line %d: uid %q: %w", n, f[7], err)
		}
		inode, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: inode %q: %w", n, f[9], err)
		}
		sockets = append(sockets, Socket{Local: local, State: int(state), UID: uint32(uid), Inode: inode, RecvQ: uint32(recvQ)})
	}
	return sockets, lines.Err()
}

// parseProcAddr parses an address of /proc/net/{udp,tcp}{,6}: "ADDR:PORT" in
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
func BoundUDP(nsPath string, port uint16, addr netip.Addr) ([]Socket, error) {
	return find(nsPath, "udp", func(s Socket) bool { return s.boundTo(port, addr) })
}

// boundTo is whether the socket's local port is port, and its address
// addr if that is valid.
func (s Socket) boundTo(port uint16, addr netip.Addr) bool {
	return s.Local.Port() == port && (!addr.IsValid() || s.Local.Addr() == addr)
}

// ListeningTCP is the listening TCP sockets of the network namespace at
// nsPath bound to port, and to addr if it is valid (through sock_diag:
// diag.go).
func ListeningTCP(nsPath string, port uint16, addr netip.Addr) ([]Socket, error) {
	var all []Socket
	err := netns.Run(nsPath, func() (err error) {
		all, err = readListeningTCP()
		return err
	})
	if err != nil {
		return nil, err
	}
	return keep(all, func(s Socket) bool { return s.State == TCPListen && s.boundTo(port, addr) }), nil
}

// EstablishedTCP is the established TCP connections of the network
// namespace at nsPath whose local port is port: a listener's connections.
func EstablishedTCP(nsPath string, port uint16) ([]Socket, error) {
	return find(nsPath, "tcp", func(s Socket) bool { return s.State == TCPEstablished && s.Local.Port() == port })
}

func find(nsPath, proto string, pick func(Socket) bool) ([]Socket, error) {
	var all []Socket
	err := netns.Run(nsPath, func() (err error) {
		all, err = readTables(proto)
		return err
	})
	if err != nil {
		return nil, err
	}
	return keep(all, pick), nil
}

// keep is the sockets of all that pick picks.
func keep(all []Socket, pick func(Socket) bool) []Socket {
	var found []Socket
	for _, s := range all {
		if pick(s) {
			found = append(found, s)
		}
	}
	return found
}
