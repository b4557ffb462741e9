package mcagent

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeMG is a TCP server answering mg as memcached does, from items; it
// counts the connections it accepted.
func fakeMG(t *testing.T, items map[string]string) (*net.TCPListener, *atomic.Int32) {
	t.Helper()
	l, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var conns atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					f := strings.Fields(line) // mg KEY f t v
					v, ok := items[f[1]]
					if !ok {
						c.Write([]byte("EN\r\n"))
						continue
					}
					c.Write([]byte("VA " + strconv.Itoa(len(v)) + " f3 t-1\r\n" + v + "\r\n"))
				}
			}()
		}
	}()
	return l, &conns
}

// Items are read in one pipelined batch, in order, misses among them; the
// connection is kept, and dialled afresh after Reset.
func TestItems(t *testing.T) {
	l, conns := fakeMG(t, map[string]string{"a": "1", "c": "333"})
	m := newItems("")
	defer m.Close()
	dst := l.Addr().(*net.TCPAddr).AddrPort()
	read := func() {
		t.Helper()
		got, err := m.Read(context.Background(), dst, [][]byte{[]byte("a"), []byte("b"), []byte("c")}, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if string(got[0].it.data) != "1" || got[0].it.flags != "3" || got[0].it.ttl != -1 ||
			skipReason(got[1].err) != skipMiss || string(got[2].it.data) != "333" {
			t.Fatalf("read %+v", got)
		}
	}
	read()
	read()
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for two batches; want 1", n)
	}
	m.Reset()
	read()
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections after Reset; want 2", n)
	}
	if m.Sent() != 9 {
		t.Errorf("sent %d; want 9", m.Sent())
	}
}
