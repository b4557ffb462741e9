package datapath

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/pkttest"
)

const (
	probePort = 40001
	replyWait = 5 * time.Second // a request over loopback reaches its socket
)

// fromProbe is req sent from the service's probe port.
func fromProbe(f pkttest.UDPFrame) pkttest.UDPFrame {
	f.Src = netip.AddrPortFrom(f.Src.Addr(), probePort)
	return f
}

// learningService is a UDP service on 127.0.0.1 answering "Hello", that
// learns with key offset 2 and probe port probePort; its windows end by
// hand.
func learningService(t *testing.T, d *Datapath) (model.ServiceID, netip.AddrPort) {
	t.Helper()
	s, c := learningSocket(t, d)
	return s, local(c)
}

// learningSocket is learningService with its socket.
func learningSocket(t *testing.T, d *Datapath) (model.ServiceID, *net.UDPConn) {
	t.Helper()
	c := boundUDP(t, "127.0.0.1:0")
	s := register(t, d, c)
	if _, err := d.AddRule(s, hello()); err != nil {
		t.Fatal(err)
	}
	d.learnByHand()
	if err := d.SetLearning(s, model.Learning{KeyOffset: 2, ProbePort: probePort, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	return s, c
}

// xdpPasses runs frame through XDP and checks that it passed untouched.
func xdpPasses(t *testing.T, d *Datapath, frame []byte) {
	t.Helper()
	verdict, out := run(t, d.XDPProgram(), frame)
	if verdict != xdpPass || !bytes.Equal(out, passedUnchanged(frame, metaSeen)) {
		t.Fatalf("verdict %d, output %x; want it passed untouched", verdict, out)
	}
}

// cells are the sketch's nonzero counters of epoch 0, checked to be one
// per row with count n (none if n is 0); returns the two cells.
func oneCellPerRow(t *testing.T, d *Datapath, n uint64) [2]uint32 {
	t.Helper()
	rows, err := d.learnCells(0)
	if err != nil {
		t.Fatal(err)
	}
	var cells [2]uint32
	for r, row := range rows {
		if n == 0 {
			if len(row) != 0 {
				t.Fatalf("row %d counts %v; want nothing", r, row)
			}
			continue
		}
		if len(row) != 1 {
			t.Fatalf("row %d counts %v; want one cell of %d", r, row, n)
		}
		for c, got := range row {
			if got != n {
				t.Fatalf("row %d cell %d counts %d; want %d", r, c, got, n)
			}
			cells[r] = c
		}
	}
	return cells
}

// The data plane counts a learning service's passed requests by their key
// in the sketch, and samples a key once, when its estimate reaches the
// threshold; answered requests and probes are not counted, and a probe is
// never answered.
func TestLearnFixtures(t *testing.T) {
	stayOnOneCPU(t) // the budget is per CPU
	d := openTest(t)
	s, to := learningService(t, d)
	if err := d.learnConfig(3, 2); err != nil {
		t.Fatal(err)
	}
	query := func(txid uint16, name string) []byte { return request(to, pkttest.DNSQuery(txid, name)).Bytes() }

	for i := range 5 {
		xdpPasses(t, d, query(uint16(i), "www.example.com"))
	}
	cells := oneCellPerRow(t, d, 5)
	samples, err := d.learnSamples()
	if err != nil {
		t.Fatal(err)
	}
	key := pkttest.DNSQuery(0, "www.example.com")[2:]
	if len(samples) != 1 {
		t.Fatalf("%d samples after 5 requests over a threshold of 3; want 1", len(samples))
	}
	got := samples[0]
	if got.Learn != d.learnID(s) || got.Cells != cells || got.Epoch != 0 || !bytes.Equal(got.Key[:got.Len], key) {
		t.Fatalf("sample learn %d cells %v epoch %d key %x; want %d, %v, 0, %x", got.Learn, got.Cells, got.Epoch,
			got.Key[:got.Len], d.learnID(s), cells, key)
	}

	// Answered, or from the probe port: not counted.
	hi := request(to, []byte("Hello"))
	if verdict, _ := run(t, d.XDPProgram(), hi.Bytes()); verdict != xdpTX {
		t.Fatalf("Hello: verdict %d, want XDP_TX", verdict)
	}
	before, err := d.PathStats()
	if err != nil {
		t.Fatal(err)
	}
	xdpPasses(t, d, fromProbe(hi).Bytes())
	xdpPasses(t, d, fromProbe(request(to, pkttest.DNSQuery(9, "www.example.com"))).Bytes())
	after, err := d.PathStats()
	if err != nil {
		t.Fatal(err)
	}
	if after["probe"] != before["probe"]+1 {
		t.Errorf("path probe counted %d times, want 1 (the probe a rule would have answered)", after["probe"]-before["probe"])
	}
	oneCellPerRow(t, d, 5)

	// Not counted: an empty key, a key over the limit. A key at the limit is.
	xdpPasses(t, d, request(to, []byte{1, 2}).Bytes())
	xdpPasses(t, d, request(to, make([]byte, 2+model.MaxLearnKey+1)).Bytes())
	oneCellPerRow(t, d, 5)
	xdpPasses(t, d, request(to, bytes.Repeat([]byte{7}, 2+model.MaxLearnKey)).Bytes())
	if rows, _ := d.learnCells(0); len(rows[0]) != 2 || len(rows[1]) != 2 {
		t.Errorf("a %d-byte key was not counted: %v", model.MaxLearnKey, rows)
	}

	// The budget: one sample more in this epoch, whatever reaches the
	// threshold.
	for _, name := range []string{"a.example", "b.example", "c.example"} {
		for i := range 3 {
			xdpPasses(t, d, query(uint16(i), name))
		}
	}
	if samples, err = d.learnSamples(); err != nil || len(samples) != 1 {
		t.Fatalf("%d samples (%v) after three more keys reached the threshold; the budget of 2 leaves 1", len(samples), err)
	}

	st, err := d.ServiceStats(s)
	if err != nil {
		t.Fatal(err)
	}
	if want := (model.ServiceStats{Matched: 1, Passed: 5 + 2 + 3 + 9}); st != want {
		t.Errorf("service stats %+v, want %+v", st, want)
	}
}

// TC counts what XDP did not see (loopback, here): the same key, the same
// cells.
func TestLearnTC(t *testing.T) {
	d := openTest(t)
	_, to := learningService(t, d)
	if err := d.learnConfig(2, 8); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		in := request(to, pkttest.DNSQuery(uint16(i), "tc.example")).Bytes()
		if verdict, out := run(t, d.TCProgram(), in); verdict != tcActOK || !bytes.Equal(out, in) {
			t.Fatalf("TC verdict %d, output %x; want it passed untouched", verdict, out)
		}
	}
	cells := oneCellPerRow(t, d, 2)
	samples, err := d.learnSamples()
	if err != nil || len(samples) != 1 || samples[0].Cells != cells {
		t.Fatalf("samples %+v (%v); want one for cells %v", samples, err, cells)
	}
	probe := fromProbe(request(to, []byte("Hello"))).Bytes()
	if verdict, out := run(t, d.TCProgram(), probe); verdict != tcActOK || !bytes.Equal(out, probe) {
		t.Fatalf("TC answered a probe: verdict %d, output %x", verdict, out)
	}
}

// A service that does not learn is not counted.
func TestLearnOff(t *testing.T) {
	d := openTest(t)
	s, to := learningService(t, d)
	if err := d.SetLearning(s, model.Learning{}); err != nil {
		t.Fatal(err)
	}
	xdpPasses(t, d, request(to, pkttest.DNSQuery(1, "off.example")).Bytes())
	oneCellPerRow(t, d, 0)
	if _, err := d.Hot(s, 10); !errors.Is(err, model.ErrNotLearning) {
		t.Errorf("Hot of a service that does not learn: %v, want ErrNotLearning", err)
	}
}

// Hot is the last window's passed requests, most first; a key that stops
// passing leaves the next window's.
func TestHotWindows(t *testing.T) {
	d := openTest(t)
	s, to := learningService(t, d)
	send := func(name string, n int) {
		for i := range n {
			xdpPasses(t, d, request(to, pkttest.DNSQuery(uint16(i), name)).Bytes())
		}
	}
	send("a.example", 7)
	send("b.example", 12)
	send("c.example", 2) // below the threshold (4): never sampled
	if err := d.learnStep(); err != nil {
		t.Fatal(err)
	}
	hot, err := d.Hot(s, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"b.example:12", "a.example:7"}
	if got := hotNames(hot); fmt.Sprint(got) != fmt.Sprint(want) || hot.Window <= 0 {
		t.Fatalf("hot %v over %v; want %v over a window", got, hot.Window, want)
	}
	if top, _ := d.Hot(s, 1); len(top.Requests) != 1 {
		t.Errorf("Hot(1) gave %d requests", len(top.Requests))
	}
	// The next window: only a.example passes, and the sketch of the
	// window before was zeroed.
	send("a.example", 5)
	if err := d.learnStep(); err != nil {
		t.Fatal(err)
	}
	if hot, _ = d.Hot(s, 10); fmt.Sprint(hotNames(hot)) != "[a.example:5]" {
		t.Fatalf("second window: %v, want [a.example:5]", hotNames(hot))
	}
	if err := d.RemoveService(s); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Hot(s, 10); !errors.Is(err, model.ErrUnknownService) {
		t.Errorf("Hot of a removed service: %v", err)
	}
}

// hotNames are a hot set's DNS names with their counts.
func hotNames(h model.HotSet) []string {
	var out []string
	for _, r := range h.Requests {
		out = append(out, fmt.Sprintf("%s:%d", dnsName(r.Key[10:]), r.Passes))
	}
	return out
}

// dnsName reads the labels of a question's name.
func dnsName(q []byte) string {
	var labels []string
	for len(q) > 0 && q[0] != 0 && int(q[0]) < len(q) {
		labels = append(labels, string(q[1:1+q[0]]))
		q = q[1+q[0]:]
	}
	return strings.Join(labels, ".")
}

// Real requests over loopback, with XDP and TC attached: each passed
// request is counted once, though both programs see it (XDP marks it
// seen), and probes are not counted.
func TestLearnRealPackets(t *testing.T) {
	back := enterNewNetns(t)
	defer back()
	if err := exec("ip", "link", "set", "lo", "up"); err != nil {
		t.Fatal(err)
	}
	d := openTest(t)
	att, err := d.Attach("lo")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Detach("lo")
	t.Logf("loopback attached: XDP %s, TC %v", att.XDP, att.TC)
	s, srv := learningSocket(t, d)
	to := local(srv)
	send := func(from string, payload []byte) {
		c, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(from)), net.UDPAddrFromAddrPort(to))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(payload); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 9 {
		send("127.0.0.1:0", pkttest.DNSQuery(uint16(i), "real.example"))
	}
	send(fmt.Sprintf("127.0.0.1:%d", probePort), pkttest.DNSQuery(99, "real.example"))
	// Every request reached the server before the window ends.
	srv.SetReadDeadline(time.Now().Add(replyWait))
	for i := range 10 {
		if _, err := srv.Read(make([]byte, 512)); err != nil {
			t.Fatalf("request %d did not reach the server: %v", i, err)
		}
	}
	if err := d.learnStep(); err != nil {
		t.Fatal(err)
	}
	hot, err := d.Hot(s, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(hotNames(hot)); got != "[real.example:9]" {
		t.Fatalf("hot %s; want [real.example:9]", got)
	}
}

// A sample's record on the ring is its header and its key rounded up to 8
// bytes, whatever the key's length: a DNS query's takes a fraction of a
// full 256-byte key's room.
func TestLearnSampleRecordSize(t *testing.T) {
	d := openTest(t)
	_, to := learningService(t, d)
	if err := d.learnConfig(1, 100); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 8, 9, 31, model.MaxLearnKey} {
		payload := bytes.Repeat([]byte{byte(n)}, 2+n)
		xdpPasses(t, d, request(to, payload).Bytes())
		recs, err := d.learnRecords()
		if err != nil || len(recs) != 1 {
			t.Fatalf("%d-byte key: %d records (%v); want 1", n, len(recs), err)
		}
		if want := sampleHeader + (n+7)/8*8; len(recs[0]) != want {
			t.Fatalf("%d-byte key: a %d-byte record; want %d", n, len(recs[0]), want)
		}
		s, ok := decodeSample(recs[0])
		if !ok || !bytes.Equal(s.Key[:s.Len], payload[2:]) {
			t.Fatalf("%d-byte key: decoded %v, key %x", n, ok, s.Key[:s.Len])
		}
	}
	// A record shorter than its key says is refused.
	if _, ok := decodeSample(make([]byte, sampleHeader)); !ok {
		t.Fatal("an empty key's record is refused")
	}
	bad := make([]byte, sampleHeader+8)
	binary.NativeEndian.PutUint16(bad[12:], 9) // len
	if _, ok := decodeSample(bad); ok {
		t.Fatal("a record cut inside its key is taken")
	}
}

