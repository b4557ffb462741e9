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
	// Evictions reads memcached's counts of items it dropped for room,
	// with no write (stats: evictions and slab_reassign_evictions_nomem).
	Evictions(ctx context.Context, dst netip.AddrPort, timeout time.Duration) (uint64, error)
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
	var out []itemOrErr
	err := m.ask(ctx, dst, timeout, "reading items", func(deadline time.Time) (err error) {
		out, err = m.read(keys, deadline)
		return err
	})
	return out, err
}

func (m *items) Evictions(ctx context.Context, dst netip.AddrPort, timeout time.Duration) (uint64, error) {
	var n uint64
	err := m.ask(ctx, dst, timeout, "reading stats", func(deadline time.Time) (err error) {
		n, err = m.evictions(deadline)
		return err
	})
	return n, err
}

// ask runs one exchange on the connection, dialled first if need be, and
// drops it if the exchange fails (its replies are out of step then).
func (m *items) ask(ctx context.Context, dst netip.AddrPort, timeout time.Duration, what string, exchange func(deadline time.Time) error) error {
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
			return fmt.Errorf("connecting to memcached at %v: %w", dst, err)
		}
		m.dst, m.r = dst, bufio.NewReaderSize(m.conn, 64<<10)
	}
	if err := exchange(deadline); err != nil {
		m.drop()
		if errors.Is(err, ctx.Err()) {
			return err
		}
		return fmt.Errorf("%s from memcached at %v: %w", what, dst, err)
	}
	return nil
}

// evictions sends stats and sums its eviction counters.
func (m *items) evictions(deadline time.Time) (uint64, error) {
	m.conn.SetDeadline(deadline)
	if _, err := m.conn.Write([]byte("stats\r\n")); err != nil {
		return 0, err
	}
	return readEvictions(m.r)
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
