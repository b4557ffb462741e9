package mccheck

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeMC is an in-process memcached for the checker's own tests: the text
// and meta commands the checker sends, over TCP and UDP (8-byte frames),
// on 127.0.0.1. Told to (fakeFaults), it lies or fails.
type fakeMC struct {
	fakeFaults
	tcp net.Listener
	udp *net.UDPConn

	udpSeen atomic.Int64
	tcpSeen atomic.Int64
	mu      sync.Mutex
	items   map[string]*fakeItem
	cas     uint64
	cache   map[string]cached // the stale UDP answers
	wg      sync.WaitGroup
}

type fakeItem struct {
	value string
	flags string
	cas   uint64
}

type cached struct {
	reply []byte
	until time.Time
}

// fakeFaults are the fake's lies and failures.
type fakeFaults struct {
	// staleFor keeps the answer of a UDP get, hit or miss, for that long
	// whatever is written meanwhile: a cache not invalidated.
	staleFor time.Duration
	// dropEvery drops every n-th UDP request; wrongKeyEvery answers every
	// n-th UDP get with another key's value.
	dropEvery, wrongKeyEvery int64
	// closeAfter closes the TCP connections after that many commands in
	// all.
	closeAfter int64
}

func startFake(t *testing.T, faults fakeFaults) *fakeMC {
	t.Helper()
	m := &fakeMC{fakeFaults: faults, items: map[string]*fakeItem{}, cache: map[string]cached{}}
	var err error
	if m.tcp, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if m.udp, err = net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
		t.Fatal(err)
	}
	m.wg.Add(2)
	go m.acceptTCP()
	go m.serveUDP()
	t.Cleanup(func() {
		m.tcp.Close()
		m.udp.Close()
		m.wg.Wait()
	})
	return m
}

func (m *fakeMC) addrs() (tcp, udp netip.AddrPort) {
	return m.tcp.Addr().(*net.TCPAddr).AddrPort(), m.udp.LocalAddr().(*net.UDPAddr).AddrPort()
}

func (m *fakeMC) acceptTCP() {
	defer m.wg.Done()
	for {
		c, err := m.tcp.Accept()
		if err != nil {
			return
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			defer c.Close()
			m.serve(bufio.NewReader(c), c, false)
		}()
	}
}

func (m *fakeMC) serveUDP() {
	defer m.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, from, err := m.udp.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		if seen := m.udpSeen.Add(1); m.dropEvery > 0 && seen%m.dropEvery == 0 {
			continue
		}
		if n < 8 {
			continue
		}
		var out bytes.Buffer
		out.Write(buf[:8])
		m.serve(bufio.NewReader(bytes.NewReader(buf[8:n])), &out, true)
		m.udp.WriteToUDPAddrPort(out.Bytes(), from)
	}
}

// serve runs commands from r until it ends, replying to w.
func (m *fakeMC) serve(r *bufio.Reader, w io.Writer, udp bool) {
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		f := strings.Fields(strings.TrimSuffix(line, "\r\n"))
		if len(f) == 0 {
			io.WriteString(w, "ERROR\r\n")
			continue
		}
		var data string
		size := -1
		switch f[0] {
		case "set", "add", "replace", "append", "prepend", "cas":
			size, _ = strconv.Atoi(f[4])
		case "ms":
			size, _ = strconv.Atoi(f[2])
		}
		if size >= 0 {
			b := make([]byte, size+2)
			if _, err := io.ReadFull(r, b); err != nil {
				return
			}
			data = string(b[:size])
		}
		switch {
		case !udp && m.closeAfter > 0 && m.tcpSeen.Add(1) > m.closeAfter:
			return
		case udp && f[0] == "get" && m.wrongKeyEvery > 0 && m.udpSeen.Load()%m.wrongKeyEvery == 0:
			io.WriteString(w, "VALUE other 0 1\r\nx\r\nEND\r\n")
			continue
		case udp && f[0] == "get" && m.staleFor > 0:
			io.WriteString(w, m.staleGet(f[1]))
			continue
		}
		m.mu.Lock()
		reply := m.do(f, data)
		m.mu.Unlock()
		io.WriteString(w, reply)
	}
}

