package dnsload

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/popularity"
)

// The queries the Debian 12 clients send for n1.example A, after the
// transaction id (captured from dnsperf 2.10, kdig 3.2, dig 9.18); the
// 8-byte cookies are each run's own.
func TestShapesAreTheClients(t *testing.T) {
	q := Question{Name: "n1.example", Type: TypeA}
	for shape, want := range map[Shape]string{
		RD:     "01000001000000000000026e31076578616d706c650000010001",                               // dnsperf
		EDNS:   "01000001000000000001026e31076578616d706c6500000100010000291000000000000000",         // dnsperf -e, kdig +edns
		EDNSDO: "01000001000000000001026e31076578616d706c6500000100010000291000000080000000",         // dnsperf -D
		RDAD:   "01200001000000000000026e31076578616d706c650000010001",                               // kdig
		Cookie: "01200001000000000001026e31076578616d706c65000001000100002904d000000000000c000a0008", // dig, cookie aside
	} {
		got := hex.EncodeToString(NewForm(q, shape).Bytes)
		if shape == Cookie {
			got = got[:len(got)-16]
		}
		if got != want {
			t.Errorf("%v:\n got %s\nwant %s", shape, got, want)
		}
	}
	if f := NewForm(q, Upper); !bytes.Contains(f.Bytes, []byte("N1\x07EXAMPLE")) {
		t.Errorf("upper: %x", f.Bytes)
	}
	if f := NewForm(q, Trailing); !bytes.Equal(f.Bytes, append(NewForm(q, RD).Bytes, 0)) {
		t.Errorf("trailing: %x", f.Bytes)
	}
	for _, s := range Shapes {
		if p, err := ParseShape(s.String()); err != nil || p != s {
			t.Errorf("ParseShape(%q) = %v, %v", s, p, err)
		}
	}
	if _, err := ParseShape("ecs"); err == nil {
		t.Error("ParseShape accepted an unknown shape")
	}
}

// answer is a reply to query with the A records addrs (the name a
// pointer to the question's) and, for an EDNS query, an OPT record with
// the COOKIE option echoed and a server cookie.
func answer(query []byte, serverCookie byte, addrs ...byte) []byte {
	m, err := parse(query)
	if err != nil {
		panic(err)
	}
	r := append([]byte(nil), m.head...)
	r[2] |= 0x80
	binary.BigEndian.PutUint16(r[6:], uint16(len(addrs)))
	for _, a := range addrs {
		r = append(r, 0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0x0e, 0x10, 0, 4, 10, 0, 0, a)
	}
	if len(m.sections[2]) == 1 { // the OPT record
		opt := append([]byte(nil), query[m.sections[2][0].start:]...)
		if len(opt) > 11 { // a cookie: client's + 8 bytes of server's
			opt = append(opt, serverCookie, 1, 2, 3, 4, 5, 6, 7)
			binary.BigEndian.PutUint16(opt[9:], 20)
			binary.BigEndian.PutUint16(opt[13:], 16)
		}
		r = append(r, opt...)
	}
	return r
}

func TestParseRejectsBadMessages(t *testing.T) {
	good := answer(NewForm(Question{"a.b", TypeA}, EDNS).Query(7), 0, 1)
	if _, err := parse(good); err != nil {
		t.Fatal(err)
	}
	for n := range len(good) {
		if _, err := parse(good[:n]); err == nil {
			t.Errorf("parse accepted the first %d of %d bytes", n, len(good))
		}
	}
	if _, err := parse(append(good, 0)); err == nil {
		t.Error("parse accepted a trailing byte")
	}
	bad := append([]byte(nil), good...)
	bad[12] = 0x80 // label type 10
	if _, err := parse(bad); err == nil {
		t.Error("parse accepted label type 0x80")
	}
}

