package dnsload

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/popularity"
)

// mmsgPair is a client socket with timestamps and its batch of n, and
// the peer it is connected to, on loopback.
func mmsgPair(t *testing.T, n int) (*net.UDPConn, *mmsg, *net.UDPConn) {
	t.Helper()
	peer, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	conn, err := Dial("", peer.LocalAddr().(*net.UDPAddr).AddrPort())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := timestamps(conn); err != nil {
		t.Fatal(err)
	}
	m, err := newMmsg(conn, n)
	if err != nil {
		t.Fatal(err)
	}
	return conn, m, peer
}

// A batch reads what is there, at most its size: 10 datagrams waiting
// are read 4, 4, then 2 (a partial batch), each with its own bytes and
// its kernel arrival time; then nothing, until the read deadline.
func TestMmsgReadsWhatIsThere(t *testing.T) {
	conn, m, peer := mmsgPair(t, 4)
	to := conn.LocalAddr().(*net.UDPAddr)
	for i := range 10 {
		if _, err := peer.WriteToUDP(bytes.Repeat([]byte{byte(i)}, i), to); err != nil {
			t.Fatal(err)
		}
	}
	sent := time.Now()
	time.Sleep(50 * time.Millisecond)
	conn.SetReadDeadline(time.Now().Add(time.Second))
	next := 0
	for _, want := range []int{4, 4, 2} {
		read := time.Now()
		got, err := m.recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != want {
			t.Fatalf("read %d datagrams, want %d", len(got), want)
		}
		for _, d := range got {
			if !bytes.Equal(d.b, bytes.Repeat([]byte{byte(next)}, next)) {
				t.Errorf("datagram %d: %x", next, d.b)
			}
			// The kernel's stamp: before the sleep was over, not the read.
			if d.at.After(sent) || d.at.Before(sent.Add(-time.Second)) || !d.at.Before(read) {
				t.Errorf("datagram %d arrived at %v, sent by %v, read at %v", next, d.at, sent, read)
			}
			next++
		}
	}
	conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if got, err := m.recv(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read %d datagrams with none there, err %v; want the deadline", len(got), err)
	}
}

// A batch sends its datagrams in order, as many as given (the batch or
// fewer).
func TestMmsgSendsInOrder(t *testing.T) {
	_, m, peer := mmsgPair(t, 8)
	qs := [][]byte{[]byte("one"), []byte("two"), []byte("three")}
	if n, err := m.send(qs); n != 3 || err != nil {
		t.Fatalf("sent %d of 3: %v", n, err)
	}
	peer.SetReadDeadline(time.Now().Add(time.Second))
	buf := make([]byte, 100)
	for _, q := range qs {
		n, err := peer.Read(buf)
		if err != nil || !bytes.Equal(buf[:n], q) {
			t.Fatalf("got %q, %v; want %q", buf[:n], err, q)
		}
	}
}

// A port with no socket: the ICMP error comes back as ECONNREFUSED
// from recvmmsg, as from a plain read.
func TestMmsgReportsPortUnreachable(t *testing.T) {
	conn, m, peer := mmsgPair(t, 8)
	peer.Close()
	if n, err := m.send([][]byte{[]byte("anyone?")}); n != 1 || err != nil {
		t.Fatalf("sent %d of 1: %v", n, err)
	}
	conn.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := m.recv(); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("read: %v, want ECONNREFUSED", err)
	}
}

// faults is what faultServer did, by kind.
type faults struct {
	dropped, delayed, garbled, twice, stray, short atomic.Int64
}

