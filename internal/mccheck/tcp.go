package mccheck

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"time"
)

// ioTimeout bounds one TCP batch: memcached answers in microseconds; a
// batch this late means it is stuck, and the run fails.
const ioTimeout = 10 * time.Second

// tcpConn is a connection to memcached, TCP_NODELAY (Go's default): each
// write leaves as a segment of its own.
type tcpConn struct {
	conn *net.TCPConn
	r    *bufio.Reader
	cut  *rand.Rand
	// split: cut some batches into several writes.
	split bool
}

func newTCPConn(c *net.TCPConn, rng *rand.Rand, split bool) tcpConn {
	return tcpConn{conn: c, r: bufio.NewReader(c), cut: rng, split: split}
}

// send writes b: at once, or (split) cut at one to three random places
// with 20-220 µs between the pieces, so that commands, lines and values
// arrive in several segments.
func (t *tcpConn) send(b []byte) error {
	t.conn.SetDeadline(time.Now().Add(ioTimeout))
	if !t.split || len(b) < 2 || t.cut.IntN(2) == 0 {
		_, err := t.conn.Write(b)
		return err
	}
	cuts := make([]int, 1+t.cut.IntN(3))
	for i := range cuts {
		cuts[i] = 1 + t.cut.IntN(len(b)-1)
	}
	slices.Sort(cuts)
	from := 0
	for _, at := range append(cuts, len(b)) {
		if at == from {
			continue
		}
		if _, err := t.conn.Write(b[from:at]); err != nil {
			return err
		}
		from = at
		if at < len(b) {
			time.Sleep(time.Duration(20+t.cut.IntN(200)) * time.Microsecond)
		}
	}
	return nil
}

// tcpWriter is a writer over one TCP connection: batches of commands of
// distinct keys (one flush_all now and then for the first writer),
// pipelined, closed by mn if any is silent (noreply, quiet).
type tcpWriter struct {
	*worker
	tcpConn
	g     *gen
	keys  []int // its own
	flush bool  // sends the flush_alls
}

// setup sets each of its keys, so that no value of an earlier run is
// left.
func (w *tcpWriter) setup() error {
	for chunk := range slices.Chunk(w.keys, w.cfg.Pipeline) {
		var batch []*cmd
		for _, k := range chunk {
			batch = append(batch, w.g.set(k))
		}
		if err := w.send(batch); err != nil {
			return fmt.Errorf("TCP writer %d: %w", w.id, err)
		}
	}
	return nil
}

func (w *tcpWriter) run(ctx context.Context) error {
	for ctx.Err() == nil {
		n := w.budget.take(1 + w.rng.IntN(min(w.cfg.Pipeline, len(w.keys))))
		if n == 0 {
			return nil
		}
		if err := w.batch(n); err != nil {
			return fmt.Errorf("TCP writer %d: %w", w.id, err)
		}
		w.pause(ctx)
	}
	return nil
}

// batch sends n commands of distinct keys (and maybe a flush_all) at
// once.
func (w *tcpWriter) batch(n int) error {
	var batch []*cmd
	for _, i := range w.rng.Perm(len(w.keys))[:n] {
		c := w.g.next(w.keys[i], false)
		if c.kind == CAS {
			if err := w.casLine(c); err != nil {
				return err
			}
		}
		batch = append(batch, c)
	}
	if w.flush && (w.g.allowed(FlushAll) || w.g.allowed(FlushDelay)) && w.rng.IntN(w.cfg.FlushEvery) < len(batch) {
		f := &cmd{key: -1, kind: FlushAll, line: "flush_all"}
		if !w.g.allowed(FlushAll) || w.g.allowed(FlushDelay) && w.rng.IntN(2) == 0 {
			f.kind, f.delay = FlushDelay, 1+w.rng.IntN(2)
			f.line = fmt.Sprintf("flush_all %d", f.delay)
		}
		at := w.rng.IntN(len(batch) + 1)
		batch = slices.Insert(batch, at, f)
	}
	return w.send(batch)
}

// send sends a batch, closed by mn if a command of it is silent, and
// reads the replies.
func (w *tcpWriter) send(batch []*cmd) error {
	if slices.ContainsFunc(batch, func(c *cmd) bool { return c.noreply || c.opaque != "" }) {
		batch = append(batch, &cmd{key: -1, line: "mn"})
	}
	var b []byte
	for _, c := range batch {
		w.seq++
		c.seq = w.seq
		b = append(b, c.bytes()...)
	}
	sent := w.now()
	if err := w.tcpConn.send(b); err != nil {
		w.abandon(batch, sent)
		return err
	}
	var silent []*cmd
	for i, c := range batch {
		if c.noreply || c.opaque != "" {
			silent = append(silent, c)
			continue
		}
		line, data, err := readWriteReply(w.r)
		// A quiet command's failure comes first, with its opaque; the
		// silent commands before it are done (memcached runs a
		// connection's commands in order), so acks follow seq.
		for err == nil && len(silent) > 0 {
			i := slices.IndexFunc(silent, func(s *cmd) bool { return s.opaque != "" && hasToken(line, s.opaque) })
			if i < 0 {
				break
			}
			acked := w.now()
			for _, s := range silent[:i] {
				w.record(s, sent, acked, "", "")
			}
			w.record(silent[i], sent, acked, line, "")
			silent = silent[i+1:]
			line, data, err = readWriteReply(w.r)
		}
		if err != nil {
			w.abandon(append(silent, batch[i:]...), sent)
			return fmt.Errorf("reply to %q: %w", c.line, err)
		}
		acked := w.now()
		for _, s := range silent {
			w.record(s, sent, acked, "", "")
		}
		silent = nil
		w.record(c, sent, acked, line, data)
	}
	return nil
}