// staleGet answers a get as the cache does: what it answered first, for
// staleFor.
func (m *fakeMC) staleGet(key string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.cache[key]; ok && time.Now().Before(c.until) {
		return string(c.reply)
	}
	reply := m.do([]string{"get", key}, "")
	m.cache[key] = cached{reply: []byte(reply), until: time.Now().Add(m.staleFor)}
	return reply
}

// do runs one command, under mu, and returns its reply.
func (m *fakeMC) do(f []string, data string) string {
	key := ""
	if len(f) > 1 {
		key = f[1]
	}
	it := m.items[key]
	noreply := f[len(f)-1] == "noreply"
	quiet, opaque := false, ""
	for _, flag := range f[min(len(f), 2):] {
		if flag == "q" {
			quiet = true
		}
		if strings.HasPrefix(flag, "O") {
			opaque = " " + flag
		}
	}
	store := func(v, flags string) {
		m.cas++
		m.items[key] = &fakeItem{value: v, flags: flags, cas: m.cas}
	}
	reply := func(s string) string {
		if noreply {
			return ""
		}
		return s + "\r\n"
	}
	switch f[0] {
	case "get", "gets":
		if it == nil {
			return "END\r\n"
		}
		cas := ""
		if f[0] == "gets" {
			cas = fmt.Sprintf(" %d", it.cas)
		}
		return fmt.Sprintf("VALUE %s %s %d%s\r\n%s\r\nEND\r\n", key, it.flags, len(it.value), cas, it.value)
	case "mg":
		if it == nil {
			return "EN\r\n"
		}
		return fmt.Sprintf("VA %d\r\n%s\r\n", len(it.value), it.value)
	case "set":
		store(data, f[2])
		return reply("STORED")
	case "add", "replace", "append", "prepend":
		if (it == nil) != (f[0] == "add") {
			return reply("NOT_STORED")
		}
		switch f[0] {
		case "append":
			store(it.value+data, it.flags)
		case "prepend":
			store(data+it.value, it.flags)
		default:
			store(data, f[2])
		}
		return reply("STORED")
	case "cas":
		switch {
		case it == nil:
			return reply("NOT_FOUND")
		case f[5] != strconv.FormatUint(it.cas, 10):
			return reply("EXISTS")
		}
		store(data, f[2])
		return reply("STORED")
	case "incr", "decr", "ma":
		if it == nil {
			return map[bool]string{true: "NF" + opaque + "\r\n", false: reply("NOT_FOUND")}[f[0] == "ma"]
		}
		n, err := strconv.ParseUint(it.value, 10, 64)
		if err != nil {
			return "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
		}
		delta, decr := uint64(0), f[0] == "decr"
		if f[0] == "ma" {
			delta = 1
			for _, flag := range f[2:] {
				switch {
				case strings.HasPrefix(flag, "D"):
					delta, _ = strconv.ParseUint(flag[1:], 10, 64)
				case flag == "MD":
					decr = true
				}
			}
		} else {
			delta, _ = strconv.ParseUint(f[2], 10, 64)
		}
		if decr {
			n -= min(n, delta)
		} else {
			n += delta
		}
		store(strconv.FormatUint(n, 10), it.flags)
		if f[0] == "ma" {
			return fmt.Sprintf("VA %d%s\r\n%d\r\n", len(m.items[key].value), opaque, n)
		}
		return reply(strconv.FormatUint(n, 10))
	case "delete", "md":
		delete(m.items, key)
		switch {
		case f[0] == "delete" && it == nil:
			return reply("NOT_FOUND")
		case f[0] == "delete":
			return reply("DELETED")
		case it == nil:
			return "NF" + opaque + "\r\n"
		case quiet:
			return ""
		}
		return "HD" + opaque + "\r\n"
	case "touch":
		if it == nil {
			return reply("NOT_FOUND")
		}
		return reply("TOUCHED")
	case "ms":
		store(data, "0")
		if quiet {
			return ""
		}
		return "HD" + opaque + "\r\n"
	case "mn":
		return "MN\r\n"
	case "flush_all":
		if len(f) > 1 && !noreply {
			delay, _ := strconv.Atoi(f[1])
			time.AfterFunc(time.Duration(delay)*time.Second, func() {
				m.mu.Lock()
				clear(m.items)
				m.mu.Unlock()
			})
		} else {
			clear(m.items)
		}
		return reply("OK")
	}
	return "ERROR\r\n"
}