// The threshold is just above the sketch's noise, μ + 3√μ + 4 (μ the
// mean count of a cell of the busiest CPU that counts no candidate),
// within the maximum, whatever it was before.
func TestLearnThreshold(t *testing.T) {
	rows := func(perCell uint32) [][]santaSantaLearnRow {
		var busy, idle santaSantaLearnRow
		for i := range busy.Cells {
			busy.Cells[i] = perCell
		}
		return [][]santaSantaLearnRow{{idle, busy}, {idle, busy}}
	}
	for _, c := range []struct {
		before, perCell, want uint32
	}{
		{1000, 0, 4},
		{4, 100, 100 + 30 + 4},
		{4, 10000, 10000 + 300 + 4},
		{4, 1 << 30, learnMaxThreshold},
	} {
		l := &learner{threshold: c.before, rows: rows(c.perCell)}
		l.adapt(nil)
		if l.threshold != c.want {
			t.Errorf("threshold %d, μ %d: next %d; want %d", c.before, c.perCell, l.threshold, c.want)
		}
	}
	// The candidates' cells are not noise: a head of 100 cells counting
	// 10000 each, over a tail of 100 per cell.
	l := &learner{threshold: 4, rows: rows(100)}
	known := map[uint32]bool{}
	for c := range 100 {
		l.rows[0][1].Cells[c*7] = 10000
		known[uint32(c*7)] = true
	}
	l.adapt(known)
	if l.threshold != 100+30+4 {
		t.Errorf("threshold %d with a head of candidates; want %d", l.threshold, 100+30+4)
	}
}

// stayOnOneCPU keeps the test's goroutine on one thread and that thread on
// the CPU it runs on, until the test ends: BPF_PROG_TEST_RUN runs on the
// caller's CPU, and the sketch and the sample budget are per CPU.
func stayOnOneCPU(t *testing.T) {
	runtime.LockOSThread()
	var old, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		t.Fatal(err)
	}
	var c [1]uint32
	if _, _, errno := unix.Syscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&c[0])), 0, 0); errno != 0 {
		t.Fatal(errno)
	}
	one.Set(int(c[0]))
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unix.SchedSetaffinity(0, &old)
		runtime.UnlockOSThread()
	})
}