// faultServer answers on 127.0.0.1 with the test's answer, but for the
// n-th query it receives: it drops it (n%101 == 0), answers it after
// delay (n%103 == 1), answers wrong bytes (n%107 == 2), answers twice
// (n%109 == 3), adds a reply for id 0xffff, which no query in the tests
// has (n%113 == 4), or a 1-byte datagram (n%127 == 5). It counts each.
func faultServer(t *testing.T, delay time.Duration) (*net.UDPConn, *faults) {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	f := &faults{}
	go func() {
		buf := make([]byte, 4096)
		for n := 0; ; n++ {
			m, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			q := buf[:m]
			r := answer(q, 0, byte(formIndex(q)))
			replies := [][]byte{r}
			switch {
			case n%101 == 0:
				f.dropped.Add(1)
				replies = nil
			case n%103 == 1:
				f.delayed.Add(1)
				time.AfterFunc(delay, func() { conn.WriteToUDPAddrPort(r, from) })
				replies = nil
			case n%107 == 2:
				f.garbled.Add(1)
				replies = [][]byte{answer(q, 0, 66)}
			case n%109 == 3:
				f.twice.Add(1)
				replies = append(replies, r)
			case n%113 == 4:
				f.stray.Add(1)
				other := append([]byte(nil), r...)
				binary.BigEndian.PutUint16(other, 0xffff)
				replies = append(replies, other)
			case n%127 == 5:
				f.short.Add(1)
				replies = append(replies, []byte{0})
			}
			for _, r := range replies {
				conn.WriteToUDPAddrPort(r, from)
			}
		}
	}()
	return conn, f
}

// Every reply is counted as what it is, exactly as the server made it,
// one query and reply per syscall or in batches: full ones, partial ones
// (a window smaller than the batch, or not a multiple of it), with
// corked full checksums.
func TestLoadCountsExactly(t *testing.T) {
	const timeout = 500 * time.Millisecond
	forms := testForms(4)
	table := make([]Expect, len(forms))
	for i, f := range forms {
		table[i] = Expect{Reply: answer(f.Query(0), 0, byte(i))}
	}
	for _, tc := range []struct {
		batch, window, count int
		full                 bool
	}{
		{0, 16, 3000, false},
		{64, 16, 3000, false},
		{8, 50, 3000, false},
		{64, 1, 300, false},
		{64, 16, 3000, true},
	} {
		t.Run(fmt.Sprintf("batch=%d/window=%d/full=%v", tc.batch, tc.window, tc.full), func(t *testing.T) {
			// A delayed reply comes after its query's timeout, and before
			// the run has waited lateWait for it.
			conn, f := faultServer(t, timeout+500*time.Millisecond)
			res, err := Run(context.Background(), Config{Server: conn.LocalAddr().(*net.UDPAddr).AddrPort(), Forms: forms,
				Expect: table, Count: tc.count, Window: tc.window, Batch: tc.batch, FullChecksums: tc.full,
				Timeout: timeout, Popularity: popularity.Uniform, Seed: 5})
			if err != nil {
				t.Fatal(err)
			}
			lost, delayed := int(f.dropped.Load()), int(f.delayed.Load())
			if f.stray.Load() == 0 || f.short.Load() == 0 || lost == 0 {
				t.Fatalf("the server made too few faults: %+v", f)
			}
			want := Result{Sent: tc.count, Replies: tc.count - lost - delayed, Timeouts: lost + delayed, Late: delayed,
				Unexpected: int(f.twice.Load() + f.stray.Load() + f.short.Load()), Mismatches: int(f.garbled.Load())}
			got := res
			got.PerForm, got.FirstMismatches, got.Elapsed = nil, nil, 0
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
			var sum FormCounts
			for _, pf := range res.PerForm {
				sum.Sent, sum.Replies, sum.Timeouts, sum.Mismatches = sum.Sent+pf.Sent, sum.Replies+pf.Replies,
					sum.Timeouts+pf.Timeouts, sum.Mismatches+pf.Mismatches
			}
			if sum != (FormCounts{Sent: want.Sent, Replies: want.Replies, Timeouts: want.Timeouts, Mismatches: want.Mismatches}) {
				t.Errorf("per form, summed: %+v", sum)
			}
		})
	}
}

func TestBatchOutOfRange(t *testing.T) {
	forms := testForms(1)
	for _, b := range []int{-1, MaxBatch + 1} {
		_, err := Start(context.Background(), Config{Forms: forms, Expect: make([]Expect, 1), Count: 1, Batch: b})
		if err == nil || err.Error() != fmt.Sprintf("dnsload: batch %d, want 0 to %d", b, MaxBatch) {
			t.Errorf("batch %d: %v", b, err)
		}
	}
}
