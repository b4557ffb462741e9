// Package probe is the offload agent's probe socket: the one UDP socket
// through which the agent asks the server the queries it offloads. The data
// plane neither answers nor counts requests from its port (santad's
// learning setting ProbePort), so every reply comes from the server itself.
package probe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/santa-offload/santa/internal/netns"
)

// ErrTimeout is the error of an ask that got no reply in time.
var ErrTimeout = errors.New("no reply in time")

// Asker asks a server over UDP from a port of its own (*Socket; tests give
// fakes).
type Asker interface {
	Ask(ctx context.Context, dst netip.AddrPort, query []byte, timeout time.Duration) ([]byte, error)
	Port() uint16
	Sent() uint64
}

// Socket is a dual-stack UDP socket bound to an ephemeral port. Asks run
// concurrently, at most a fixed number at once; replies find their ask by
// transaction id and source address.
type Socket struct {
	conn  *net.UDPConn
	port  uint16
	slots chan struct{}
	sent  atomic.Uint64
	done  chan struct{}

	mu      sync.Mutex
	pending map[uint16]*ask
}

type ask struct {
	dst   netip.AddrPort
	reply chan []byte
}

// MaxConcurrency bounds concurrent asks: each needs a transaction id of
// its own, and there are 65536.
const MaxConcurrency = 4096

// Open opens the socket in the network namespace at nsPath ("" for this
// one), allowing concurrency asks at once.
func Open(nsPath string, concurrency int) (*Socket, error) {
	if concurrency < 1 || concurrency > MaxConcurrency {
		return nil, fmt.Errorf("probe concurrency %d is not in 1..%d", concurrency, MaxConcurrency)
	}
	var conn *net.UDPConn
	err := netns.Run(nsPath, func() (err error) {
		// "udp" on the unspecified IPv6 address is a dual-stack socket:
		// IPv4 destinations are reached as v4-mapped addresses.
		conn, err = net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv6unspecified})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("probe socket: %w", err)
	}
	s := &Socket{conn: conn, port: uint16(conn.LocalAddr().(*net.UDPAddr).Port),
		slots: make(chan struct{}, concurrency), done: make(chan struct{}), pending: map[uint16]*ask{}}
	go s.read()
	return s, nil
}

// Port is the socket's local port.
func (s *Socket) Port() uint16 { return s.port }

// Sent is the number of queries sent so far.
func (s *Socket) Sent() uint64 { return s.sent.Load() }

// Close closes the socket; asks in flight fail.
func (s *Socket) Close() error {
	err := s.conn.Close()
	<-s.done
	return err
}

// Ask sends query (a UDP payload) to dst with a fresh random transaction
// id and returns the reply, which carries that id; ErrTimeout if none came
// within timeout.
func (s *Socket) Ask(ctx context.Context, dst netip.AddrPort, query []byte, timeout time.Duration) ([]byte, error) {
	if len(query) < 2 {
		return nil, fmt.Errorf("a %d-byte query has no transaction id", len(query))
	}
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.slots }()
	a := &ask{dst: unmap(dst), reply: make(chan []byte, 1)}
	id := s.register(a)
	defer s.unregister(id, a)
	msg := make([]byte, len(query))
	copy(msg, query)
	binary.BigEndian.PutUint16(msg, id)
	if _, err := s.conn.WriteToUDPAddrPort(msg, dst); err != nil {
		return nil, fmt.Errorf("ask %v: %w", dst, err)
	}
	s.sent.Add(1)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case r := <-a.reply:
		return r, nil
	case <-timer.C:
		return nil, fmt.Errorf("ask %v: %w", dst, ErrTimeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.done:
		return nil, net.ErrClosed
	}
}

// register gives a an id no other ask in flight has. Slots bound the asks
// in flight well below the ids there are, so the search ends quickly.
func (s *Socket) register(a *ask) uint16 {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		id := uint16(rand.Uint32())
		if s.pending[id] == nil {
			s.pending[id] = a
			return id
		}
	}
}

// unregister frees a's id, unless its reply freed it and another ask has
// it now.
func (s *Socket) unregister(id uint16, a *ask) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending[id] == a {
		delete(s.pending, id)
	}
}

// read hands each reply to the ask of its id, if it comes from where that
// ask went; anything else (a late reply, a stranger's packet) is dropped.
func (s *Socket) read() {
	defer close(s.done)
	buf := make([]byte, 65536)
	for {
		n, from, err := s.conn.ReadFromUDPAddrPort(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil || n < 2 {
			continue
		}
		id := binary.BigEndian.Uint16(buf)
		s.mu.Lock()
		a := s.pending[id]
		if a != nil && a.dst == unmap(from) {
			delete(s.pending, id)
			a.reply <- append([]byte(nil), buf[:n]...)
		}
		s.mu.Unlock()
	}
}

func unmap(a netip.AddrPort) netip.AddrPort { return netip.AddrPortFrom(a.Addr().Unmap(), a.Port()) }
