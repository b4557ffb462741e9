// Package dnsload is a verifying DNS load client for Santa's tests and
// benchmarks with real DNS servers: it asks a server for a list of query
// forms (exact queries: a question in a shape a real client sends, see
// Shape) over UDP, IPv4 or IPv6, with a window of queries outstanding
// (closed loop), bounded in count and time, and checks every reply byte
// for byte, the transaction id aside, against the reply expected for its
// form: the server's own, captured before Santa is involved (Capture).
// Across a zone change the expectation changes too (BeginChange,
// EndChange): a reply with the data from before the change counts as
// stale once the change is complete, and the time of the last one is
// recorded.
package dnsload

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/santa-offload/santa/internal/netns"
	"github.com/santa-offload/santa/internal/popularity"
	"github.com/santa-offload/santa/internal/udpask"
	"golang.org/x/sys/unix"
)

// Limits and defaults of a Config.
const (
	DefaultWindow   = 64
	MaxWindow       = 4096
	DefaultTimeout  = time.Second
	DefaultDuration = time.Minute
	// MaxHeld is how many replies a change may hold for checking (see
	// BeginChange); a change that takes longer is an error.
	MaxHeld = 1 << 20
	// mismatchDumps is how many mismatched replies a Result keeps.
	mismatchDumps = 5
	// quarantine: a timed-out transaction id is not used again for this
	// long after its timeout, so a very late reply is not taken for the
	// reply to another query.
	quarantine = 5 * time.Second
	// lateWait is how long a run waits, after its last query timed out,
	// for late replies (readLate): on a busy machine a server may not run
	// for tens of milliseconds, much longer than a benchmark's timeout.
	lateWait = time.Second
	// sequenceLen bounds the popularity sequence drawn up front; a longer
	// run cycles it.
	sequenceLen = 1 << 20
)

// Config is one load run.
type Config struct {
	// Netns is the `ip netns` name the client's socket is in ("": this
	// process's namespace). Server is where the queries go.
	Netns  string
	Server netip.AddrPort
	// Forms are the queries, most popular first; Expect[i] is the reply
	// to Forms[i] (Capture).
	Forms  []Form
	Expect []Expect
	// Popularity draws which form each query is (Forms[0] the most
	// popular). Shift rotates the ranking halfway through (after Count/2
	// queries): form (i+len(Forms)/2) mod len(Forms) is then asked as
	// often as form i was, so the hot set changes completely.
	Popularity popularity.Popularity
	Shift      bool
	Seed       uint64
	// Count is how many queries to send (> 0); Duration bounds the time
	// spent sending them (0: DefaultDuration). Window is how many are
	// outstanding at most (0: DefaultWindow); a query without a reply
	// after Timeout (0: DefaultTimeout) is a timeout.
	Count    int
	Duration time.Duration
	Window   int
	Timeout  time.Duration
	// StaleAfter: once a change is complete (EndChange), a reply with the
	// data from before it is stale when it arrives later than StaleAfter
	// after the change's completion.
	StaleAfter time.Duration
	// Restarting: the server restarts during the run, and a SERVFAIL reply
	// is counted in Result.Starting, not as a mismatch: BIND answers
	// SERVFAIL from the moment it binds its sockets until its zones are
	// loaded (168 of 10,400 replies over 5 restarts here). Santa never
	// offloads a SERVFAIL: such a reply is the server's own.
	Restarting bool
	// FullChecksums sends each query with a full UDP checksum even where
	// the device would leave it partial (udpask.WriteFullChecksum): how a
	// local client's full checksums are measured over loopback.
	FullChecksums bool
	// Batch > 1 sends up to Batch queries per sendmmsg(2) and reads up to
	// Batch replies per recvmmsg(2) (at most MaxBatch); 0 or 1, one write
	// and one read per query. With FullChecksums the queries still go one
	// by one: their cork is per datagram, and sendmmsg has one set of
	// flags for all its messages.
	Batch int
}

// Load is a running load.
type Load struct {
	c    Config
	conn *net.UDPConn
	done chan struct{}
	err  error
	// mm sends and reads in batches (Config.Batch > 1); else buf and oob
	// are the one datagram read and its control message, got its result.
	mm       *mmsg
	buf, oob []byte
	got      [1]datagram

	// res is the run's counts: the sending side's written by run alone,
	// the checks' under mu.
	res Result
	mu  sync.Mutex
	cur []Expect // what replies are expected to be
	old []Expect // before the last change (nil: no change yet)
	// changing: between BeginChange and EndChange; replies are held.
	changing bool
	held     []heldReply
	changed  time.Time // the last change's completion
}

