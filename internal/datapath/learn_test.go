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

	"github.com/cilium/ebpf"
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

// oneCount checks that learn_counts holds one key, counted n times (none
// if n is 0), and returns its hash.
func oneCount(t *testing.T, d *Datapath, n uint64) uint64 {
	t.Helper()
	counts, err := d.learnCounts()
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		if len(counts) != 0 {
			t.Fatalf("counts %v; want none", counts)
		}
		return 0
	}
	if len(counts) != 1 {
		t.Fatalf("counts %v; want one key counted %d times", counts, n)
	}
	for h, got := range counts {
		if got != n {
			t.Fatalf("key %x counted %d times; want %d", h, got, n)
		}
		return h
	}
	return 0
}

// The data plane counts a learning service's passed requests by their key,
// exactly, and samples a key once a window, when its count reaches the
// threshold, within the budget; answered requests and probes are not
// counted, and a probe is never answered.
func TestLearnFixtures(t *testing.T) {
	stayOnOneCPU(t) // the budget is per CPU
	d := openTest(t)
	s, to := learningService(t, d)
	if err := d.learnConfig(2, 3); err != nil {
		t.Fatal(err)
	}
	query := func(txid uint16, name string) []byte { return request(to, pkttest.DNSQuery(txid, name)).Bytes() }

	for i := range 5 {
		xdpPasses(t, d, query(uint16(i), "www.example.com"))
	}
	hash := oneCount(t, d, 5)
	samples, err := d.learnSamples()
	if err != nil {
		t.Fatal(err)
	}
	key := pkttest.DNSQuery(0, "www.example.com")[2:]
	if len(samples) != 1 {
		t.Fatalf("%d samples after 5 requests over a threshold of 2; want 1", len(samples))
	}
	if got := samples[0]; got.Learn != d.learnID(s) || got.Hash != hash || got.Passes != 2 || !bytes.Equal(got.Key[:got.Len], key) {
		t.Fatalf("sample: learn %d hash %x passes %d key %x; want %d, %x, 2, %x", got.Learn, got.Hash, got.Passes,
			got.Key[:got.Len], d.learnID(s), hash, key)
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
	oneCount(t, d, 5)

	// Not counted: an empty key, a key over the limit. A key at the limit is.
	xdpPasses(t, d, request(to, []byte{1, 2}).Bytes())
	xdpPasses(t, d, request(to, make([]byte, 2+model.MaxLearnKey+1)).Bytes())
	oneCount(t, d, 5)
	xdpPasses(t, d, request(to, bytes.Repeat([]byte{7}, 2+model.MaxLearnKey)).Bytes())
	if counts, _ := d.learnCounts(); len(counts) != 2 {
		t.Errorf("a %d-byte key was not counted: %v", model.MaxLearnKey, counts)
	}

	// The budget: two samples more in this window, whatever reaches the
	// threshold; the next window has a budget of its own.
	for _, name := range []string{"a.example", "b.example", "c.example"} {
		for i := range 2 {
			xdpPasses(t, d, query(uint16(i), name))
		}
	}
	if samples, err = d.learnSamples(); err != nil || len(samples) != 2 {
		t.Fatalf("%d samples (%v) after three more keys reached the threshold; the budget of 3 leaves 2", len(samples), err)
	}
	if err := d.objs.LearnConfig.Put(uint32(0), santaSantaLearnConfig{Window: 1, Threshold: 2, Budget: 3, Counts: model.MaxLearnCounts}); err != nil {
		t.Fatal(err)
	}
	// In a new window the budget is whole again, and a key's count
	// starts anew: c.example, left out, and www.example.com come again.
	for i := range 2 {
		xdpPasses(t, d, query(uint16(i), "c.example"))
		xdpPasses(t, d, query(uint16(i), "www.example.com"))
	}
	if samples, err = d.learnSamples(); err != nil || len(samples) != 2 {
		t.Fatalf("%d samples (%v) in a new window; want 2", len(samples), err)
	}

	st, err := d.ServiceStats(s)
	if err != nil {
		t.Fatal(err)
	}
	if want := (model.ServiceStats{Matched: 1, Passed: 5 + 2 + 3 + 6 + 4}); st != want {
		t.Errorf("service stats %+v, want %+v", st, want)
	}
}

// TC counts what XDP did not see (loopback, here): the same key, the same
// count.
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
	hash := oneCount(t, d, 2)
	samples, err := d.learnSamples()
	if err != nil || len(samples) != 1 || samples[0].Hash != hash {
		t.Fatalf("samples %+v (%v); want one for hash %x", samples, err, hash)
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
	oneCount(t, d, 0)
	if _, err := d.Hot(s, 0, 10); !errors.Is(err, model.ErrNotLearning) {
		t.Errorf("Hot of a service that does not learn: %v, want ErrNotLearning", err)
	}
}

// Hot is the passed requests per window, most first: from its sample on
// in a key's first window with passes, smoothed while it keeps passing.
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
	send("c.example", 1) // below the threshold (2): never sampled
	if err := d.learnStep(); err != nil {
		t.Fatal(err)
	}
	hot, err := d.Hot(s, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	// Counted from their samples, at their second pass.
	want := []string{"b.example:10", "a.example:5"}
	if got := hotNames(hot); fmt.Sprint(got) != fmt.Sprint(want) || hot.Window <= 0 || hot.Total != 2 || hot.Number == 0 {
		t.Fatalf("hot %v over %v (window %d, total %d); want %v over a numbered window", got, hot.Window, hot.Number, hot.Total, want)
	}
	// Pages: the first, the second, past the end.
	for _, p := range []struct {
		from, n int
		want    []string
	}{{0, 1, want[:1]}, {1, 5, want[1:]}, {2, 5, nil}, {7, 1, nil}} {
		page, err := d.Hot(s, p.from, p.n)
		if got := hotNames(page); err != nil || fmt.Sprint(got) != fmt.Sprint(p.want) || page.Total != 2 || page.Number != hot.Number {
			t.Errorf("Hot(from %d, %d) gave %v of %d in window %d (%v); want %v of 2 in window %d", p.from, p.n, got, page.Total, page.Number, err, p.want, hot.Number)
		}
	}
	number := hot.Number
	// The next window: a.example passes 9 times, smoothed to
	// 5 + 0.3 × (9 - 5) = 6.2; b.example does not pass, and leaves.
	send("a.example", 9)
	if err := d.learnStep(); err != nil {
		t.Fatal(err)
	}
	if hot, _ = d.Hot(s, 0, 10); fmt.Sprint(hotNames(hot)) != "[a.example:6]" || hot.Number != number+1 {
		t.Fatalf("second window: %v in window %d, want [a.example:6] in %d", hotNames(hot), hot.Number, number+1)
	}
	// b.example passes again: exact again.
	send("b.example", 4)
	if err := d.learnStep(); err != nil {
		t.Fatal(err)
	}
	if hot, _ = d.Hot(s, 0, 10); fmt.Sprint(hotNames(hot)) != "[b.example:4]" {
		t.Fatalf("third window: %v, want [b.example:4]", hotNames(hot))
	}
	if err := d.RemoveService(s); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Hot(s, 0, 10); !errors.Is(err, model.ErrUnknownService) {
		t.Errorf("Hot of a removed service: %v", err)
	}
}

// learnedOne is a learning service whose a.example is a candidate, after
// one step.
func learnedOne(t *testing.T) (*Datapath, model.ServiceID, netip.AddrPort) {
	t.Helper()
	d := openTest(t)
	s, to := learningService(t, d)
	for i := range 5 {
		xdpPasses(t, d, request(to, pkttest.DNSQuery(uint16(i), "a.example")).Bytes())
	}
	if err := d.learnStep(); err != nil {
		t.Fatal(err)
	}
	return d, s, to
}

// closeWatch swaps the learner's learn_watch for a closed copy, on which
// every call fails, until restore.
func closeWatch(t *testing.T, l *learner) (restore func()) {
	t.Helper()
	closed, err := l.objs.LearnWatch.Clone()
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	watch := l.objs.LearnWatch
	l.objs.LearnWatch = closed
	return func() { l.objs.LearnWatch = watch }
}

// A step that fails while it watches new keys leaves the last hot set
// whole, with its number: a reader never sees half a set.
func TestHotSetWholeAfterAFailedStep(t *testing.T) {
	d, s, to := learnedOne(t)
	before, err := d.Hot(s, 0, 10)
	if err != nil || len(before.Requests) != 1 {
		t.Fatalf("hot %v (%v); want a.example", hotNames(before), err)
	}
	// A new key is sampled, and cannot be watched: learn_watch is a
	// closed copy.
	for i := range 3 {
		xdpPasses(t, d, request(to, pkttest.DNSQuery(uint16(i), "b.example")).Bytes())
	}
	restore := closeWatch(t, d.store.learn)
	err = d.learnStep()
	restore()
	if err == nil {
		t.Fatal("a step that could not watch its new key did not fail")
	}
	after, err := d.Hot(s, 0, 10)
	if err != nil || fmt.Sprint(hotNames(after)) != fmt.Sprint(hotNames(before)) || after.Number != before.Number || after.Window != before.Window {
		t.Errorf("after a failed step: %v of window %d (%v); want the last set, %v of window %d", hotNames(after), after.Number, err, hotNames(before), before.Number)
	}
}

// A key the kernel fails to unwatch stays a candidate, with its slot, and
// is unwatched when tried again: forgotten, it would hold its slot and
// never be sampled again.
func TestUnwatchKeepsWhatTheKernelKept(t *testing.T) {
	d, _, _ := learnedOne(t)
	l := d.store.learn
	l.mu.Lock()
	defer l.mu.Unlock()
	var hashes []uint64
	for h := range l.byHash {
		hashes = append(hashes, h)
	}
	if len(hashes) != 1 {
		t.Fatalf("%d candidates; want a.example's", len(hashes))
	}
	restore := closeWatch(t, l)
	err := l.unwatch(hashes)
	restore()
	if err == nil || l.byHash[hashes[0]] == nil || len(l.slots.given) != 0 {
		t.Fatalf("unwatching through a closed map: %v, candidate kept %v, %d slots given; want an error, the candidate and its slot kept",
			err, l.byHash[hashes[0]] != nil, len(l.slots.given))
	}
	if err := l.unwatch(hashes); err != nil || l.byHash[hashes[0]] != nil || len(l.slots.given) != 1 {
		t.Fatalf("unwatching again: %v, candidate kept %v, %d slots given; want it gone and its slot given", err, l.byHash[hashes[0]] != nil, len(l.slots.given))
	}
	var slot uint32
	if err := l.objs.LearnWatch.Lookup(hashes[0], &slot); !errors.Is(err, ebpf.ErrKeyNotExist) {
		t.Errorf("learn_watch still has the key: %v", err)
	}
}

// A candidate idle for learnIdleWindows is no longer watched; when it
// passes the threshold's times in a window again, it is a candidate again.
func TestHotForgetsIdle(t *testing.T) {
	d := openTest(t)
	s, to := learningService(t, d)
	send := func(n int) {
		for i := range n {
			xdpPasses(t, d, request(to, pkttest.DNSQuery(uint16(i), "idle.example")).Bytes())
		}
	}
	hotIs := func(want string) {
		t.Helper()
		if err := d.learnStep(); err != nil {
			t.Fatal(err)
		}
		hot, err := d.Hot(s, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(hotNames(hot)); got != want {
			t.Fatalf("hot %s; want %s", got, want)
		}
	}
	watched := func() int {
		n := 0
		var h uint64
		var slot uint32
		for it := d.objs.LearnWatch.Iterate(); it.Next(&h, &slot); {
			n++
		}
		return n
	}
	send(5) // sampled at its second pass
	hotIs("[idle.example:3]")
	for range learnIdleWindows {
		if err := d.learnStep(); err != nil {
			t.Fatal(err)
		}
	}
	if watched() != 1 {
		t.Fatalf("%d keys watched after %d idle windows; want 1", watched(), learnIdleWindows)
	}
	hotIs("[]")
	if watched() != 0 {
		t.Fatalf("%d keys watched after %d idle windows; want none", watched(), learnIdleWindows+1)
	}
	send(1) // once in a window: no sample
	hotIs("[]")
	send(4)
	hotIs("[idle.example:2]")
}

// A CPU counts at most learn_config.counts passed requests a window; the
// hot set scales the counts up by passed / counted.
func TestLearnCountsBudget(t *testing.T) {
	stayOnOneCPU(t) // the counts are per CPU
	d := openTest(t)
	s, to := learningService(t, d)
	if err := d.objs.LearnConfig.Put(uint32(0), santaSantaLearnConfig{Threshold: 2, Budget: 100, Counts: 4}); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		xdpPasses(t, d, request(to, pkttest.DNSQuery(uint16(i), "budget.example")).Bytes())
	}
	oneCount(t, d, 4)
	if err := d.learnStep(); err != nil {
		t.Fatal(err)
	}
	hot, err := d.Hot(s, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	// Counted 4 of 8: sampled at its second, then 2 more, times 8 / 4.
	if got := fmt.Sprint(hotNames(hot)); got != "[budget.example:4]" || hot.CountedPPM != 500000 {
		t.Fatalf("hot %s, %d ppm counted; want [budget.example:4], 500000", got, hot.CountedPPM)
	}
}

// A candidate is slow by its counted passes, which the threshold counts:
// 12 passes a window from a quarter counted are 3 counts, under half of
// a threshold of 8.
func TestLearnSlowByCounts(t *testing.T) {
	l := &learner{threshold: 8}
	for _, c := range []struct {
		rate, scale float64
		want        bool
	}{
		{12, 4, true}, {12, 1, false}, {16, 4, false}, {3, 1, true}, {-1, 1, false},
	} {
		if got := l.slow(&candidate{rate: c.rate}, c.scale); got != c.want {
			t.Errorf("rate %v at scale %v: slow %v, want %v", c.rate, c.scale, got, c.want)
		}
	}
}

// The data plane counts as many passed requests a CPU and window as the
// learning service that asks for most: the default unless each asks for
// fewer. A change of counts keeps the service's count.
func TestLearnCountsAsked(t *testing.T) {
	d := openTest(t)
	a, _ := learningService(t, d)
	b, _ := learningService(t, d)
	set := func(s model.ServiceID, counts uint32) {
		t.Helper()
		if err := d.SetLearning(s, model.Learning{KeyOffset: 2, ProbePort: probePort, Enabled: true, Counts: counts}); err != nil {
			t.Fatal(err)
		}
	}
	counts := func(want uint32) {
		t.Helper()
		if err := d.learnStep(); err != nil {
			t.Fatal(err)
		}
		var cfg santaSantaLearnConfig
		if err := d.objs.LearnConfig.Lookup(uint32(0), &cfg); err != nil {
			t.Fatal(err)
		}
		if cfg.Counts != want {
			t.Fatalf("the data plane counts %d a window; want %d", cfg.Counts, want)
		}
	}
	counts(model.MaxLearnCounts)
	id := d.store.services[a].learnID
	set(a, 1000)
	counts(model.MaxLearnCounts) // b asks for the default
	if got := d.store.services[a].learnID; got != id {
		t.Fatalf("a change of counts started a new count: learn id %d, was %d", got, id)
	}
	set(b, 5000)
	counts(5000)
	set(b, model.MaxLearnCounts+1) // above the most: the most
	counts(model.MaxLearnCounts)
	if err := d.SetLearning(b, model.Learning{}); err != nil {
		t.Fatal(err)
	}
	counts(1000)
	set(a, 0)
	counts(model.MaxLearnCounts)
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
	hot, err := d.Hot(s, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(hotNames(hot)); got != "[real.example:7]" { // the 9 after the 2 that brought its sample
		t.Fatalf("hot %s; want [real.example:7]", got)
	}
}

// A sample's record on the ring is its header and its key rounded up to 8
// bytes, whatever the key's length: a DNS query's takes a fraction of a
// full 256-byte key's room. The rounding's bytes are zero, not those of
// an earlier, longer request the CPU's scratch still holds.
func TestLearnSampleRecordSize(t *testing.T) {
	stayOnOneCPU(t)
	d := openTest(t)
	_, to := learningService(t, d)
	if err := d.learnConfig(1, 100); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{model.MaxLearnKey, 31, 9, 8, 1} {
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
		if rest := recs[0][sampleHeader+n:]; !bytes.Equal(rest, make([]byte, len(rest))) {
			t.Fatalf("%d-byte key: the record's rounding holds %x; want zeros", n, rest)
		}
	}
	// The header's fields are read where the C struct has them.
	rec := make([]byte, sampleHeader+8)
	var at santaSantaLearnSample
	binary.NativeEndian.PutUint64(rec[unsafe.Offsetof(at.Hash):], 0x0102030405060708)
	binary.NativeEndian.PutUint32(rec[unsafe.Offsetof(at.Passes):], 77)
	binary.NativeEndian.PutUint32(rec[unsafe.Offsetof(at.Learn):], 5)
	binary.NativeEndian.PutUint16(rec[unsafe.Offsetof(at.Len):], 3)
	copy(rec[sampleHeader:], "abc")
	if s, ok := decodeSample(rec); !ok || s.Hash != 0x0102030405060708 || s.Passes != 77 || s.Learn != 5 || string(s.Key[:s.Len]) != "abc" {
		t.Fatalf("decoded %v: hash %#x passes %d learn %d key %q", ok, s.Hash, s.Passes, s.Learn, s.Key[:s.Len])
	}
	// A record shorter than its key says is refused.
	if _, ok := decodeSample(make([]byte, sampleHeader)); !ok {
		t.Fatal("an empty key's record is refused")
	}
	bad := make([]byte, sampleHeader+8)
	binary.NativeEndian.PutUint16(bad[unsafe.Offsetof(santaSantaLearnSample{}.Len):], 9)
	if _, ok := decodeSample(bad); ok {
		t.Fatal("a record cut inside its key is taken")
	}
}

// The threshold doubles after a window in which a CPU spent its budget,
// halves after one in which each took less than a quarter, and stays
// within its bounds.
func TestLearnThreshold(t *testing.T) {
	for _, c := range []struct {
		before, busiest, want uint32
	}{
		{2, 0, 2},
		{64, 0, 32},
		{64, learnBudget/4 - 1, 32},
		{64, learnBudget / 4, 64},
		{64, learnBudget - 1, 64},
		{64, learnBudget, 128},
		{learnMaxThreshold, learnBudget, learnMaxThreshold},
	} {
		l := &learner{threshold: c.before}
		l.adapt(c.busiest)
		if l.threshold != c.want {
			t.Errorf("threshold %d, busiest CPU's samples %d: next %d; want %d", c.before, c.busiest, l.threshold, c.want)
		}
	}
}

// stayOnOneCPU keeps the test's goroutine on one thread and that thread on
// the CPU it runs on, until the test ends: BPF_PROG_TEST_RUN runs on the
// caller's CPU, and the sample budget is per CPU.
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
