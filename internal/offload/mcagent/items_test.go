package mcagent

import (
	"bufio"
	"context"
	"net"
	"os/exec"
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

// TestEvictionsFromMemcached: Debian's memcached's stats carry the
// eviction counters the agent reads, on the connection it reads items on.
func TestEvictionsFromMemcached(t *testing.T) {
	if _, err := exec.LookPath("memcached"); err != nil {
		t.Fatal("memcached is not installed (make test-deps)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dst := l.Addr().(*net.TCPAddr).AddrPort()
	l.Close() // memcached takes the port
	cmd := exec.Command("memcached", "-u", "root", "-l", "127.0.0.1", "-p", strconv.Itoa(int(dst.Port())), "-U", "0", "-m", "8")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	m := newItems("")
	defer m.Close()
	var n uint64
	for start := time.Now(); ; {
		if n, err = m.Evictions(context.Background(), dst, time.Second); err == nil || time.Since(start) > 5*time.Second {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil || n != 0 {
		t.Fatalf("evictions %d, %v; want 0 from a fresh memcached", n, err)
	}
	got, err := m.Read(context.Background(), dst, [][]byte{[]byte("a")}, time.Second)
	if err != nil || skipReason(got[0].err) != skipMiss {
		t.Fatalf("an item read after stats on the same connection: %+v, %v", got, err)
	}
}
