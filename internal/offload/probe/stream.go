package probe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/santa-offload/santa/internal/netns"
)

// ErrNoStream is the error of an ask over TCP that could not be sent: the
// server does not take connections, or closed one with the ask in flight.
// The caller may ask over UDP instead.
var ErrNoStream = errors.New("no TCP connection to the server")

// Streams asks servers over TCP (DNS over TCP, RFC 1035 4.2.2 and RFC
// 7766: each message after a 2-byte length), on one persistent connection
// per server address, with asks pipelined: many in flight at once, replies
// found by transaction id in whatever order they come. The agent asks
// zone serials this way because a server's TCP connections do not share
// the receive queue of its UDP socket, which overflows when the server is
// overloaded. A connection the server closed is dialled again at the next
// ask.
type Streams struct {
	nsPath string
	sent   atomic.Uint64

	mu     sync.Mutex
	conns  map[netip.AddrPort]*stream
	closed bool
}

// OpenStreams makes TCP connections in the network namespace at nsPath
// ("" for this one) as they are needed.
func OpenStreams(nsPath string) *Streams {
	return &Streams{nsPath: nsPath, conns: map[netip.AddrPort]*stream{}}
}

// Sent is the number of queries sent so far.
func (s *Streams) Sent() uint64 { return s.sent.Load() }

// Close closes every connection; asks in flight fail.
func (s *Streams) Close() error {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = map[netip.AddrPort]*stream{}
	s.mu.Unlock()
	for _, c := range conns {
		c.close(net.ErrClosed)
	}
	return nil
}

// Ask sends query to dst over TCP with a fresh transaction id and returns
// the reply, which carries that id: ErrTimeout if none came within
// timeout (connecting included), ErrNoStream if the server could not be
// reached over TCP or closed the connection before replying.
func (s *Streams) Ask(ctx context.Context, dst netip.AddrPort, query []byte, timeout time.Duration) ([]byte, error) {
	if len(query) < 2 || len(query) > 0xffff {
		return nil, fmt.Errorf("a %d-byte query cannot be asked over TCP", len(query))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		c, reused, err := s.conn(ctx, unmap(dst))
		if err != nil {
			return nil, err
		}
		r, err := c.ask(ctx, query, &s.sent)
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			return nil, fmt.Errorf("ask %v over TCP: %w", dst, ErrTimeout)
		case errors.Is(err, ErrNoStream) && reused:
			continue // the server closed it while idle: dial again
		}
		return r, err
	}
}

// conn is the connection to dst, dialled if there is none (reused false).
func (s *Streams) conn(ctx context.Context, dst netip.AddrPort) (c *stream, reused bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false, net.ErrClosed
	}
	if c = s.conns[dst]; c != nil && c.alive() {
		return c, true, nil
	}
	var nc net.Conn
	err = netns.Run(s.nsPath, func() (err error) {
		var d net.Dialer
		nc, err = d.DialContext(ctx, "tcp", dst.String())
		return err
	})
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return nil, false, fmt.Errorf("connecting to %v: %w", dst, ErrTimeout)
	case err != nil:
		return nil, false, fmt.Errorf("%w: %w", ErrNoStream, err)
	}
	c = &stream{conn: nc, pending: map[uint16]chan []byte{}, done: make(chan struct{})}
	go c.read()
	s.conns[dst] = c
	return c, false, nil
}

// stream is one connection and its asks in flight.
type stream struct {
	conn    net.Conn
	writeMu sync.Mutex
	done    chan struct{} // closed when the connection ends

	mu      sync.Mutex
	pending map[uint16]chan []byte
	err     error // why it ended
}

func (c *stream) alive() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

func (c *stream) ask(ctx context.Context, query []byte, sent *atomic.Uint64) ([]byte, error) {
	reply := make(chan []byte, 1)
	id, err := c.register(reply)
	if err != nil {
		return nil, err
	}
	defer c.unregister(id, reply)
	msg := make([]byte, 2+len(query))
	binary.BigEndian.PutUint16(msg, uint16(len(query)))
	copy(msg[2:], query)
	binary.BigEndian.PutUint16(msg[2:], id)
	c.writeMu.Lock()
	if d, ok := ctx.Deadline(); ok {
		c.conn.SetWriteDeadline(d)
	}
	_, err = c.conn.Write(msg)
	c.writeMu.Unlock()
	if err != nil {
		// A write cut short leaves the stream out of step: start afresh.
		c.close(err)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, context.DeadlineExceeded
		}
		return nil, fmt.Errorf("%w: %w", ErrNoStream, err)
	}
	sent.Add(1)
	select {
	case r := <-reply:
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.done:
		return nil, fmt.Errorf("%w: %w", ErrNoStream, c.err)
	}
}

// register gives reply a transaction id no other ask in flight on the
// connection has.
func (c *stream) register(reply chan []byte) (uint16, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, fmt.Errorf("%w: %w", ErrNoStream, c.err)
	}
	if len(c.pending) >= maxStreamAsks {
		return 0, fmt.Errorf("%d asks in flight on one connection", len(c.pending))
	}
	for {
		id := uint16(rand.Uint32())
		if c.pending[id] == nil {
			c.pending[id] = reply
			return id, nil
		}
	}
}

// maxStreamAsks bounds the asks in flight on one connection, well below
// the transaction ids there are.
const maxStreamAsks = MaxConcurrency

func (c *stream) unregister(id uint16, reply chan []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[id] == reply {
		delete(c.pending, id)
	}
}

// read hands each reply to the ask of its id; a reply nobody waits for
// (its ask timed out) is dropped. It ends with the connection.
func (c *stream) read() {
	var head [2]byte
	for {
		if _, err := io.ReadFull(c.conn, head[:]); err != nil {
			c.close(err)
			return
		}
		msg := make([]byte, binary.BigEndian.Uint16(head[:]))
		if _, err := io.ReadFull(c.conn, msg); err != nil {
			c.close(err)
			return
		}
		if len(msg) < 2 {
			continue
		}
		c.mu.Lock()
		id := binary.BigEndian.Uint16(msg)
		if reply := c.pending[id]; reply != nil {
			delete(c.pending, id)
			reply <- msg
		}
		c.mu.Unlock()
	}
}

// close ends the connection for err, once.
func (c *stream) close(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	c.conn.Close()
	close(c.done)
}
