package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/santa-offload/santa/bench/gen"
	"github.com/santa-offload/santa/bench/mcitems"
	"github.com/santa-offload/santa/bench/scenario"
	"github.com/santa-offload/santa/internal/popularity"
)

// mixWriter makes the generator's GETs a GET/SET mix: over TCP from the
// client namespace, it sets keys drawn with the GETs' popularity,
// pipelined, as many as share/(1-share) of the generator's good replies
// since it started (share 0.05: 5 % of the operations served are SETs).
// Each SET writes the key's own value again, so that every reply keeps
// memcached's bytes and the generator's check stays exact; each still
// invalidates the key's rule in the kernel, which the agent must offload
// again. Staleness needs values that change: bench/mccheck -agent.
//
// Its connection is made again once an agent has started (mixAgent): a
// connection older than the agent's marking of memcached's listener would
// hold the offload back (docs/offload-memcached.md), and an operator's
// clients connect after the agent.
type mixWriter struct {
	conn  *mixConn
	items int
	share float64
	sets  atomic.Uint64 // acknowledged, over every run
}

// mixBatch bounds the SETs sent before their replies are read; mixPace is
// how often the writer catches up with the generator.
const (
	mixBatch = 64
	mixPace  = time.Millisecond
)

// run writes beside g until ctx ends (a scenario.Config's Beside).
func (w *mixWriter) run(ctx context.Context, g *gen.Generator, pop popularity.Popularity) error {
	seq := pop.Sequence(w.items, 1<<16, 2) // not the GETs' seed
	start, err := g.Counters()
	if err != nil {
		return err
	}
	c := w.conn
	if err := c.redial(); err != nil { // before the generator floods the server
		return err
	}
	defer c.close()
	stop := context.AfterFunc(ctx, c.interrupt)
	defer stop()
	tick := time.NewTicker(mixPace)
	defer tick.Stop()
	var sent uint64
	var buf []byte
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		now, err := g.Counters()
		if err != nil {
			return err
		}
		want := uint64(w.share / (1 - w.share) * float64(now.ReplyOK-start.ReplyOK))
		for sent < want {
			n := min(want-sent, mixBatch)
			buf = buf[:0]
			for k := range n {
				buf = appendSet(buf, int(seq[(sent+k)%uint64(len(seq))]))
			}
			if err := c.exchange(buf, int(n)); err != nil {
				if ctx.Err() != nil {
					return nil // the interrupt broke the exchange off
				}
				return fmt.Errorf("mix: %w", err)
			}
			sent += n
			w.sets.Add(n)
		}
	}
}

// appendSet appends a SET of key i to its own value.
func appendSet(buf []byte, i int) []byte {
	v := mcitems.Value(i)
	return fmt.Appendf(buf, "set %s 0 0 %d\r\n%s\r\n", mcitems.Key(i), len(v), v)
}

// mixAgent is an agent whose start makes the mix writer connect again.
type mixAgent struct {
	*scenario.OffloadAgent
	mix *mixWriter
}

func (a mixAgent) Start(ctx context.Context, n int) error {
	if err := a.OffloadAgent.Start(ctx, n); err != nil {
		return err
	}
	return a.mix.conn.redial() // now, while the generator pauses
}

// mixConn is a SET connection, dialed on demand.
type mixConn struct {
	dial func() (net.Conn, error)
	mu   sync.Mutex
	conn net.Conn
	r    *bufio.Reader
}

// redial replaces the connection by a new one.
func (c *mixConn) redial() error {
	c.close()
	conn, err := c.dial()
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conn, c.r = conn, bufio.NewReader(conn)
	return nil
}

// exchange sends the n SETs of buf and reads their replies, on a new
// connection if there is none.
func (c *mixConn) exchange(buf []byte, n int) error {
	c.mu.Lock()
	conn, r := c.conn, c.r
	c.mu.Unlock()
	if conn == nil {
		if err := c.redial(); err != nil {
			return err
		}
		return c.exchange(buf, n)
	}
	if _, err := conn.Write(buf); err != nil {
		return err
	}
	for range n {
		line, err := r.ReadString('\n')
		if err == io.EOF {
			return fmt.Errorf("memcached closed the SET connection")
		}
		if err != nil {
			return err
		}
		if line != "STORED\r\n" {
			return fmt.Errorf("a SET answered %q", line)
		}
	}
	return nil
}

// interrupt breaks off an exchange in progress.
func (c *mixConn) interrupt() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		c.conn.SetDeadline(time.Now())
	}
}

func (c *mixConn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}