// A heldReply arrived during a change: checked once the change is
// complete. bytes is nil if it matched the expectation from before.
type heldReply struct {
	form  int32
	at    time.Time
	bytes []byte
}

// Start opens the client's socket and starts sending. The load runs until
// Count queries are sent (or Duration is over, or ctx is done) and every
// one is answered or timed out. Wait returns its result.
func Start(ctx context.Context, c Config) (*Load, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	conn, err := Dial(c.Netns, c.Server)
	if err != nil {
		return nil, err
	}
	// Replies must not be lost in the socket's buffer while a check runs,
	// and their times are their arrival's, not their reading's.
	conn.SetReadBuffer(4 << 20)
	if err := timestamps(conn); err != nil {
		conn.Close()
		return nil, err
	}
	l := &Load{c: c, conn: conn, done: make(chan struct{}), cur: c.Expect,
		buf: make([]byte, 65536), oob: make([]byte, oobLen)}
	if c.Batch > 1 {
		if l.mm, err = newMmsg(conn, c.Batch); err != nil {
			conn.Close()
			return nil, err
		}
	}
	go func() {
		defer close(l.done)
		defer conn.Close()
		l.err = l.run(ctx)
	}()
	return l, nil
}

// Run is Start and Wait.
func Run(ctx context.Context, c Config) (Result, error) {
	l, err := Start(ctx, c)
	if err != nil {
		return Result{}, err
	}
	return l.Wait()
}

// Dial opens a UDP socket in the namespace ns ("": this process's)
// connected to server.
func Dial(ns string, server netip.AddrPort) (*net.UDPConn, error) {
	var conn *net.UDPConn
	path := ""
	if ns != "" {
		path = netns.Named(ns)
	}
	err := netns.Run(path, func() error {
		var err error
		conn, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(server))
		return err
	})
	return conn, err
}

func (c *Config) check() error {
	switch {
	case len(c.Forms) == 0:
		return errors.New("dnsload: no forms")
	case len(c.Expect) != len(c.Forms):
		return fmt.Errorf("dnsload: %d expected replies for %d forms", len(c.Expect), len(c.Forms))
	case c.Count <= 0:
		return fmt.Errorf("dnsload: count %d, want > 0", c.Count)
	case c.Window < 0 || c.Window > MaxWindow:
		return fmt.Errorf("dnsload: window %d, want 1 to %d", c.Window, MaxWindow)
	case c.Batch < 0 || c.Batch > MaxBatch:
		return fmt.Errorf("dnsload: batch %d, want 0 to %d", c.Batch, MaxBatch)
	case c.Duration < 0 || c.Timeout < 0 || c.StaleAfter < 0:
		return errors.New("dnsload: negative duration")
	}
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	return nil
}

// Wait waits for the load to end and returns its result. A change begun
// must have ended (EndChange) before the result is complete.
func (l *Load) Wait() (Result, error) {
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil && l.changing {
		return l.res, errors.New("dnsload: the load ended during a change: call EndChange before Wait")
	}
	return l.res, l.err
}

// BeginChange says that the server's data is about to change: until
// EndChange, replies are held (at most MaxHeld), to be checked against
// the expectation from before or the one from after.
func (l *Load) BeginChange() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.changing = true
}

