package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/santa-offload/santa/bench/gen"
	"github.com/santa-offload/santa/bench/mcitems"
	"github.com/santa-offload/santa/internal/popularity"
)

// mixWriter makes the generator's GETs a GET/SET mix: over one TCP
// connection from the client namespace, it sets keys drawn with the GETs'
// popularity, pipelined, as many as share/(1-share) of the generator's
// good replies since it started (share 0.05: 5 % of the operations served
// are SETs). Each SET writes the key's own value again, so that every
// reply keeps memcached's bytes and the generator's check stays exact;
// each still invalidates the key's rule in the kernel, which the agent
// must offload again. Staleness needs values that change: bench/mccheck
// -agent.
type mixWriter struct {
	dial  func() (net.Conn, error)
	items int
	share float64
	sets  atomic.Uint64 // acknowledged, over every run
}

// batch bounds the SETs sent before their replies are read; pace is how
// often the writer catches up with the generator.
const (
	mixBatch = 64
	mixPace  = time.Millisecond
)

// run writes beside g until ctx ends (a scenario.Config's Beside).
func (w *mixWriter) run(ctx context.Context, g *gen.Generator, pop popularity.Popularity) error {
	conn, err := w.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	seq := pop.Sequence(w.items, 1<<16, 2) // not the GETs' seed
	r := bufio.NewReader(conn)
	start, err := g.Counters()
	if err != nil {
		return err
	}
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
				i := int(seq[(sent+k)%uint64(len(seq))])
				v := mcitems.Value(i)
				buf = fmt.Appendf(buf, "set %s 0 0 %d\r\n%s\r\n", mcitems.Key(i), len(v), v)
			}
			if _, err := conn.Write(buf); err != nil {
				return w.ended(ctx, err)
			}
			for range n {
				line, err := r.ReadString('\n')
				if err != nil {
					return w.ended(ctx, err)
				}
				if line != "STORED\r\n" {
					return fmt.Errorf("mix: a SET answered %q", line)
				}
			}
			sent += n
			w.sets.Add(n)
		}
	}
}

// ended is an I/O error's meaning: none if ctx ended (the deadline set
// then broke the connection off).
func (w *mixWriter) ended(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	if err == io.EOF {
		return fmt.Errorf("mix: memcached closed the SET connection")
	}
	return fmt.Errorf("mix: %w", err)
}
