package main

import (
	"bufio"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// TestAppendSet: a SET of key i to its own value, in memcached's text
// protocol.
func TestAppendSet(t *testing.T) {
	got := string(appendSet(appendSet(nil, 0), 7))
	want := "set usr:000000000000 0 0 2\r\n00\r\nset usr:user:000000000007 0 0 2\r\n07\r\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// fakeMemcached answers each SET it reads (a command line and a data
// line) with reply, on a loopback listener.
func fakeMemcached(t *testing.T, reply string) func() (net.Conn, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if strings.HasPrefix(line, "set ") {
						if _, err := r.ReadString('\n'); err != nil {
							return
						}
						conn.Write([]byte(reply))
					}
				}
			}()
		}
	}()
	return func() (net.Conn, error) { return net.Dial("tcp", ln.Addr().String()) }
}

// TestMixConn: SETs are exchanged in batches on a connection dialed on
// demand and again after redial; an answer other than STORED is an error
// that names it.
func TestMixConn(t *testing.T) {
	c := &mixConn{dial: fakeMemcached(t, "STORED\r\n")}
	defer c.close()
	var buf []byte
	for i := range mixInFlight {
		buf = appendSet(buf, i)
	}
	if err := c.exchange(buf, mixInFlight); err != nil {
		t.Fatal(err)
	}
	first := c.conn
	if err := c.redial(); err != nil {
		t.Fatal(err)
	}
	if c.conn == first {
		t.Error("redial kept the connection")
	}
	if err := c.exchange(buf, mixInFlight); err != nil {
		t.Fatal(err)
	}

	bad := &mixConn{dial: fakeMemcached(t, "SERVER_ERROR out of memory\r\n")}
	defer bad.close()
	err := bad.exchange(appendSet(nil, 1), 1)
	if err == nil || !strings.Contains(err.Error(), "SERVER_ERROR out of memory") {
		t.Errorf("got %v, want the SET's answer named", err)
	}
}

// TestMixWriterExchange: a round of the mix puts at most mixInFlight SETs
// on each of its connections (the data plane follows 16 writes in flight
// per connection), and says how many were acknowledged.
func TestMixWriterExchange(t *testing.T) {
	w := newMixWriter(fakeMemcached(t, "STORED\r\n"), 100, 0.05)
	defer func() {
		for _, c := range w.conns {
			c.close()
		}
	}()
	seq := []uint32{1, 2, 3}
	var buf []byte
	for _, tc := range []struct{ n, want uint64 }{{1, 1}, {50, 50}, {mixConns * mixInFlight, mixConns * mixInFlight}, {1000, mixConns * mixInFlight}} {
		got, err := w.exchange(seq, 0, tc.n, &buf)
		if err != nil || got != tc.want {
			t.Errorf("exchange of %d: %d, %v; want %d", tc.n, got, err, tc.want)
		}
		if len(buf) == 0 || strings.Count(string(buf), "set ") > mixInFlight {
			t.Errorf("exchange of %d: the last connection got %d SETs at once; want 1 to %d", tc.n, strings.Count(string(buf), "set "), mixInFlight)
		}
	}
}

// TestMixDue: the writer sends what it owes up to mixBacklog and forgoes
// the rest for good, so that it never bursts after falling behind.
func TestMixDue(t *testing.T) {
	for _, tc := range []struct{ want, sent, forgone, n, nowForgone uint64 }{
		{want: 10, n: 10},
		{want: 10, sent: 10},
		{want: 1000, sent: 10, n: mixBacklog, nowForgone: 1000 - 10 - mixBacklog},
		{want: 1010, sent: 10 + mixBacklog, forgone: 1000 - 10 - mixBacklog, n: 10, nowForgone: 1000 - 10 - mixBacklog},
		{want: 5, sent: 10}, // the pace fell back (fewer replies counted): nothing
	} {
		n, f := due(tc.want, tc.sent, tc.forgone)
		if n != tc.n || f != tc.nowForgone {
			t.Errorf("due(%d, %d, %d) = %d, %d; want %d, %d", tc.want, tc.sent, tc.forgone, n, f, tc.n, tc.nowForgone)
		}
	}
}

// TestMixAwaitAfterRedial: SETs sent before an agent's start redialled
// the connection are awaited on the connection they went on, which the
// redial closed: the wait ends, where waiting on the new connection for
// them would block until the run ends.
func TestMixAwaitAfterRedial(t *testing.T) {
	c := &mixConn{dial: fakeMemcached(t, "STORED\r\n")}
	defer c.close()
	r, err := c.send(appendSet(nil, 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.redial(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- await(r, 1) }()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, net.ErrClosed) {
			t.Errorf("await after a redial: %v; want the reply or the old connection closed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("await after a redial still blocked after 5 s")
	}
}