// EndChange says that the change BeginChange announced was complete at
// done (the server answered the new data), and that next is what replies
// are from now on. Held replies are checked: each must match the
// expectation from before (an old answer, stale if later than
// done+StaleAfter) or next.
func (l *Load) EndChange(next []Expect, done time.Time) error {
	if len(next) != len(l.c.Forms) {
		return fmt.Errorf("dnsload: %d expected replies for %d forms", len(next), len(l.c.Forms))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.changing {
		return errors.New("dnsload: EndChange without BeginChange")
	}
	l.old, l.cur, l.changing, l.changed = l.cur, next, false, done
	for _, h := range l.held {
		if h.bytes == nil {
			l.sawOld(int(h.form), h.at)
		} else {
			l.check(int(h.form), h.bytes, h.at)
		}
	}
	l.held = nil
	return nil
}

// check checks a reply to form i that arrived at t; l.mu is held.
func (l *Load) check(i int, reply []byte, t time.Time) {
	f := l.c.Forms[i]
	switch {
	case l.cur[i].Matches(f, reply):
		if l.changing {
			l.held = append(l.held, heldReply{form: int32(i), at: t})
		}
	case l.changing:
		l.held = append(l.held, heldReply{form: int32(i), at: t, bytes: append([]byte(nil), reply...)})
	case l.old != nil && !l.old[i].Equal(l.cur[i]) && l.old[i].Matches(f, reply):
		l.sawOld(i, t)
	case l.c.Restarting && len(reply) >= 12 && rcode(reply) == rcodeServfail:
		l.res.Starting++
	default:
		l.res.Mismatches++
		l.res.PerForm[i].Mismatches++
		if len(l.res.FirstMismatches) < mismatchDumps {
			l.res.FirstMismatches = append(l.res.FirstMismatches,
				Mismatch{Form: i, At: t, Got: append([]byte(nil), reply...), Want: l.cur[i].Reply})
		}
	}
}

// sawOld counts a reply to form i at t that matched the expectation from
// before the last change; l.mu is held.
func (l *Load) sawOld(i int, t time.Time) {
	if l.old[i].Equal(l.cur[i]) {
		return // the change left this form alone
	}
	l.res.OldReplies++
	if t.After(l.res.LastOld) {
		l.res.LastOld = t
	}
	if t.After(l.changed.Add(l.c.StaleAfter)) {
		l.res.Stale++
		l.res.PerForm[i].Stale++
	}
}

// pending is a query in flight.
type pending struct {
	txid uint16
	seq  uint64 // which use of txid
}

// slot is the state of one transaction id.
type slot struct {
	seq   uint64
	form  int32
	live  bool      // a query with this id waits for its reply
	late  bool      // it timed out and no reply has come yet
	sent  time.Time // when
	until time.Time // quarantined until then after a timeout
}

func (l *Load) run(ctx context.Context) error {
	c := l.c
	l.res.PerForm = make([]FormCounts, len(c.Forms))
	seq := c.Popularity.Sequence(len(c.Forms), min(c.Count, sequenceLen), c.Seed)
	queries := make([][]byte, len(c.Forms))
	for i, f := range c.Forms {
		queries[i] = f.Query(0)
	}
	slots := make([]slot, 1<<16)
	var fifo []pending // in send order; answered ones are skipped
	var nextID uint16
	var uses uint64
	outstanding := 0
	start := time.Now()
	defer func() {
		if l.res.Elapsed == 0 {
			l.res.Elapsed = time.Since(start)
		}
	}()
	end := start.Add(c.Duration)
	// queued are the next queries to send, out their bytes.
	batch := max(1, c.Batch)
	queued, out := make([]pending, 0, batch), make([][]byte, batch)

	queue := func(now time.Time) {
		n := l.res.Sent + len(queued)
		rank := int(seq[n%len(seq)])
		if c.Shift && n >= c.Count/2 {
			rank = (rank + len(c.Forms)/2) % len(c.Forms)
		}
		for slots[nextID].live || now.Before(slots[nextID].until) {
			nextID++ // at most MaxWindow live, few quarantined
		}
		id := nextID
		nextID++
		uses++
		slots[id] = slot{seq: uses, form: int32(rank), live: true, sent: now}
		q := append(out[len(queued)][:0], queries[rank]...)
		binary.BigEndian.PutUint16(q, id)
		out[len(queued)] = q
		queued = append(queued, pending{id, uses})
	}
	flush := func() error {
		q, b := queued, out[:len(queued)]
		for len(q) > 0 {
			n, err := l.send(b)
			for _, p := range q[:n] {
				fifo = append(fifo, p)
				outstanding++
				l.res.Sent++
				l.res.PerForm[slots[p.txid].form].Sent++
			}
			q, b = q[n:], b[n:]
			if errors.Is(err, syscall.ECONNREFUSED) {
				// An earlier query found no socket; this one was not sent.
				slots[q[0].txid].live = false
				l.res.Refused++
				q, b = q[1:], b[1:]
			} else if err != nil {
				return err
			}
		}
		queued = queued[:0]
		return nil
	}
	handle := func(d datagram) error {
		if len(d.b) < 2 {
			l.res.Unexpected++ // no id: nothing it could answer
			return nil
		}
		s := &slots[binary.BigEndian.Uint16(d.b)]
		if !s.live {
			l.countStray(s)
			return nil
		}
		s.live = false
		outstanding--
		l.res.Replies++
		l.res.PerForm[s.form].Replies++
		l.mu.Lock()
		l.check(int(s.form), d.b, d.at)
		held := len(l.held)
		l.mu.Unlock()
		if held > MaxHeld {
			return fmt.Errorf("dnsload: more than %d replies during a change", MaxHeld)
		}
		return nil
	}
	for {
		now := time.Now()
		sending := l.res.Sent < c.Count && now.Before(end) && ctx.Err() == nil
		// Fill the window: queue a batch's worth (one query unbatched), send it.
		for sending && outstanding < c.Window {
			for sending && outstanding+len(queued) < c.Window && len(queued) < batch {
				queue(now)
				sending = l.res.Sent+len(queued) < c.Count
			}
			if err := flush(); err != nil {
				return err
			}
			sending = l.res.Sent < c.Count
		}
		// The oldest query still waiting decides the read deadline.
		for len(fifo) > 0 && (!slots[fifo[0].txid].live || slots[fifo[0].txid].seq != fifo[0].seq) {
			fifo = fifo[1:]
		}
		if len(fifo) == 0 {
			if !sending {
				l.res.Elapsed = time.Since(start)
				return l.readLate(c.Timeout, handle)
			}
			continue
		}
		oldest := &slots[fifo[0].txid]
		if expiry := oldest.sent.Add(c.Timeout); !now.Before(expiry) {
			oldest.live, oldest.late, oldest.until = false, true, now.Add(quarantine)
			outstanding--
			l.res.Timeouts++
			l.res.PerForm[oldest.form].Timeouts++
			continue
		} else if err := l.conn.SetReadDeadline(expiry); err != nil {
			return err
		}
		if _, err := l.receive(handle); err != nil {
			return err
		}
	}
}

// countStray counts a reply to a query that does not wait: the first
// reply to one that timed out is late; any other (a second reply to one
// query: two answerers) is unexpected.
func (l *Load) countStray(s *slot) {
	if s.late {
		s.late = false
		l.res.Late++
		return
	}
	l.res.Unexpected++
}

// readLate reads the late replies to queries that timed out at the end of
// the run, for at most lateWait (or the timeout, if longer) or until every
// query that timed out has had its reply: else a reply that came late but
// came would look like a lost one (Timeouts - Late). No query waits any
// more: handle counts each reply as late or unexpected.
func (l *Load) readLate(timeout time.Duration, handle func(datagram) error) error {
	if err := l.conn.SetReadDeadline(time.Now().Add(max(timeout, lateWait))); err != nil {
		return err
	}
	for l.res.Timeouts > l.res.Late {
		if more, err := l.receive(handle); err != nil || !more {
			return err
		}
	}
	return nil
}

// receive reads the replies there are, waiting until the read deadline,
// and hands each to handle. A port-unreachable error is counted (Refused).
// It reports false when the deadline passed.
func (l *Load) receive(handle func(datagram) error) (bool, error) {
	got, err := l.recv()
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return false, nil
	case errors.Is(err, syscall.ECONNREFUSED):
		l.res.Refused++
		return true, nil
	case err != nil:
		return false, err
	}
	for _, d := range got {
		if err := handle(d); err != nil {
			return false, err
		}
	}
	return true, nil
}

