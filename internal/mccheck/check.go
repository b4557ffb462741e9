package mccheck

import (
	"slices"
	"sort"
	"strings"
	"time"
)

// The reference model. Each key has one writer, so its writes are totally
// ordered (write.seq), and every value a writer stores is unique (it
// names the run, key, writer and command), so a value read maps back to
// the writes that can have left it (several only for counters, whose
// numbers may repeat: the newest of them is taken, the most lenient).
//
// A read R of key K, sent at R.sent:
//   - returning value V (the newest write of K leaving V is W) is stale if
//     a later write X of K changed or removed it and was acknowledged
//     before R.sent, or a flush_all sent after W's acknowledgement had
//     surely taken effect before R.sent;
//   - returning nothing is stale if a write W that left K present was
//     acknowledged before R.sent, and nothing that could remove K (a later
//     delete or failure saying K is absent, a flush_all not surely done
//     before W was sent) was sent before R's reply was read;
//   - returning a value no write of the run left is wrong.
//
// A key with a write that was never acknowledged (a UDP timeout: it may
// be applied at any later time) is not checked from that write's sending
// on: the writer gives the key up.

// checker holds the history by key.
type checker struct {
	keys    []string
	writes  [][]write // by key, in seq order
	flushes []flush   // in sent order
	tainted []time.Duration
	// By key and write index: the first later write that changes or
	// removes the key (-1: none), and the first later one that removes it.
	nextChange, nextAbsent [][]int
	values                 []map[string]int // by key: value -> newest write leaving it
}

func newChecker(keys []string, logs []*log) *checker {
	c := &checker{keys: keys, writes: make([][]write, len(keys)), tainted: make([]time.Duration, len(keys)),
		nextChange: make([][]int, len(keys)), nextAbsent: make([][]int, len(keys)), values: make([]map[string]int, len(keys))}
	for i := range c.tainted {
		c.tainted[i] = -1
	}
	for _, l := range logs {
		for _, w := range l.writes {
			c.writes[w.key] = append(c.writes[w.key], w)
		}
		c.flushes = append(c.flushes, l.flushes...)
	}
	slices.SortFunc(c.flushes, func(a, b flush) int { return int(a.sent - b.sent) })
	for k, ws := range c.writes {
		slices.SortFunc(ws, func(a, b write) int { return a.seq - b.seq })
		c.values[k] = map[string]int{}
		c.nextChange[k], c.nextAbsent[k] = make([]int, len(ws)), make([]int, len(ws))
		change, absent := -1, -1
		for i := len(ws) - 1; i >= 0; i-- {
			c.nextChange[k][i], c.nextAbsent[k][i] = change, absent
			if ws[i].changed || ws[i].absent {
				change = i
			}
			if ws[i].absent {
				absent = i
			}
		}
		for i, w := range ws {
			if w.changed {
				c.values[k][w.value] = i
			}
			if w.acked < 0 && c.tainted[k] < 0 {
				c.tainted[k] = w.sent
			}
		}
	}
	return c
}

// check judges one read: a violation, or nil; unchecked if the key was
// given up before the read's reply.
func (c *checker) check(r read) (v *Violation, unchecked bool) {
	if t := c.tainted[r.key]; t >= 0 && r.recvd >= t {
		return nil, true
	}
	switch r.outcome {
	case hit:
		return c.checkValue(r), false
	case miss:
		return c.checkMiss(r), false
	}
	return nil, false
}

func (c *checker) checkValue(r read) *Violation {
	ws := c.writes[r.key]
	// A counter memcached decremented in place keeps its length, padded
	// with spaces (protocol.txt, incr/decr); no other value ends in one.
	i, ok := c.values[r.key][strings.TrimRight(r.value, " ")]
	if !ok {
		return c.violation(r, "a value no write of this run left", nil, nil, nil)
	}
	from := ws[i]
	if j := c.nextChange[r.key][i]; j >= 0 {
		// The first later change is acknowledged first: acks follow seq.
		if x := ws[j]; x.acked >= 0 && x.acked < r.sent {
			return c.violation(r, "a value older than a write acknowledged before the read was sent", &from, &x, nil)
		}
	}
	for _, f := range c.flushes {
		if f.done() < r.sent && from.acked < f.sent && (f.delay == 0 || from.sent > f.sent-bumpWindow) {
			return c.violation(r, "a value flushed by a flush_all acknowledged before the read was sent", &from, nil, &f)
		}
	}
	return nil
}

func (c *checker) checkMiss(r read) *Violation {
	ws := c.writes[r.key]
	// The newest write that left the key present and was acknowledged
	// before the read was sent (acks follow seq).
	last := sort.Search(len(ws), func(i int) bool { return ws[i].acked < 0 || ws[i].acked >= r.sent }) - 1
	for last >= 0 && !ws[last].present {
		last--
	}
	if last < 0 {
		return nil
	}
	w := ws[last]
	if j := c.nextAbsent[r.key][last]; j >= 0 && ws[j].sent < r.recvd {
		return nil // a delete that may have been applied before the read
	}
	for _, f := range c.flushes {
		if f.sent < r.recvd && f.done() >= w.sent {
			return nil // a flush_all that may have been applied after w
		}
	}
	return c.violation(r, "no value, after a write acknowledged before the read was sent", &w, nil, nil)
}

func (c *checker) violation(r read, why string, from, newer *write, f *flush) *Violation {
	v := &Violation{Key: c.keys[r.key], Why: why, Via: r.via, Sent: r.sent, Received: r.recvd, Outcome: r.outcome, Value: r.value}
	if from != nil {
		v.From = from.info()
	}
	if newer != nil {
		v.Newer = newer.info()
	}
	if f != nil {
		v.Flush = &FlushInfo{Writer: f.writer, Sent: f.sent, Acked: f.acked, Delay: f.delay}
	}
	return v
}

func (w write) info() *WriteInfo {
	return &WriteInfo{Writer: w.writer, Seq: w.seq, Command: w.command, Sent: w.sent, Acked: w.acked,
		Reply: w.reply, Value: w.value, Changed: w.changed}
}
