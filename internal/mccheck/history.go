package mccheck

import (
	"math"
	"time"
)

// The history a run records: every operation with when it was sent and
// when its reply was read, on one monotonic clock (time since the run's
// start). Sent is taken before the first byte is written and acked after
// the reply is read, so both err on the side of "concurrent": the model
// never orders two operations the clock cannot.

// write is one write command of a key. A key has one writer, whose
// commands memcached applies in the order it sent them (one TCP
// connection, or one UDP request at a time), so seq orders them.
type write struct {
	key     int
	writer  int
	seq     int    // the writer's command count
	command string // as sent, without its data
	sent    time.Duration
	acked   time.Duration // < 0: never acknowledged (a UDP timeout)
	reply   string        // memcached's reply (noreply, quiet: the reply that acknowledged it)
	// After it, per its reply: the key holds value (changed), exists
	// (present), or is absent. A failure that changes nothing sets none.
	changed bool
	value   string
	present bool
	absent  bool
}

// flush is one flush_all.
type flush struct {
	writer int
	seq    int
	sent   time.Duration
	acked  time.Duration // < 0: never acknowledged (its connection broke)
	delay  time.Duration // 0: at once
}

// flushSlack is how long after a delayed flush_all's acknowledgement plus
// its delay memcached may still hold what it flushes, or flush what is
// written: its clock ticks once a second, the flush time is rounded
// (memcached.c, realtime), and an item stored in the flush's second is
// flushed too (items.c, item_is_flushed: time <= oldest_live).
const flushSlack = 3 * time.Second

// bumpWindow: memcached renews an item's time (which a delayed flush
// compares) when it is read and older than 60 s (ITEM_UPDATE_INTERVAL).
// A value written this long before a delayed flush was sent is still
// flushed by it.
const bumpWindow = 30 * time.Second

// done is when a flush has surely taken effect: never, if it was never
// acknowledged.
func (f flush) done() time.Duration {
	if f.acked < 0 {
		return math.MaxInt64
	}
	if f.delay == 0 {
		return f.acked
	}
	return f.acked + f.delay + flushSlack
}

// Read outcomes.
const (
	hit     = "hit"
	miss    = "miss"
	timeout = "timeout"
	failed  = "error"
)

// read is one read of a key.
type read struct {
	key     int
	via     string // "udp get", "tcp get", "tcp mg", "tcp gets"
	sent    time.Duration
	recvd   time.Duration
	outcome string
	value   string // hit: the data; error: the reply
}

// log is what one worker records; workers never share one.
type log struct {
	forms   map[string]int // write commands sent, by form (Report.Writes)
	writes  []write
	flushes []flush
	reads   []read
	// UDP requests unanswered in time.
	udpTimeouts int
}
