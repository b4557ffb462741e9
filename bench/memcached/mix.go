package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
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
// pipelined over mixConns connections, as many as share/(1-share) of the
// generator's good replies since it started (share 0.05: 5 % of the
// operations served are SETs), forgoing those it fell behind by more than
// mixBacklog.
// Each SET writes the key's own value again, so that every reply keeps
// memcached's bytes and the generator's check stays exact; each still
// invalidates the key's rule in the kernel, which the agent must offload
// again. Staleness needs values that change: bench/mccheck -agent.
//
// Its connections are made again once an agent has started (mixAgent): a
// connection older than the agent's marking of memcached's listener would
// hold the offload back (docs/offload-memcached.md), and an operator's
// clients connect after the agent.
type mixWriter struct {
	conns []*mixConn // mixConns
	items int
	share float64
	// keys, if set, draws the SETs' keys instead of the GETs' popularity
	// (-set-popularity): uniform SETs write the hottest keys as seldom as
	// any other, Zipf SETs write them as often as they are read.
	keys *popularity.Popularity
	sets atomic.Uint64 // acknowledged, over every run
}

// mixInFlight bounds the SETs sent on one connection before their replies
// are read: the data plane follows 16 one-key writes in flight per
// connection, and holds those beyond domain-wide, so that their end kills
// every rule of the domain (docs/memcached.md, "Where, and with what"; a
// client pipelining deeper is a limit of the offload,
// docs/offload-memcached.md). mixConns connections keep up with the
// generator together: at 350 k GETs a second 5 % is 18 k SETs a second,
// and one round trip through a busy server core takes milliseconds.
// mixPace is how often the writer catches up with it.
const (
	mixInFlight = 16
	mixConns    = 16
	mixPace     = time.Millisecond
)

// mixBacklog is how far the writer may fall behind its pace before it
// forgoes SETs: one round of every connection. In open loop memcached
// serves the TCP SETs late; a writer that then sent all it owed would
// burst once the load eased, and the next phase measured (one of the
// agent's offered loads) would get 50 % SETs, not 5 %.
const mixBacklog = mixConns * mixInFlight

// due is how many SETs to send now, for want since the start of which
// sent were sent and forgone forgone: at most mixBacklog, the rest
// forgone from now on.
func due(want, sent, forgone uint64) (n, nowForgone uint64) {
	owed := want - min(want, sent+forgone)
	if owed > mixBacklog {
		forgone += owed - mixBacklog
		owed = mixBacklog
	}
	return owed, forgone
}

func newMixWriter(dial func() (net.Conn, error), items int, share float64) *mixWriter {
	w := &mixWriter{items: items, share: share}
	for range mixConns {
		w.conns = append(w.conns, &mixConn{dial: dial})
	}
	return w
}

// redial replaces every connection by a new one.
func (w *mixWriter) redial() error {
	for _, c := range w.conns {
		if err := c.redial(); err != nil {
			return err
		}
	}
	return nil
}

// run writes beside g until ctx ends (a scenario.Config's Beside).
func (w *mixWriter) run(ctx context.Context, g *gen.Generator, pop popularity.Popularity) error {
	if w.keys != nil {
		pop = *w.keys
	}
	seq := pop.Sequence(w.items, 1<<16, 2) // not the GETs' seed
	start, err := g.Counters()
	if err != nil {
		return err
	}
	if err := w.redial(); err != nil { // before the generator floods the server
		return err
	}
	for _, c := range w.conns {
		defer c.close()
		stop := context.AfterFunc(ctx, c.interrupt)
		defer stop()
	}
	tick := time.NewTicker(mixPace)
	defer tick.Stop()
	var sent, forgone uint64
	var buf []byte
	defer func() { w.report(g, start, sent, forgone) }()
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
		var owed uint64
		owed, forgone = due(want, sent, forgone)
		for owed > 0 {
			n, err := w.exchange(seq, sent, owed, &buf)
			switch {
			case err != nil && ctx.Err() != nil:
				return nil // the interrupt broke the exchange off
			case errors.Is(err, net.ErrClosed):
				// An agent's start redialled the connections under this
				// exchange (mixAgent): its SETs' replies went with the
				// old one; the next exchange is on the new one.
				continue
			case err != nil:
				return fmt.Errorf("mix: %w", err)
			}
			sent, owed = sent+n, owed-n
			w.sets.Add(n)
		}
	}
}

// report says what share of the operations served since start were SETs:
// less than asked if memcached answered the SETs slower than the
// generator's GETs (then SETs were forgone).
func (w *mixWriter) report(g *gen.Generator, start gen.Counters, sent, forgone uint64) {
	now, err := g.Counters()
	if err != nil {
		return
	}
	gets := now.ReplyOK - start.ReplyOK
	fmt.Fprintf(os.Stderr, "  mix: %d SETs beside %d GETs: %.2f %% of the operations (asked: %g %%; %d forgone, memcached serving them late)\n",
		sent, gets, 100*float64(sent)/float64(max(1, sent+gets)), 100*w.share, forgone)
}

// exchange sends up to mixInFlight SETs on each connection, of the keys
// seq holds from sent on, at most n, and reads their replies. It returns
// how many were acknowledged.
func (w *mixWriter) exchange(seq []uint32, sent, n uint64, buf *[]byte) (uint64, error) {
	type sentOn struct {
		r *bufio.Reader // of the connection the SETs went on
		k int
	}
	var sends []sentOn
	for _, c := range w.conns {
		k := min(n, mixInFlight)
		if k == 0 {
			break
		}
		*buf = (*buf)[:0]
		for i := range k {
			*buf = appendSet(*buf, int(seq[(sent+i)%uint64(len(seq))]))
		}
		r, err := c.send(*buf)
		if err != nil {
			return 0, err
		}
		sends = append(sends, sentOn{r, int(k)})
		sent, n = sent+k, n-k
	}
	var done uint64
	for _, s := range sends {
		if err := await(s.r, s.k); err != nil {
			return 0, err
		}
		done += uint64(s.k)
	}
	return done, nil
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
	return a.mix.redial() // now, while the generator pauses
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

// exchange sends the n SETs of buf and reads their replies.
func (c *mixConn) exchange(buf []byte, n int) error {
	r, err := c.send(buf)
	if err != nil {
		return err
	}
	return await(r, n)
}

// send sends the SETs of buf, on a new connection if there is none, and
// returns the reader of the connection they went on: a redial (an agent's
// start) between the send and the wait must not leave the writer waiting
// on the new connection for the old one's replies.
func (c *mixConn) send(buf []byte) (*bufio.Reader, error) {
	c.mu.Lock()
	conn, r := c.conn, c.r
	c.mu.Unlock()
	if conn == nil {
		if err := c.redial(); err != nil {
			return nil, err
		}
		return c.send(buf)
	}
	_, err := conn.Write(buf)
	return r, err
}

// await reads the replies to n SETs sent on r's connection.
func await(r *bufio.Reader, n int) error {
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