// casLine asks the key's cas unique (gets, a read of the history too)
// and completes c's line with it (0 if the key is absent: NOT_FOUND).
func (w *tcpWriter) casLine(c *cmd) error {
	name := w.cfg.Key(c.key)
	sent := w.now()
	if err := w.tcpConn.send([]byte("gets " + name + "\r\n")); err != nil {
		return err
	}
	rep, err := readGetReply(w.r, name, false)
	if err != nil {
		return fmt.Errorf("reply to gets %s: %w", name, err)
	}
	w.log.reads = append(w.log.reads, read{key: c.key, via: "tcp gets", sent: sent, recvd: w.now(), outcome: rep.outcome, value: rep.value})
	unique := rep.cas
	if unique == "" {
		unique = "0"
	}
	c.line = fmt.Sprintf("cas %s 0 0 %d %s", name, len(c.data), unique)
	return nil
}

// record adds c, sent and acknowledged as given, to the history; acked < 0:
// never acknowledged, its reply never came.
func (w *tcpWriter) record(c *cmd, sent, acked time.Duration, reply, data string) {
	switch {
	case c.kind == FlushAll || c.kind == FlushDelay:
		w.countWrite(c.line)
		if reply == "OK" || acked < 0 {
			w.log.flushes = append(w.log.flushes, flush{writer: w.id, seq: c.seq, sent: sent, acked: acked,
				delay: time.Duration(c.delay) * time.Second})
		}
	case c.key >= 0:
		rec := write{key: c.key, writer: w.id, seq: c.seq, command: c.line, sent: sent, acked: acked}
		if acked >= 0 {
			w.g.outcome(c, reply, data, &rec)
		}
		w.log.writes = append(w.log.writes, rec)
		w.countWrite(form(c, false))
	}
}

// abandon adds to the history, as never acknowledged, commands sent at
// sent whose replies will not come (the connection broke): memcached may
// have applied them or not, so their keys are given up from then on, and
// a flush_all among them is never surely done.
func (w *tcpWriter) abandon(cmds []*cmd, sent time.Duration) {
	for _, c := range cmds {
		w.record(c, sent, -1, "", "")
	}
}

// form names a command's form in Report.Writes.
func form(c *cmd, udp bool) string {
	f := string(c.kind)
	switch c.kind {
	case NoReply:
		f = strings.Fields(c.line)[0] + " noreply"
	case Quiet:
		f = strings.Fields(c.line)[0] + " q"
	}
	if udp {
		f = "udp " + f
	}
	return f
}

func hasToken(line, tok string) bool { return slices.Contains(strings.Fields(line), tok) }

// tcpReader reads over TCP: batches of get and mg of random keys.
type tcpReader struct {
	*worker
	tcpConn
}

func (r *tcpReader) run(ctx context.Context) error {
	for ctx.Err() == nil {
		n := r.budget.take(1 + r.rng.IntN(r.cfg.Pipeline))
		if n == 0 {
			return nil
		}
		keys, meta := make([]int, n), make([]bool, n)
		var b []byte
		for i := range keys {
			keys[i], meta[i] = r.rng.IntN(r.cfg.Keys), r.rng.IntN(2) == 0
			if meta[i] {
				b = append(b, "mg "+r.cfg.Key(keys[i])+" v\r\n"...)
			} else {
				b = append(b, "get "+r.cfg.Key(keys[i])+"\r\n"...)
			}
		}
		sent := r.now()
		if err := r.send(b); err != nil {
			return fmt.Errorf("TCP reader %d: %w", r.id, err)
		}
		for i, k := range keys {
			rep, err := readGetReply(r.r, r.cfg.Key(k), meta[i])
			if err != nil {
				return fmt.Errorf("TCP reader %d: %w", r.id, err)
			}
			via := "tcp get"
			if meta[i] {
				via = "tcp mg"
			}
			r.log.reads = append(r.log.reads, read{key: k, via: via, sent: sent, recvd: r.now(), outcome: rep.outcome, value: rep.value})
		}
	}
	return nil
}