// send sends the queries qs in order and returns how many it sent before
// an error: in a batch, or the first alone.
func (l *Load) send(qs [][]byte) (int, error) {
	var err error
	switch {
	case l.c.FullChecksums:
		err = udpask.WriteFullChecksum(l.conn, qs[0])
	case l.mm != nil:
		return l.mm.send(qs)
	default:
		_, err = l.conn.Write(qs[0])
	}
	if err != nil {
		return 0, err
	}
	return 1, nil
}

// timestamps has the kernel stamp each datagram with its arrival time.
func timestamps(conn *net.UDPConn) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	})
	return errors.Join(err, serr)
}

// A datagram is a reply read, and when it arrived.
type datagram struct {
	b  []byte
	at time.Time
}

// oobLen is the size of a datagram's control buffer: room for its
// SO_TIMESTAMPNS message.
const oobLen = 128

// recv reads the replies there are, at least one (in a batch, or one
// alone), waiting until the read deadline. They are valid until the next
// recv.
func (l *Load) recv() ([]datagram, error) {
	if l.mm != nil {
		return l.mm.recv()
	}
	n, oobn, _, _, err := l.conn.ReadMsgUDP(l.buf, l.oob)
	if err != nil {
		return nil, err
	}
	at, err := arrival(l.oob[:oobn])
	l.got[0] = datagram{b: l.buf[:n], at: at}
	return l.got[:], err
}

// arrival is a datagram's arrival time, from its control messages oob:
// the kernel's stamp, or now if there is none.
func arrival(oob []byte) (time.Time, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}, err
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPNS && len(m.Data) >= 16 {
			ts := (*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
			return time.Unix(ts.Unix()), nil
		}
	}
	return time.Now(), nil
}