func TestExpectMatches(t *testing.T) {
	rot := NewForm(Question{"rot.example", TypeA}, RD)
	r1, r2 := answer(rot.Query(1), 0, 1, 2, 3), answer(rot.Query(2), 0, 3, 1, 2)
	e := Expect{Reply: answer(rot.Query(0), 0, 1, 2, 3)}
	if !e.Matches(rot, r1) || e.Matches(rot, r2) {
		t.Error("a fixed expectation: the same bytes must match, another order not")
	}
	if !e.Equal(Expect{Reply: e.Reply}) || e.Equal(Expect{Reply: r2}) {
		t.Error("fixed expectations: equal only if the same bytes")
	}
	e.AnyOrder = true
	if !e.Equal(Expect{Reply: answer(rot.Query(0), 0, 3, 1, 2), AnyOrder: true}) || !severalOfAType(r2) || severalOfAType(answer(rot.Query(0), 0, 1)) {
		t.Error("any order: equal if the same records")
	}
	if !e.Matches(rot, r2) || e.Matches(rot, answer(rot.Query(2), 0, 1, 2, 4)) || e.Matches(rot, answer(rot.Query(2), 0, 1, 2)) {
		t.Error("any order: another order must match, other records not")
	}
	ck := NewForm(Question{"n1.example", TypeA}, Cookie)
	c1 := answer(ck.Query(0), 1, 9)
	if err := normalize(ck, c1); err != nil {
		t.Fatal(err)
	}
	e = Expect{Reply: c1}
	if !e.Matches(ck, answer(ck.Query(5), 2, 9)) {
		t.Error("a reply with another server cookie must match")
	}
	if e.Matches(ck, answer(ck.Query(5), 2, 8)) {
		t.Error("a reply with another address matched")
	}
}

// server answers on 127.0.0.1 with reply(query); nil: no reply. It ends
// with the test.
func server(t *testing.T, reply func(q []byte) [][]byte) netip.AddrPort {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			n, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			for _, r := range reply(buf[:n]) {
				conn.WriteToUDPAddrPort(r, from)
			}
		}
	}()
	return conn.LocalAddr().(*net.UDPAddr).AddrPort()
}

// forms are n names in the RD shape; name i's address is i (+ offset).
func testForms(n int) []Form {
	qs := make([]Question, n)
	for i := range qs {
		qs[i] = Question{Name: "n" + strings.Repeat("y", i) + ".example", Type: TypeA}
	}
	return Forms(qs, []Shape{RD})
}

func formIndex(q []byte) int { return bytes.Count(q[12:], []byte("y")) }

