package mcagent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/santa-offload/santa/internal/netns"
)

// itemReader reads items from memcached over TCP: their time to live,
// which the UDP get does not tell (*items; tests give a fake).
type itemReader interface {
	// Read reads each key's item, in one pipelined batch; a key memcached
	// does not have is a skipMiss. An error is the connection's.
	Read(ctx context.Context, dst netip.AddrPort, keys [][]byte, timeout time.Duration) ([]itemOrErr, error)
	// Reset drops the connection: the next Read dials afresh.
	Reset()
	Sent() uint64
}

type itemOrErr struct {
	it  item
	err error
}

// items is one TCP connection to memcached, dialled in the network
// namespace at nsPath as needed. It must be dialled after memcached's
// listener was marked (docs/memcached.md): a connection from before is
// not parsed and holds every guarded rule back while it lives, so the
// agent resets it whenever it marks a listener.
type items struct {
	nsPath string
	sent   atomic.Uint64
	stale  atomic.Bool

	mu   sync.Mutex // one batch at a time
	dst  netip.AddrPort
	conn net.Conn
	r    *bufio.Reader
}

func newItems(nsPath string) *items { return &items{nsPath: nsPath} }

func (m *items) Sent() uint64 { return m.sent.Load() }

func (m *items) Reset() { m.stale.Store(true) }

// Close closes the connection.
func (m *items) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.drop()
}

func (m *items) drop() {
	if m.conn != nil {
		m.conn.Close()
		m.conn, m.r = nil, nil
	}
}

func (m *items) Read(ctx context.Context, dst netip.AddrPort, keys [][]byte, timeout time.Duration) ([]itemOrErr, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stale.Swap(false) || m.dst != dst {
		m.drop()
	}
	deadline := time.Now().Add(timeout)
	if m.conn == nil {
		err := netns.Run(m.nsPath, func() (err error) {
			d := net.Dialer{Deadline: deadline}
			m.conn, err = d.DialContext(ctx, "tcp", dst.String())
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("connecting to memcached at %v: %w", dst, err)
		}
		m.dst, m.r = dst, bufio.NewReaderSize(m.conn, 64<<10)
	}
	out, err := m.read(keys, deadline)
	if err != nil {
		m.drop() // its replies are out of step now
		if errors.Is(err, ctx.Err()) {
			return nil, err
		}
		return nil, fmt.Errorf("reading items from memcached at %v: %w", dst, err)
	}
	return out, nil
}

// read sends every key's mg, then reads the replies, in order.
func (m *items) read(keys [][]byte, deadline time.Time) ([]itemOrErr, error) {
	m.conn.SetDeadline(deadline)
	w := bufio.NewWriterSize(m.conn, 64<<10)
	for _, k := range keys {
		w.WriteString(mgRequest(k))
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	m.sent.Add(uint64(len(keys)))
	out := make([]itemOrErr, len(keys))
	for i := range keys {
		it, err := readMG(m.r)
		var s *skip
		if err != nil && !errors.As(err, &s) {
			return nil, err
		}
		out[i] = itemOrErr{it, err}
	}
	return out, nil
}
