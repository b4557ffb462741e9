package daemon

import (
	"bufio"
	"context"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/netns"
	"github.com/santa-offload/santa/internal/procsock"
	"github.com/santa-offload/santa/internal/santadtest"
	"github.com/santa-offload/santa/rule"
)

// The real santad with a real memcached (Debian's) in its namespace, as an
// agent drives it (docs/memcached.md, "Using it from santad"): both
// sockets attached and marked, a key's generation read before its value,
// a guarded UDP rule answers the GET; a TCP set of the key stops it, and
// the next GET reaches memcached and gets the new value.
func TestMemcachedGuardedRule(t *testing.T) {
	e := newEnv(t, "mc", "")
	if _, err := exec.LookPath("memcached"); err != nil {
		t.Fatal("memcached is not installed (make test-deps)")
	}
	const port = 11211 // the namespace is the test's: free
	mc := e.asNobody(context.Background(), "memcached", "-U", strconv.Itoa(port), "-p", strconv.Itoa(port),
		"-l", "127.0.0.1", "-m", "16", "-c", "64", "-t", "2")
	if err := mc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		mc.Process.Signal(syscall.SIGKILL) // nsenter and setpriv exec it: the pid is memcached's
		mc.Wait()
	})

	// Its sockets, found without connecting: a connection memcached
	// accepted before its listener is marked would hold the domain back.
	c := e.client(t)
	at, nsPath := netip.MustParseAddr("127.0.0.1"), netns.Named(e.ns.Name)
	var tcpSvc, udpSvc client.ServiceInfo
	var listeners, udps []procsock.Socket
	for deadline := time.Now().Add(5 * time.Second); len(listeners) == 0 || len(udps) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("memcached did not bind its sockets")
		}
		listeners, _ = procsock.ListeningTCP(nsPath, port, at)
		udps, _ = procsock.BoundUDP(nsPath, port, at)
	}
	tcpSvc = attachHeld(t, c, listeners[0].Inode)
	if err := c.SetParser(tcpSvc.ServiceID, client.Parser{Kind: client.ParserMemcached, Domain: tcpSvc.ServiceID}); err != nil {
		t.Fatal(err)
	}
	udpSvc = attachHeld(t, c, udps[0].Inode)
	if err := c.SetParser(udpSvc.ServiceID, client.Parser{Kind: client.ParserMemcached, Domain: tcpSvc.ServiceID}); err != nil {
		t.Fatal(err)
	}

	tcp := e.dialTCP(t, port)
	tcp.command(t, "set k1 0 0 3\r\nold\r\n", "STORED\r\n")
	// The agent's protocol: the generation, then the value, then the rule.
	gen, err := c.Generation(udpSvc.ServiceID, []byte("k1"))
	if err != nil || gen.Epoch == 0 || gen.InFlight {
		t.Fatalf("generation %+v, %v: want a live domain with nothing in flight", gen, err)
	}
	q := e.dialUDP(t, port)
	value := "VALUE k1 0 3\r\nold\r\nEND\r\n"
	if got := mcGet(t, q, "k1"); got != value {
		t.Fatalf("memcached answers %q, want %q", got, value)
	}
	get := rule.Rule{
		Condition:  rule.ExactLength(rule.Condition{Offset: 8, Pattern: []byte("get k1\r\n")}, 16),
		Processors: []rule.Processor{rule.Copy(0, 2, 0), rule.Put(2, []byte{0, 0, 0, 1, 0, 0}), rule.Put(8, []byte(value))},
		ReplyLen:   uint16(8 + len(value)),
	}
	ids, err := c.AddGuardedRules(udpSvc.ServiceID, []client.GuardedRule{{Rule: get, Guard: gen.Guard([]byte("k1"), time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if got := mcGet(t, q, "k1"); got != value {
			t.Fatalf("the guarded rule answers %q, want %q", got, value)
		}
	}
	if hits := ruleHits(t, c, udpSvc.ServiceID, ids[0]); hits != 3 {
		t.Fatalf("the guarded rule answered %d GETs, want 3", hits)
	}

	// A write over TCP: once memcached said STORED, the kernel no longer
	// answers the old value.
	tcp.command(t, "set k1 0 0 5\r\nfresh\r\n", "STORED\r\n")
	if got, want := mcGet(t, q, "k1"), "VALUE k1 0 5\r\nfresh\r\nEND\r\n"; got != want {
		t.Fatalf("after the set, a GET gets %q, want memcached's %q", got, want)
	}
	if hits := ruleHits(t, c, udpSvc.ServiceID, ids[0]); hits != 3 {
		t.Errorf("the guarded rule answered %d GETs, want still 3", hits)
	}
	st, err := c.MemcachedStats(udpSvc.ServiceID)
	if err != nil || st.Domain != tcpSvc.ServiceID || st.Writes != 2 || st.GuardStale == 0 || st.Lost != 0 {
		t.Errorf("memcached stats %+v, %v: want domain %d, 2 writes, a stale guard refused, nothing lost", st, err, tcpSvc.ServiceID)
	}
	// Listed with its guard.
	for entry, err := range c.Rules(udpSvc.ServiceID) {
		if err != nil || entry.Guard == nil || string(entry.Guard.Key) != "k1" || entry.Guard.Gen != gen.Gen || entry.Guard.ExpiresInMS > 60000 {
			t.Errorf("listed %+v (guard %+v), %v", entry, entry.Guard, err)
		}
	}
}

// attachHeld attaches the socket of inode, taken from the process that
// holds it, as an agent does.
func attachHeld(t *testing.T, c *client.Client, inode uint64) client.ServiceInfo {
	t.Helper()
	pid, fd, err := procsock.Holder(inode)
	if err != nil {
		t.Fatal(err)
	}
	own, err := procsock.TakeFD(pid, fd)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(own)
	svc, err := c.AttachFD(own)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// mcGet is memcached's answer to a UDP GET of key, after the 8-byte frame
// header (request id 0x1234, datagram 0 of 1).
func mcGet(t *testing.T, q *net.UDPConn, key string) string {
	t.Helper()
	frame := []byte{0x12, 0x34, 0, 0, 0, 1, 0, 0}
	got, err := santadtest.Ask(q, append(frame, "get "+key+"\r\n"...), 2*time.Second)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if len(got) < 8 || string(got[:8]) != string(frame) {
		t.Fatalf("get %s: frame header % x, want % x", key, got[:min(8, len(got))], frame)
	}
	return string(got[8:])
}

// ruleHits is a rule's hits.
func ruleHits(t *testing.T, c *client.Client, service, id uint32) uint64 {
	t.Helper()
	for rc, err := range c.RuleStats(service) {
		if err != nil {
			t.Fatal(err)
		}
		if rc.RuleID == id {
			return rc.Hits
		}
	}
	t.Fatalf("no rule %d", id)
	return 0
}

// mcConn is a TCP connection to memcached.
type mcConn struct {
	net.Conn
	r *bufio.Reader
}

// dialTCP connects to port on 127.0.0.1 in the namespace.
func (e *env) dialTCP(t *testing.T, port uint16) *mcConn {
	t.Helper()
	conn := e.dial(t, "127.0.0.1:"+strconv.Itoa(int(port)))
	return &mcConn{Conn: conn, r: bufio.NewReader(conn)}
}

// command sends cmd and checks memcached's one-line reply.
func (m *mcConn) command(t *testing.T, cmd, want string) {
	t.Helper()
	m.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := m.Write([]byte(cmd)); err != nil {
		t.Fatal(err)
	}
	line, err := m.r.ReadString('\n')
	if err != nil || line != want {
		t.Fatalf("%q: memcached answers %q, %v; want %q", strings.TrimSpace(cmd), line, err, want)
	}
}