func TestLoadChecksEveryReply(t *testing.T) {
	forms := testForms(8)
	var asked atomic.Int64
	addr := server(t, func(q []byte) [][]byte {
		i := formIndex(q)
		switch n := asked.Add(1); {
		case i == 7 && n%2 == 0:
			return nil // form 7 loses every other query
		case i == 6 && n%3 == 0:
			return [][]byte{answer(q, 0, 66)} // form 6: a wrong address once in 3
		case i == 5 && n%5 == 0:
			return [][]byte{answer(q, 0, 5), answer(q, 0, 5)} // form 5: twice once in 5
		}
		return [][]byte{answer(q, 0, byte(i))}
	})
	conn, err := Dial("", addr)
	if err != nil {
		t.Fatal(err)
	}
	table, err := Capture(conn, forms[:5], 2)
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	for i := 5; i < 8; i++ {
		table = append(table, Expect{Reply: answer(forms[i].Query(0), 0, byte(i))})
	}
	res, err := Run(context.Background(), Config{Server: addr, Forms: forms, Expect: table, Count: 4000,
		Timeout: 100 * time.Millisecond, Window: 16, Popularity: popularity.Uniform, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(strings.SplitN(res.Report(forms), "\n", 2)[0])
	pf := res.PerForm
	if res.Sent != 4000 || res.Replies+res.Timeouts != res.Sent {
		t.Errorf("%d sent, %d replies, %d timeouts", res.Sent, res.Replies, res.Timeouts)
	}
	for i := range 5 {
		if pf[i].Mismatches+pf[i].Timeouts != 0 || pf[i].Replies == 0 {
			t.Errorf("form %d: %+v", i, pf[i])
		}
	}
	if pf[7].Timeouts == 0 || pf[7].Mismatches != 0 || pf[6].Mismatches == 0 || res.Mismatches != pf[6].Mismatches {
		t.Errorf("form 6 %+v, form 7 %+v, %d mismatches", pf[6], pf[7], res.Mismatches)
	}
	if res.Unexpected == 0 || len(res.FirstMismatches) != mismatchDumps || res.FirstMismatches[0].Form != 6 {
		t.Errorf("%d unexpected, first mismatches %+v", res.Unexpected, res.FirstMismatches)
	}
	if !strings.Contains(res.Report(forms), "mismatch for nyyyyyy.example/1/rd") {
		t.Errorf("report:\n%s", res.Report(forms))
	}
}

// A server restarting answers SERVFAIL until its zones are loaded: with
// Restarting those replies are counted apart, any other wrong reply is
// still a mismatch; without it they are mismatches.
func TestLoadServfailWhileRestarting(t *testing.T) {
	forms := testForms(2)
	var asked atomic.Int64
	addr := server(t, func(q []byte) [][]byte {
		r := answer(q, 0, byte(formIndex(q)))
		switch n := asked.Add(1); {
		case n%4 == 0:
			r = answer(q, 0)
			r[3] |= rcodeServfail
		case n%7 == 0:
			r = answer(q, 0, 66)
		}
		return [][]byte{r}
	})
	table := []Expect{{Reply: answer(forms[0].Query(0), 0, 0)}, {Reply: answer(forms[1].Query(0), 0, 1)}}
	for _, restarting := range []bool{false, true} {
		res, err := Run(context.Background(), Config{Server: addr, Forms: forms, Expect: table, Count: 280,
			Window: 1, Popularity: popularity.Uniform, Seed: 3, Restarting: restarting})
		if err != nil {
			t.Fatal(err)
		}
		servfails, wrong := 70, 40-10 // every 4th; every 7th but the 28th's
		want := Result{Mismatches: servfails + wrong}
		if restarting {
			want = Result{Starting: servfails, Mismatches: wrong}
		}
		if res.Starting != want.Starting || res.Mismatches != want.Mismatches {
			t.Errorf("restarting %v: %d SERVFAIL while starting, %d mismatches; want %d, %d",
				restarting, res.Starting, res.Mismatches, want.Starting, want.Mismatches)
		}
	}
}

// A reply that comes after its query timed out counts as late, not lost
// nor unexpected, even when that query was the run's last; one query and
// reply per syscall or in batches.
func TestLoadCountsALateLastReply(t *testing.T) {
	forms := testForms(1)
	for _, batch := range []int{0, 64} {
		var asked atomic.Int64
		addr := server(t, func(q []byte) [][]byte {
			if asked.Add(1) == 10 {
				time.Sleep(150 * time.Millisecond)
			}
			return [][]byte{answer(q, 0, 0)}
		})
		res, err := Run(context.Background(), Config{Server: addr, Forms: forms,
			Expect: []Expect{{Reply: answer(forms[0].Query(0), 0, 0)}}, Count: 10, Timeout: 100 * time.Millisecond,
			Window: 1, Batch: batch, Popularity: popularity.Uniform, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if res.Replies != 9 || res.Timeouts != 1 || res.Late != 1 || res.Unexpected != 0 {
			t.Errorf("batch %d: %d replies, %d timeouts, %d late, %d unexpected; want 9, 1, 1 and 0",
				batch, res.Replies, res.Timeouts, res.Late, res.Unexpected)
		}
	}
}

// A server that restarts: while no socket is bound to its port, the
// client's socket reports port unreachable; the run counts it and goes
// on, and the queries after the restart are answered; one query and
// reply per syscall or in batches.
func TestLoadGoesOnThroughARestart(t *testing.T) {
	for _, batch := range []int{0, 64} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) { testLoadGoesOnThroughARestart(t, batch) })
	}
}

func testLoadGoesOnThroughARestart(t *testing.T, batch int) {
	forms := testForms(1)
	want := answer(forms[0].Query(0), 0, 0)
	serve := func(conn *net.UDPConn, n int) {
		buf := make([]byte, 4096)
		for range n {
			m, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			conn.WriteToUDPAddrPort(answer(buf[:m], 0, 0), from)
		}
	}
	first, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	addr := first.LocalAddr().(*net.UDPAddr).AddrPort()
	go func() {
		serve(first, 20)
		first.Close() // down: the next queries find no socket
		time.Sleep(300 * time.Millisecond)
		again, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
		if err != nil {
			return // the run then fails for want of replies
		}
		t.Cleanup(func() { again.Close() })
		serve(again, 1<<30)
	}()
	res, err := Run(context.Background(), Config{Server: addr, Forms: forms, Expect: []Expect{{Reply: want}},
		Count: 1 << 30, Duration: time.Second, Timeout: 50 * time.Millisecond, Window: 1, Batch: batch,
		Popularity: popularity.Uniform, Seed: 1})
	if err != nil {
		t.Fatalf("the run stopped: %v", err)
	}
	if res.Refused == 0 || res.Replies <= 20 || res.Mismatches+res.Unexpected != 0 {
		t.Errorf("%d refused, %d replies, %d mismatches, %d unexpected; want refusals, more than 20 replies, no mismatch",
			res.Refused, res.Replies, res.Mismatches, res.Unexpected)
	}
}

// A change: the server answers old data, then new; a reply with the old
// data after the change's completion + StaleAfter is stale.
func TestLoadAcrossAChange(t *testing.T) {
	forms := testForms(4)
	var phase atomic.Int32 // 0: old, 1: new, 2: old again (a stale answerer)
	addr := server(t, func(q []byte) [][]byte {
		a := byte(formIndex(q))
		if a == 2 && phase.Load() == 1 {
			a = 200 // the change: form 2's address
		}
		return [][]byte{answer(q, 0, a)}
	})
	old := make([]Expect, len(forms))
	for i, f := range forms {
		old[i] = Expect{Reply: answer(f.Query(0), 0, byte(i))}
	}
	next := append([]Expect(nil), old...)
	next[2] = Expect{Reply: answer(forms[2].Query(0), 0, 200)}
	l, err := Start(context.Background(), Config{Server: addr, Forms: forms, Expect: old, Count: 1 << 30,
		Duration: 600 * time.Millisecond, StaleAfter: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	l.BeginChange()
	time.Sleep(50 * time.Millisecond)
	phase.Store(1)
	done := time.Now()
	time.Sleep(50 * time.Millisecond)
	if err := l.EndChange(next, done); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	phase.Store(2)
	res, err := l.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.Mismatches != 0 || res.OldReplies == 0 || res.Stale == 0 || res.Stale != res.PerForm[2].Stale {
		t.Errorf("%s", res.Report(forms))
	}
	if res.LastOld.Before(done.Add(100 * time.Millisecond)) {
		t.Errorf("last old reply at %v, before the stale answerer came back", res.LastOld.Sub(done))
	}
	if err := l.EndChange(next, done); err == nil {
		t.Error("EndChange without BeginChange")
	}
}

func TestShiftRotatesTheRanking(t *testing.T) {
	forms := testForms(10)
	addr := server(t, func(q []byte) [][]byte { return [][]byte{answer(q, 0, byte(formIndex(q)))} })
	table := make([]Expect, len(forms))
	for i, f := range forms {
		table[i] = Expect{Reply: answer(f.Query(0), 0, byte(i))}
	}
	res, err := Run(context.Background(), Config{Server: addr, Forms: forms, Expect: table, Count: 20000,
		Popularity: popularity.Popularity{Zipf: true, S: 2}, Shift: true})
	if err != nil {
		t.Fatal(err)
	}
	// Zipf s=2: form 0 is 65 % of the first half, form 5 of the second.
	if pf := res.PerForm; res.Mismatches != 0 || pf[0].Sent < 5000 || pf[5].Sent < 5000 || pf[1].Sent > 3000 {
		t.Errorf("%+v\n%s", pf, res.Report(forms))
	}
}

func TestWriteDnsperfQueries(t *testing.T) {
	qs := []Question{{"a.example", TypeA}, {"b.example", TypeTXT}, {"c.example", 99}}
	var b strings.Builder
	if err := WriteDnsperfQueries(&b, qs, []uint32{0, 0, 1, 2}); err != nil {
		t.Fatal(err)
	}
	if want := "a.example A\na.example A\nb.example TXT\nc.example TYPE99\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
	if err := WriteDnsperfQueries(&b, qs, []uint32{3}); err == nil {
		t.Error("a question out of range was written")
	}
}
