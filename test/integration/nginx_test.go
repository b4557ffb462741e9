package integration

// TestNginx: Santa's TCP data plane (sockmap, docs/tcp.md) on a real
// server, Debian's nginx, with real clients: curl, wrk and Python in the
// client namespace, and Go where a client needs exact control over its
// segments. Every rule is learnt from the real parts: a client's exact
// request (captured by pointing the client once at a Go listener on the
// server's port before nginx starts) and nginx's exact reply to it (that
// request sent once to nginx). What the kernel answers never reaches
// nginx, so nginx's access log tells the two paths apart, together with
// Santa's counters.
//
// Needs root and the Debian packages nginx-light, curl, wrk, python3 and
// iproute2 (ss); skips without them.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	benchrig "github.com/santa-offload/santa/bench/rig"
	"github.com/santa-offload/santa/internal/daemon"
	"github.com/santa-offload/santa/internal/datapath"
	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/netns"
	"github.com/santa-offload/santa/internal/procsock"
	"github.com/santa-offload/santa/rule"
)

const (
	quiet       = 100 * time.Millisecond // no more bytes: no request answered twice
	nginxLife   = 3 * time.Minute        // nginx is stopped after this, whatever happens
	toolTimeout = 30 * time.Second       // any one client command
	ioTimeout   = 10 * time.Second       // any one Go client's exchange
	settle      = 10 * time.Second       // closes finishing, log lines appearing
)

// The files nginx serves. Only miss is never matched: nginx serves it.
// big's size is set at start so that nginx's whole reply is 65535 bytes,
// the largest TCP reply Santa takes.
const (
	uriSmall = "/small.txt"
	uriMid   = "/mid.txt"
	uriBig   = "/big.bin"
	uriMiss  = "/miss.txt"
)

var matchedURIs = []string{uriSmall, uriMid, uriBig}

// An httpEx is one request a client sends, byte for byte, and nginx's
// reply to it, byte for byte (its Date is the time it was learnt).
type httpEx struct {
	uri   string
	req   []byte
	reply []byte
}

// site is nginx in the rig's server namespace with Santa on both its
// listening sockets, and the exchanges of each client.
type site struct {
	r           *rig
	dir         string
	d           *datapath.Datapath
	svcs        []model.ServiceID  // IPv4, IPv6
	ex          map[string]*httpEx // by client + " " + uri: "curl4 /small.txt"
	ruleOf      map[string]model.RuleID
	python      string
	preexisting net.Conn // opened before Santa took nginx's listeners over
}

// rawRequest is what the Go and Python clients send: they compose it.
func rawRequest(uri string) []byte {
	return fmt.Appendf(nil, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: santa-integration\r\n\r\n", uri, serverIPv4)
}

var (
	addr4 = net.JoinHostPort(serverIPv4, "80")
	addr6 = net.JoinHostPort(serverIPv6, "80")
)

func TestNginx(t *testing.T) {
	requireRoot(t)
	for _, tool := range []string{"nginx", "curl", "wrk", "python3", "ss"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s on PATH (make setup installs it)", tool)
		}
	}
	s := newSite(t)
	t.Run("Adopted", s.testAdopted)
	s.preexisting.Close() // also when -run leaves Adopted out
	t.Run("Curl", s.testCurl)
	t.Run("KeepAlive", s.testKeepAlive)
	t.Run("Pipelined", s.testPipelined)
	t.Run("PartialRequest", s.testPartial)
	t.Run("BigReply", s.testBigReply)
	t.Run("BeforeAccept", s.testBeforeAccept)
	t.Run("HalfClose", s.testHalfClose)
	t.Run("ClientAborts", s.testAborts)
	t.Run("ThousandConnections", s.testThousand)
	t.Run("NoLeftovers", func(t *testing.T) { s.waitQuiet(t) })
	ps, _ := s.d.PathStats()
	t.Logf("TCP path counters at the end: %s", tcpPaths(ps, nil))
	for _, k := range []string{"tcp_reply_broken", "tcp_conn_full"} {
		if ps[k] != 0 {
			t.Errorf("%s = %d, want 0", k, ps[k])
		}
	}
}

// newSite captures the clients' requests, starts nginx, learns its
// replies and registers its listeners and one rule per matched exchange.
func newSite(t *testing.T) *site {
	s := &site{r: newRig(t, "n"), dir: t.TempDir(), ex: map[string]*httpEx{}, ruleOf: map[string]model.RuleID{}}
	s.python, _ = exec.LookPath("python3")
	if err := os.WriteFile(filepath.Join(s.dir, "client.py"), []byte(pythonClient), 0o644); err != nil {
		t.Fatal(err)
	}
	s.captureRequests(t)
	s.writeFiles(t, 60000)
	startNginx(t, s.r.srv, s.dir)

	// big.bin's size: nginx's headers do not depend on it but for
	// Content-Length and ETag, whose lengths stay the same from 60000 to
	// 65535 bytes.
	probe := s.nginxReply(t, addr4, rawRequest(uriBig))
	s.writeFiles(t, rule.MaxTCPReply-(len(probe)-60000))
	for _, e := range s.ex {
		e.reply = s.nginxReply(t, s.addrOf(e), e.req)
		if e.uri == uriBig && len(e.reply) != rule.MaxTCPReply {
			t.Fatalf("nginx's reply to %q is %d bytes, want %d", e.req, len(e.reply), rule.MaxTCPReply)
		}
	}
	// A keep-alive connection nginx has already served once: Santa adopts it.
	s.preexisting = s.dial(t, addr4)
	s.roundTrip(t, s.preexisting, s.ex["raw4 "+uriMiss], false)

	var err error
	s.d, err = datapath.Open(datapath.Options{NoPin: true, MaxRules: 1024, MaxServices: 16, MaxConnections: 8192})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.d.Close() })
	for _, a := range []string{serverIPv4, serverIPv6} {
		s.svcs = append(s.svcs, s.register(t, netip.MustParseAddr(a)))
	}
	for name, e := range s.ex {
		if e.uri == uriMiss {
			continue
		}
		svc := s.svcs[0]
		if strings.Contains(name, "6 ") {
			svc = s.svcs[1]
		}
		id, err := s.d.AddRule(svc, rule.Rule{Condition: rule.Condition{Offset: 0, Pattern: e.req},
			Processors: []rule.Processor{rule.Put(0, e.reply)}, ReplyLen: uint16(len(e.reply))})
		if err != nil {
			t.Fatalf("rule for %s: %v", name, err)
		}
		s.ruleOf[name] = id
	}
	return s
}

func (s *site) addrOf(e *httpEx) string {
	if bytes.Contains(e.req, []byte("Host: ["+serverIPv6+"]")) {
		return addr6
	}
	return addr4
}

// register hands nginx's listening socket on addr:80 to Santa.
func (s *site) register(t *testing.T, addr netip.Addr) model.ServiceID {
	found, err := procsock.ListeningTCP(netns.Named(s.r.srv), 80, addr)
	if err != nil || len(found) != 1 {
		t.Fatalf("nginx's listener on %s: %d found, %v", addr, len(found), err)
	}
	pid, nfd, err := procsock.Holder(found[0].Inode)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := procsock.TakeFD(pid, nfd)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	svc, err := s.d.AddSocket(fd)
	if err != nil {
		t.Fatalf("registering nginx's listener on %s: %v", addr, err)
	}
	return svc
}

// ---- learning the exchanges ----

// captureRequests learns curl's (IPv4 and IPv6) and wrk's exact requests:
// they are run once against a Go listener on the server's port 80 (the
// Host header has the port unless it is 80), which answers every request
// with an empty 200. The raw clients' requests are rawRequest's.
func (s *site) captureRequests(t *testing.T) {
	var mu sync.Mutex
	var got [][]byte
	var ln net.Listener
	if err := inNetns(s.r.srv, func() (err error) { ln, err = net.Listen("tcp", ":80"); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(toolTimeout))
				br := bufio.NewReader(c)
				for {
					head, err := readHead(br)
					if err != nil {
						return
					}
					mu.Lock()
					got = append(got, head)
					mu.Unlock()
					if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"); err != nil {
						return
					}
				}
			}()
		}
	}()
	// take is the one request a client sent since the last take (wrk
	// sends many: all the same).
	take := func(client, uri string) {
		mu.Lock()
		reqs := got
		got = nil
		mu.Unlock()
		if len(reqs) == 0 {
			t.Fatalf("%s sent no request for %s", client, uri)
		}
		for _, r := range reqs[1:] {
			if !bytes.Equal(r, reqs[0]) {
				t.Fatalf("%s sent different requests: %q and %q", client, reqs[0], r)
			}
		}
		if !bytes.HasPrefix(reqs[0], []byte("GET "+uri+" ")) {
			t.Fatalf("%s's request for %s is %q", client, uri, reqs[0])
		}
		s.ex[client+" "+uri] = &httpEx{uri: uri, req: reqs[0]}
	}
	for _, uri := range append(matchedURIs, uriMiss) {
		s.curl(t, serverIPv4, uri)
		take("curl4", uri)
		s.curl(t, serverIPv6, uri)
		take("curl6", uri)
		s.ex["raw4 "+uri] = &httpEx{uri: uri, req: rawRequest(uri)}
	}
	// -c 1 -d 1s: a second of requests on one connection.
	s.wrk(t, 1, time.Second)
	take("wrk4", uriSmall)
}

// writeFiles writes nginx's files, big.bin with bigSize bytes, all with
// the same modification time: the ETag and Last-Modified stay the same.
func (s *site) writeFiles(t *testing.T, bigSize int) {
	www := filepath.Join(s.dir, "www")
	if err := os.MkdirAll(www, 0o755); err != nil {
		t.Fatal(err)
	}
	mtime := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	for name, size := range map[string]int{uriSmall: 34, uriMid: 1000, uriBig: bigSize, uriMiss: 50} {
		p := filepath.Join(www, name)
		if err := os.WriteFile(p, pattern(name, size), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
}

// pattern is size bytes of text that differ from file to file.
func pattern(name string, size int) []byte {
	b := bytes.Repeat([]byte(name+" abcdefghijklmnopqrstuvwxyz 0123456789\n"), size/20+1)
	return b[:size]
}

// nginxReply sends req once to nginx on a connection of its own and
// returns the reply, every byte.
func (s *site) nginxReply(t *testing.T, addr string, req []byte) []byte {
	c := s.dial(t, addr)
	defer c.Close()
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	reply, err := readReply(bufio.NewReader(c))
	if err != nil || !bytes.HasPrefix(reply, []byte("HTTP/1.1 200 OK\r\n")) {
		t.Fatalf("nginx's reply to %q: %v\n%s", req, err, abbrev(reply))
	}
	return reply
}

// ---- nginx ----

// startNginx runs nginx in ns, serving dir/www on port 80 of both server
// addresses with an access log, until the test ends (or nginxLife).
func startNginx(t *testing.T, ns, dir string) {
	conf := filepath.Join(dir, "nginx.conf")
	err := os.WriteFile(conf, benchrig.NginxConf(dir, "worker_processes 1;\nworker_rlimit_nofile 16384;", "worker_connections 8192;", fmt.Sprintf(`    log_format uri '$request_uri $status $bytes_sent';
    access_log %[1]s/access.log uri;
    keepalive_requests 100000;
    keepalive_timeout 60s;
    types { text/plain txt; application/octet-stream bin; }
    default_type application/octet-stream;
    server {
        listen %[2]s:80 backlog=4096;
        listen [%[3]s]:80 backlog=4096;
        root %[1]s/www;
    }
`, dir, serverIPv4, serverIPv6)), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), nginxLife)
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "nginx", "-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", conf)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) } // nginx's fast shutdown
	cmd.WaitDelay = 5 * time.Second                                          // then SIGKILL
	var out lockedWriter
	out.mu, out.w = &sync.Mutex{}, &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = &out, &out
	done, err := startTied(cmd, nil, nil) // as hello: nginx dies with the test binary
	if err != nil {
		cancel()
		t.Fatalf("starting nginx: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		<-done
		// A worker whose master was killed outlives it: kill the nginx
		// processes left in the namespace. Not this process: its main
		// thread may be in the namespace (a goroutine locked to it by
		// inNetns ended there).
		if pids, err := exec.Command("ip", "netns", "pids", ns).Output(); err == nil {
			for _, p := range strings.Fields(string(pids)) {
				pid, err := strconv.Atoi(p)
				comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
				if err == nil && pid != os.Getpid() && strings.TrimSpace(string(comm)) == "nginx" {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	})
	for deadline := time.Now().Add(settle); ; time.Sleep(20 * time.Millisecond) {
		v4, err4 := procsock.ListeningTCP(netns.Named(ns), 80, netip.MustParseAddr(serverIPv4))
		v6, err6 := procsock.ListeningTCP(netns.Named(ns), 80, netip.MustParseAddr(serverIPv6))
		if err := errors.Join(err4, err6); err != nil {
			t.Fatal(err)
		}
		if len(v4) == 1 && len(v6) == 1 {
			return
		}
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx exited: %v\n%s\n%s", cmd.ProcessState, out.w, log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx not listening after %v", settle)
		}
	}
}

// accessLog is nginx's access log, one "URI STATUS BYTES" per line.
func (s *site) accessLog(t *testing.T) []string {
	b, err := os.ReadFile(filepath.Join(s.dir, "access.log"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// ---- counters ----

// mark is where the counters and nginx's access log stood.
type mark struct {
	st    model.ServiceStats // both services
	paths model.PathStats
	log   int
}

func (s *site) mark(t *testing.T) mark {
	m := mark{log: len(s.accessLog(t))}
	for _, svc := range s.svcs {
		st, err := s.d.ServiceStats(svc)
		if err != nil {
			t.Fatal(err)
		}
		m.st.Matched += st.Matched
		m.st.Passed += st.Passed
	}
	var err error
	if m.paths, err = s.d.PathStats(); err != nil {
		t.Fatal(err)
	}
	return m
}

// served is what nginx logged since m, by URI: it waits until nginx has
// logged at least n requests (a line is written after the reply), then
// a little longer for any it should not have served.
func (s *site) served(t *testing.T, m mark, n int) map[string]int {
	deadline := time.Now().Add(settle)
	for len(s.accessLog(t))-m.log < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	got := map[string]int{}
	for _, line := range s.accessLog(t)[m.log:] {
		uri, rest, _ := strings.Cut(line, " ")
		if !strings.HasPrefix(rest, "200 ") {
			t.Errorf("nginx logged %q: not a 200", line)
		}
		got[uri]++
	}
	return got
}

// expect checks what happened since m: matched requests answered by the
// kernel, passed segments, and the requests nginx served, by URI.
func (s *site) expect(t *testing.T, m mark, matched, passed uint64, nginx map[string]int) {
	t.Helper()
	n := 0
	for _, c := range nginx {
		n += c
	}
	got := s.served(t, m, n)
	now := s.mark(t)
	if d := now.st.Matched - m.st.Matched; d != matched {
		t.Errorf("kernel answered %d requests, want %d", d, matched)
	}
	if d := now.st.Passed - m.st.Passed; d != passed {
		t.Errorf("%d segments passed to nginx, want %d", d, passed)
	}
	if !maps.Equal(got, nginx) && !(len(got) == 0 && len(nginx) == 0) {
		t.Errorf("nginx served %v, want %v", got, nginx)
	}
	if t.Failed() {
		t.Logf("TCP path counters since: %s", tcpPaths(now.paths, m.paths))
	}
}

// tcpPaths is the TCP path counters (minus those of before, if any) that
// are not 0, for reports.
func tcpPaths(now, before model.PathStats) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(now)) {
		if d := now[k] - before[k]; strings.HasPrefix(k, "tcp_") && d != 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k, d))
		}
	}
	return strings.Join(parts, " ")
}

// ---- clients ----

// inCli runs a command in the client namespace, bounded in time, and
// returns its standard output.
func (s *site) inCli(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", s.r.cli, name}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

// curl fetches http://host/uri once; the output is the reply as received,
// headers and body (-i).
func (s *site) curl(t *testing.T, host, uri string) []byte {
	t.Helper()
	url := "http://" + host + uri
	if strings.Contains(host, ":") {
		url = "http://[" + host + "]" + uri
	}
	return s.inCli(t, "curl", "-sS", "-g", "-i", "--max-time", "5", url)
}

// wrk runs wrk with conns connections (one thread) for d against
// /small.txt over IPv4, and returns its report.
func (s *site) wrk(t *testing.T, conns int, d time.Duration) string {
	t.Helper()
	// wrk needs a descriptor per connection: above the usual 1024.
	return string(s.inCli(t, "sh", "-c", `ulimit -n 16384 && exec wrk "$@"`, "wrk", "-t", "1",
		"-c", strconv.Itoa(conns), "-d", fmt.Sprintf("%ds", int(d.Seconds())), "--timeout", "5s",
		"http://"+serverIPv4+":80"+uriSmall))
}

// runPython runs the Python client (pythonClient) in mode with plan.
func (s *site) runPython(t *testing.T, mode string, plan any) []byte {
	t.Helper()
	js, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(planFile, js, 0o644); err != nil {
		t.Fatal(err)
	}
	return s.inCli(t, s.python, filepath.Join(s.dir, "client.py"), mode, serverIPv4, "80", planFile)
}

// dial connects from the client namespace and waits until nginx has
// accepted the connection: a request that arrives before the accept takes
// another path (testBeforeAccept), which the other tests leave alone.
func (s *site) dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c := s.connect(t, addr)
	s.accepted(t, c)
	return c
}

// connect connects from the client namespace; the test's cleanup closes
// it. Not Multipath TCP: Santa serves plain TCP only.
func (s *site) connect(t *testing.T, addr string) net.Conn {
	t.Helper()
	var c net.Conn
	err := inNetns(s.r.cli, func() (err error) {
		var d net.Dialer
		d.SetMultipathTCP(false)
		d.Timeout = ioTimeout
		c, err = d.Dial("tcp", addr)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(ioTimeout))
	return c
}

// roundTrip sends e's request on c and checks the reply (see check).
func (s *site) roundTrip(t *testing.T, c net.Conn, e *httpEx, kernel bool) {
	t.Helper()
	if _, err := c.Write(e.req); err != nil {
		t.Fatal(err)
	}
	got, err := readReply(bufio.NewReader(c))
	if err != nil {
		t.Fatalf("reply to %s: %v", e.uri, err)
	}
	check(t, e, got, kernel)
}

// check compares a reply with nginx's: the kernel's is nginx's, every
// byte; nginx's own has a Date of its own.
func check(t *testing.T, e *httpEx, got []byte, kernel bool) bool {
	t.Helper()
	if !same(e, got, kernel) {
		want := e.reply
		if !kernel {
			got, want = withoutDate(got), withoutDate(want)
		}
		t.Errorf("reply to %s (kernel's: %v): %d bytes, want %d, first difference at byte %d\ngot:  %q\nwant: %q",
			e.uri, kernel, len(got), len(want), firstDiff(got, want), abbrev(got), abbrev(want))
		return false
	}
	return true
}

// same is check without the report.
func same(e *httpEx, got []byte, kernel bool) bool {
	if kernel {
		return bytes.Equal(got, e.reply)
	}
	return bytes.Equal(withoutDate(got), withoutDate(e.reply))
}

var dateLine = regexp.MustCompile(`\r\nDate: [^\r]*`)

func withoutDate(reply []byte) []byte {
	head, body, _ := bytes.Cut(reply, []byte("\r\n\r\n"))
	return slices.Concat(dateLine.ReplaceAll(head, []byte("\r\nDate: -")), []byte("\r\n\r\n"), body)
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// readHead reads a request's or reply's header block, byte for byte.
func readHead(r *bufio.Reader) ([]byte, error) {
	var head []byte
	for !bytes.HasSuffix(head, []byte("\r\n\r\n")) {
		line, err := r.ReadBytes('\n')
		head = append(head, line...)
		if err != nil {
			return head, err
		}
	}
	return head, nil
}

var contentLength = regexp.MustCompile(`(?i)\r\ncontent-length: *([0-9]+)\r\n`)

// readReply reads one HTTP/1.1 reply with a Content-Length body (all that
// nginx sends here), byte for byte.
func readReply(r *bufio.Reader) ([]byte, error) {
	head, err := readHead(r)
	if err != nil {
		return head, err
	}
	m := contentLength.FindSubmatch(head)
	if m == nil {
		return head, fmt.Errorf("reply without Content-Length: %q", head)
	}
	n, _ := strconv.Atoi(string(m[1]))
	body := make([]byte, n)
	k, err := io.ReadFull(r, body)
	return append(head, body[:k]...), err
}

// readReplies reads n replies from c, then makes sure nothing follows
// for quiet (a request answered twice, by the kernel and by nginx).
func readReplies(t *testing.T, c net.Conn, n int, quiet time.Duration) [][]byte {
	t.Helper()
	br := bufio.NewReader(c)
	var out [][]byte
	for range n {
		reply, err := readReply(br)
		if err != nil {
			t.Fatalf("reply %d of %d: %v (%d bytes: %q)", len(out)+1, n, err, len(reply), abbrev(reply))
		}
		out = append(out, reply)
	}
	c.SetReadDeadline(time.Now().Add(quiet))
	if _, err := br.ReadByte(); err == nil {
		t.Errorf("more bytes after the %d replies", n)
	}
	c.SetDeadline(time.Now().Add(ioTimeout))
	return out
}

// ---- the sub-tests ----

// testAdopted: a keep-alive connection nginx accepted (and served) before
// Santa took its listener over is adopted, and from then on its matched
// requests are the kernel's.
func (s *site) testAdopted(t *testing.T) {
	listener, err := s.d.Service(s.svcs[0])
	if err != nil {
		t.Fatal(err)
	}
	res, err := daemon.AdoptConnections(s.d, s.svcs[0], listener, netns.Named(s.r.srv), model.AnyUID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Adopted != 1 || len(res.Skipped) != 0 {
		t.Fatalf("adopted %d connections, skipped %v; want the one open connection", res.Adopted, res.Skipped)
	}
	defer s.preexisting.Close()
	m := s.mark(t)
	s.roundTrip(t, s.preexisting, s.ex["raw4 "+uriSmall], true)
	s.roundTrip(t, s.preexisting, s.ex["raw4 "+uriMid], true)
	s.idle(t, s.preexisting)
	s.expect(t, m, 2, 0, nil)
}

// testCurl: matched URLs are answered by the kernel (nginx never logs
// them), and the rest by nginx, over IPv4 and IPv6.
func (s *site) testCurl(t *testing.T) {
	for _, fam := range []struct{ name, host string }{{"curl4", serverIPv4}, {"curl6", serverIPv6}} {
		t.Run(fam.name, func(t *testing.T) {
			s.fetchWithCurl(t, fam.name, fam.host, uriSmall, uriMid, uriMiss, uriSmall)
		})
	}
}

// fetchWithCurl fetches each URI with curl (a connection each) from host
// (of the client family fam, "curl4" or "curl6") and checks every reply.
// curl sends its request as soon as it is connected, most often before
// nginx accepted the connection: the kernel answers it inside nginx's
// accept() (docs/tcp.md, "Requests that arrive before accept()"). Matched
// URIs are the kernel's, byte for byte, and never reach nginx's access
// log; missed URIs are nginx's.
func (s *site) fetchWithCurl(t *testing.T, fam, host string, uris ...string) {
	t.Helper()
	m := s.mark(t)
	nginx, matched := map[string]int{}, 0
	for _, uri := range uris {
		_, isRule := s.ruleOf[fam+" "+uri]
		check(t, s.ex[fam+" "+uri], s.curl(t, host, uri), isRule)
		if isRule {
			matched++
		} else {
			nginx[uri]++
		}
	}
	s.expect(t, m, uint64(matched), uint64(len(uris)-matched), nginx)
}

func (s *site) ruleStats(t *testing.T, name string) model.RuleStats {
	st, err := s.d.RuleStats(s.ruleOf[name])
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// pyKeepAlive is the Python client's keep-alive plan: requests sent one
// at a time on one connection, each reply read before the next request.
type pyKeepAlive struct {
	Conns [][]string `json:"conns"` // per connection, the requests in hex
}

// testKeepAlive: 1000 requests on each of two keep-alive connections
// (Python, raw socket). The first has only matched requests: the kernel
// answers all 1000. The second interleaves matched and missed ones after
// ten matched:
// the kernel answers those ten, nginx the rest, matched or not, because
// once a request went to nginx a later reply by the kernel could overtake
// nginx's.
func (s *site) testKeepAlive(t *testing.T) {
	var conns [2][]*httpEx
	for i := range 1000 {
		conns[0] = append(conns[0], s.ex["raw4 "+matchedURIs[i%3]])
		e := s.ex["raw4 "+matchedURIs[i%3]]
		if i >= 10 && i%2 == 0 {
			e = s.ex["raw4 "+uriMiss]
		}
		conns[1] = append(conns[1], e)
	}
	var plan pyKeepAlive
	nginx := map[string]int{}
	for c, exs := range conns {
		var reqs []string
		for i, e := range exs {
			reqs = append(reqs, hex.EncodeToString(e.req))
			if c == 1 && i >= 10 {
				nginx[e.uri]++
			}
		}
		plan.Conns = append(plan.Conns, reqs)
	}
	m := s.mark(t)
	start := time.Now()
	out := bufio.NewReader(bytes.NewReader(s.runPython(t, "keepalive", plan)))
	t.Logf("2000 requests on 2 connections in %v", time.Since(start).Round(time.Millisecond))
	bad := 0
	for c, exs := range conns {
		for i, e := range exs {
			got, err := readReply(out)
			if err != nil {
				t.Fatalf("connection %d, reply %d: %v", c, i, err)
			}
			if !check(t, e, got, c == 0 || i < 10) {
				if bad++; bad > 5 {
					t.Fatal("giving up")
				}
			}
		}
	}
	s.expect(t, m, 1010, 990, nginx)
}

// testPipelined: requests written without waiting for replies, the
// replies read afterwards, in order.
func (s *site) testPipelined(t *testing.T) {
	small, mid, big, miss := s.ex["raw4 "+uriSmall], s.ex["raw4 "+uriMid], s.ex["raw4 "+uriBig], s.ex["raw4 "+uriMiss]

	t.Run("SeparateSegments", func(t *testing.T) {
		// A pause between writes: one segment each (TCP_NODELAY is Go's
		// default). The kernel answers the first three, nginx the rest.
		seq := []*httpEx{small, mid, big, miss, small}
		m := s.mark(t)
		c := s.dial(t, addr4)
		for _, e := range seq {
			write(t, c, e.req)
			time.Sleep(5 * time.Millisecond)
		}
		for i, got := range readReplies(t, c, len(seq), quiet) {
			check(t, seq[i], got, i < 3)
		}
		s.idle(t, c)
		s.expect(t, m, 3, 2, map[string]int{uriMiss: 1, uriSmall: 1})
	})

	t.Run("BackToBack", func(t *testing.T) {
		// No pause: the client's stack may put several writes in one
		// segment, which then passes. Whatever the segments, the kernel
		// answers a prefix of the requests and nginx the rest. Fifty
		// connections, each a big matched reply followed at once by a
		// missed one: nginx's reply to the second must not overtake the
		// kernel's to the first.
		seq := []*httpEx{small, mid, small, mid, miss, small}
		m := s.mark(t)
		c := s.dial(t, addr4)
		for _, e := range seq {
			write(t, c, e.req)
		}
		replies := readReplies(t, c, len(seq), quiet)
		k := int(s.mark(t).st.Matched - m.st.Matched)
		nginx := map[string]int{}
		for i, got := range replies {
			check(t, seq[i], got, i < k)
			if i >= k {
				nginx[seq[i].uri]++
			}
		}
		t.Logf("kernel answered the first %d of %d pipelined requests", k, len(seq))
		if k == 0 {
			t.Logf("(the first segment held more than one request)")
		}
		s.expect(t, m, uint64(k), s.mark(t).st.Passed-m.st.Passed, nginx)

		m = s.mark(t)
		const n = 50
		for range n {
			c := s.dial(t, addr4)
			write(t, c, big.req)
			write(t, c, miss.req)
			replies := readReplies(t, c, 2, 10*time.Millisecond)
			check(t, big, replies[0], false)
			check(t, miss, replies[1], false)
			c.Close()
		}
		k = int(s.mark(t).st.Matched - m.st.Matched)
		t.Logf("big then missed, back to back: the kernel answered %d of %d big requests; TCP path counters: %s",
			k, n, tcpPaths(s.mark(t).paths, m.paths))
		want := map[string]int{uriMiss: n}
		if k < n {
			want[uriBig] = n - k
		}
		s.expect(t, m, uint64(k), s.mark(t).st.Passed-m.st.Passed, want)
	})

	t.Run("TwoRequestsOneSegment", func(t *testing.T) {
		// One write, two matched requests: the segment is not exactly one
		// request, so it passes, and nginx serves both.
		m := s.mark(t)
		c := s.dial(t, addr4)
		write(t, c, slices.Concat(small.req, mid.req))
		replies := readReplies(t, c, 2, quiet)
		check(t, small, replies[0], false)
		check(t, mid, replies[1], false)
		s.expect(t, m, 0, 1, map[string]int{uriSmall: 1, uriMid: 1})
	})

	t.Run("KernelThenTwoInOneSegment", func(t *testing.T) {
		// The kernel answers the first; the second segment holds two
		// requests and passes.
		m := s.mark(t)
		c := s.dial(t, addr4)
		write(t, c, big.req)
		time.Sleep(5 * time.Millisecond)
		write(t, c, slices.Concat(small.req, mid.req))
		replies := readReplies(t, c, 3, quiet)
		check(t, big, replies[0], true)
		check(t, small, replies[1], false)
		check(t, mid, replies[2], false)
		s.idle(t, c)
		s.expect(t, m, 1, 1, map[string]int{uriSmall: 1, uriMid: 1})
	})
}

func write(t *testing.T, c net.Conn, b []byte) {
	t.Helper()
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
}

// testPartial: a matched request in two writes with a pause between: no
// segment is the request, so nginx serves it; and every later request of
// the connection, matched or not.
func (s *site) testPartial(t *testing.T) {
	small := s.ex["raw4 "+uriSmall]
	for _, cut := range []int{1, 16, len(small.req) - 2} {
		t.Run(fmt.Sprintf("cut at %d", cut), func(t *testing.T) {
			m := s.mark(t)
			c := s.dial(t, addr4)
			write(t, c, small.req[:cut])
			time.Sleep(50 * time.Millisecond)
			write(t, c, small.req[cut:])
			check(t, small, readReplies(t, c, 1, quiet)[0], false)
			s.roundTrip(t, c, small, false)
			s.idle(t, c)
			s.expect(t, m, 0, 3, map[string]int{uriSmall: 2})
		})
	}
}

// testBigReply: a reply of 65535 bytes, the largest, answered by the
// kernel to curl, every byte, over IPv4 and IPv6, and to Go between
// smaller ones on one connection.
func (s *site) testBigReply(t *testing.T) {
	for _, fam := range []struct{ name, host string }{{"curl4", serverIPv4}, {"curl6", serverIPv6}} {
		s.fetchWithCurl(t, fam.name, fam.host, uriBig, uriBig, uriBig)
	}
	// On one keep-alive connection, which nginx never reads from: it is
	// left idle, nothing queued.
	m := s.mark(t)
	c := s.dial(t, addr4)
	for _, uri := range []string{uriBig, uriSmall, uriBig, uriMid, uriBig} {
		s.roundTrip(t, c, s.ex["raw4 "+uri], true)
	}
	s.idle(t, c)
	s.expect(t, m, 5, 0, nil)
}

// testBeforeAccept: requests that arrive before nginx accepts their
// connections (its worker stopped meanwhile, so that they surely do) are
// answered by the kernel inside nginx's accept(), which asks for the
// peer's address (docs/tcp.md, "Requests that arrive before accept()"),
// over IPv4 and IPv6; nginx sees none of them, and the connections are
// left idle.
func (s *site) testBeforeAccept(t *testing.T) {
	worker := s.nginxWorker(t)
	m := s.mark(t)
	var seq []*httpEx
	conns := make([]net.Conn, 3*7)
	if err := syscall.Kill(worker, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resume := sync.OnceFunc(func() { syscall.Kill(worker, syscall.SIGCONT) })
	defer resume()
	for i := range conns {
		seq = append(seq, s.ex[[]string{"raw4 ", "curl6 "}[i%2]+matchedURIs[i%3]])
		conns[i] = s.connect(t, s.addrOf(seq[i]))
		write(t, conns[i], seq[i].req)
	}
	time.Sleep(100 * time.Millisecond)
	resume()
	for i, c := range conns {
		c.SetDeadline(time.Now().Add(ioTimeout))
		check(t, seq[i], readReplies(t, c, 1, 0)[0], true)
	}
	s.expect(t, m, uint64(len(conns)), 0, nil)
	s.idle(t, conns...)
}

// nginxWorker is the pid of nginx's worker process.
func (s *site) nginxWorker(t *testing.T) int {
	ns, err := os.Stat(netns.Named(s.r.srv))
	if err != nil {
		t.Fatal(err)
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		in, err := os.Stat(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err == nil && os.SameFile(ns, in) && bytes.HasPrefix(cmdline, []byte("nginx: worker")) {
			return pid
		}
	}
	t.Fatal("no nginx worker process in the server namespace")
	return 0
}

// testHalfClose: clients that send their request and at once close their
// sending side (shutdown(SHUT_WR), as HTTP/1.0-style clients and nc -N
// do). nginx answers such a client before it closes: the kernel must too
// (santa_tcp_hold_fin holds the FIN back until the reply is sent).
// Twenty clients per URL, all connected first; then each sends its
// request and its FIN, right away or once nginx has accepted them all.
// A client whose request and FIN both came before accept() is nginx's:
// the end of its stream is visible already, so the kernel passes.
func (s *site) testHalfClose(t *testing.T) {
	for _, uri := range []string{uriMiss, uriSmall, uriBig} {
		for _, accepted := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s accepted %v", uri, accepted), func(t *testing.T) {
				const n = 20
				e, kernel := s.ex["raw4 "+uri], uri != uriMiss
				m := s.mark(t)
				conns := make([]net.Conn, n)
				for i := range conns {
					conns[i] = s.connect(t, addr4)
				}
				if accepted {
					s.accepted(t, conns...)
				}
				for _, c := range conns {
					write(t, c, e.req)
					if err := c.(*net.TCPConn).CloseWrite(); err != nil {
						t.Fatal(err)
					}
				}
				whole, none := 0, 0
				for _, c := range conns {
					got, err := io.ReadAll(c) // nginx closes at the end of the stream
					switch {
					case err == nil && same(e, got, kernel):
						whole++
					case err == nil && !accepted && same(e, got, false):
						whole++ // request and FIN came before accept(): nginx's (santa_stream_ends)
					case err == nil && len(got) == 0:
						none++
					default:
						check(t, e, got, kernel)
						if err != nil {
							t.Errorf("reading the reply: %v", err)
						}
					}
				}
				if whole != n {
					now := s.mark(t)
					t.Errorf("%d of %d half-closed clients got the whole reply, %d none (kernel's: %v)\nTCP path counters since: %s",
						whole, n, none, kernel, tcpPaths(now.paths, m.paths))
				}
			})
		}
	}
}

// pyAbort is the Python client's abort plan: one connection each.
type pyAbort struct {
	Conns []pyAbortConn `json:"conns"`
}

type pyAbortConn struct {
	Req     string `json:"req"`     // hex; sent at once
	Linger0 bool   `json:"linger0"` // close with a reset (SO_LINGER 0)
	Read    int    `json:"read"`    // bytes read before closing
	Shut    bool   `json:"shut"`    // half-close after the request, read to the end
}

// testAborts: clients that send a matched request and go away at once,
// with a reset or a close, before, during or after the reply, or that send
// half a request and reset. Afterwards nginx and the kernel still answer,
// and no connection is left behind.
func (s *site) testAborts(t *testing.T) {
	big, small := hex.EncodeToString(s.ex["raw4 "+uriBig].req), hex.EncodeToString(s.ex["raw4 "+uriSmall].req)
	half := hex.EncodeToString(s.ex["raw4 "+uriSmall].req[:20])
	kinds := []pyAbortConn{
		{Req: big, Linger0: true},
		{Req: big},
		{Req: big, Read: 1000, Linger0: true},
		{Req: big, Read: 30000},
		{Req: small, Linger0: true},
		{Req: small},
		{Req: half, Linger0: true},
		{Req: small, Shut: true},
		{Req: big, Shut: true},
	}
	var plan pyAbort
	for i := range 40 * len(kinds) {
		plan.Conns = append(plan.Conns, kinds[i%len(kinds)])
	}
	m := s.mark(t)
	var res map[string]int
	if err := json.Unmarshal(s.runPython(t, "abort", plan), &res); err != nil {
		t.Fatal(err)
	}
	now := s.mark(t)
	t.Logf("%d connections aborted; half-closed ones: %v; TCP path counters: %s",
		len(plan.Conns), res, tcpPaths(now.paths, m.paths))
	if res["stuck"] != 0 || res["none"] != 0 {
		t.Errorf("of the half-closed connections, %d got neither a reply nor an end, %d only the end",
			res["stuck"], res["none"])
	}
	s.waitQuiet(t)
	// Still served, by the kernel and by nginx.
	s.fetchWithCurl(t, "curl4", serverIPv4, uriSmall, uriMiss)
	s.fetchWithCurl(t, "curl6", serverIPv6, uriBig)
}

// testThousand: a thousand connections at once, from wrk (keep-alive, one
// matched URL) and from Go (a matched, a missed and a matched request on
// each, all replies checked).
func (s *site) testThousand(t *testing.T) {
	t.Run("wrk", func(t *testing.T) {
		m := s.mark(t)
		report := s.wrk(t, 1000, 3*time.Second)
		t.Logf("wrk:\n%s", report)
		done := regexp.MustCompile(`([0-9]+) requests in`).FindStringSubmatch(report)
		if done == nil {
			t.Fatal("no request count in wrk's report")
		}
		for _, bad := range []string{"Socket errors", "Non-2xx"} {
			if strings.Contains(report, bad) {
				t.Errorf("wrk reports %s", bad)
			}
		}
		n, _ := strconv.ParseUint(done[1], 10, 64)
		s.waitQuiet(t) // wrk's last requests may be answered after it counted
		now := s.mark(t)
		if got := now.st.Matched - m.st.Matched; got < n || n < 1000 {
			t.Errorf("kernel answered %d requests, wrk completed %d (want at least 1000, all the kernel's)", got, n)
		}
		if got := now.st.Passed - m.st.Passed; got != 0 {
			t.Errorf("%d segments passed to nginx, want 0", got)
		}
		if got := s.served(t, m, 0); len(got) != 0 {
			t.Errorf("nginx served %v, want nothing", got)
		}
		if t.Failed() {
			t.Logf("TCP path counters since: %s", tcpPaths(now.paths, m.paths))
		}
	})

	t.Run("Go", func(t *testing.T) {
		const n = 1000
		// Half over IPv4 with rawRequest's requests, half over IPv6 with
		// curl's (sent by Go, byte for byte).
		var seqs [2][]*httpEx
		for f, client := range []string{"raw4 ", "curl6 "} {
			for _, uri := range []string{uriSmall, uriMid, uriMiss, uriSmall} {
				seqs[f] = append(seqs[f], s.ex[client+uri])
			}
		}
		m := s.mark(t)
		// All connected first: a thousand at once.
		conns := make([]net.Conn, n)
		for i := range conns {
			addr := addr4
			if i%2 == 1 {
				addr = addr6
			}
			conns[i] = s.connect(t, addr)
		}
		s.accepted(t, conns...)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []string
		for i, c := range conns {
			wg.Go(func() {
				br := bufio.NewReader(c)
				for j, e := range seqs[i%2] {
					_, err := c.Write(e.req)
					var got []byte
					if err == nil {
						got, err = readReply(br)
					}
					want, reply := e.reply, got
					if j >= 2 {
						want, reply = withoutDate(want), withoutDate(reply)
					}
					if err == nil && !bytes.Equal(reply, want) {
						err = fmt.Errorf("reply %q, want %q", abbrev(got), abbrev(e.reply))
					}
					if err != nil {
						mu.Lock()
						errs = append(errs, fmt.Sprintf("connection %d, request %d (%s): %v", i, j, e.uri, err))
						mu.Unlock()
						return
					}
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			t.Errorf("%d of %d connections failed, e.g.:\n%s", len(errs), n, strings.Join(errs[:min(len(errs), 10)], "\n"))
		}
		s.idle(t, conns...)
		for _, c := range conns {
			c.Close()
		}
		s.expect(t, m, 2*n, 2*n, map[string]int{uriMiss: n, uriSmall: n})
	})
}

// ---- sockets left behind ----

// accepted waits until nginx has accepted conns: a process holds the
// server end of each (ss -e gives its inode).
func (s *site) accepted(t *testing.T, conns ...net.Conn) {
	t.Helper()
	want := map[string]bool{}
	for _, c := range conns {
		want[c.LocalAddr().String()] = true
	}
	for deadline := time.Now().Add(settle); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		var inodes []uint64
		for _, l := range s.serverSockets(t) {
			if want[l.peer] {
				inodes = append(inodes, l.inode)
			}
		}
		held, err := procsock.Holders(inodes)
		if err != nil {
			t.Fatal(err)
		}
		if len(inodes) == len(want) && len(held) == len(want) {
			return
		}
	}
	t.Fatalf("nginx has not accepted %d connections after %v", len(conns), settle)
}

// ssLine is a line of ss -tane: a TCP socket.
type ssLine struct {
	state        string
	recvQ, sendQ int
	local, peer  string
	inode        uint64
}

// serverSockets is every TCP socket on nginx's port 80 in the server
// namespace, listeners included.
func (s *site) serverSockets(t *testing.T) []ssLine {
	var port80 []ssLine
	for _, l := range sockets(t, s.r.srv) {
		if strings.HasSuffix(l.local, ":80") {
			port80 = append(port80, l)
		}
	}
	return port80
}

// sockets is every TCP socket of namespace ns: ss -tane.
func sockets(t *testing.T, ns string) []ssLine {
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "ss", "-tanHe").Output()
	if err != nil {
		t.Fatalf("ss: %v", err)
	}
	var lines []ssLine
	for l := range strings.Lines(string(out)) {
		f := strings.Fields(l)
		if len(f) < 5 {
			continue
		}
		r, _ := strconv.Atoi(f[1])
		q, _ := strconv.Atoi(f[2])
		line := ssLine{state: f[0], recvQ: r, sendQ: q, local: f[3], peer: f[4]}
		for _, x := range f[5:] {
			if v, ok := strings.CutPrefix(x, "ino:"); ok {
				line.inode, _ = strconv.ParseUint(v, 10, 64)
			}
		}
		lines = append(lines, line)
	}
	return lines
}

// idle checks that the server's ends of conns, connections whose replies
// the client has all read, are established with nothing queued: no
// request byte left in a receive queue (the kernel's answers consume
// theirs), no reply byte unsent. It waits a little for the last ACKs.
func (s *site) idle(t *testing.T, conns ...net.Conn) {
	t.Helper()
	var busy []ssLine
	missing := 0
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		want := map[string]bool{}
		for _, c := range conns {
			want[c.LocalAddr().String()] = true
		}
		busy = busy[:0]
		for _, l := range s.serverSockets(t) {
			if want[l.peer] {
				delete(want, l.peer)
				if l.state != "ESTAB" || l.recvQ != 0 || l.sendQ != 0 {
					busy = append(busy, l)
				}
			}
		}
		if missing = len(want); missing == 0 && len(busy) == 0 {
			return
		}
	}
	ps, _ := s.d.PathStats()
	t.Errorf("of %d connections, %d have no server end and %d are not idle, e.g. %+v\nTCP path counters: %s",
		len(conns), missing, len(busy), busy[:min(len(busy), 5)], tcpPaths(ps, nil))
}

// waitQuiet waits until, with every client gone, nginx's port has only
// its listeners (with empty accept queues) and TIME-WAIT sockets: no
// connection stalled open, no byte left unread in a receive queue.
func (s *site) waitQuiet(t *testing.T) {
	t.Helper()
	var left []ssLine
	for deadline := time.Now().Add(settle); ; time.Sleep(50 * time.Millisecond) {
		left = left[:0]
		for _, l := range s.serverSockets(t) {
			if l.recvQ != 0 || (l.state != "LISTEN" && l.state != "TIME-WAIT") {
				left = append(left, l)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
	}
	var b strings.Builder
	for _, l := range left {
		fmt.Fprintf(&b, "\n  %-10s Recv-Q %-6d Send-Q %-6d %s <- %s", l.state, l.recvQ, l.sendQ, l.local, l.peer)
	}
	ps, _ := s.d.PathStats()
	t.Errorf("%v after the clients left, %d sockets on port 80 are not idle:%s\nTCP path counters: %s",
		settle, len(left), b.String(), tcpPaths(ps, nil))
}

// pythonClient is the Python client. keepalive: per connection of the
// plan, each request sent and its reply read before the next; every reply
// byte goes to stdout. abort: one connection per entry, see pyAbortConn;
// prints how the half-closed ones ended, as JSON.
const pythonClient = `
import json, socket, struct, sys

def read_reply(s, buf):
    # One HTTP/1.1 reply with a Content-Length body, every byte.
    while (end := buf.find(b"\r\n\r\n")) < 0:
        data = s.recv(65536)
        if not data:
            raise EOFError("closed after %d bytes of headers" % len(buf))
        buf += data
    length = 0
    for line in bytes(buf[:end]).split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    total = end + 4 + length
    while len(buf) < total:
        data = s.recv(65536)
        if not data:
            raise EOFError("closed in a body")
        buf += data
    return bytes(buf[:total]), buf[total:]

def connect(host, port, timeout):
    s = socket.create_connection((host, port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s

def keepalive(host, port, plan):
    out = sys.stdout.buffer
    for reqs in plan["conns"]:
        s = connect(host, port, 5)
        buf = bytearray()
        for req in reqs:
            s.sendall(bytes.fromhex(req))
            reply, buf = read_reply(s, buf)
            out.write(reply)
        if buf:
            raise ValueError("%d bytes after the last reply" % len(buf))
        s.close()

def abort(host, port, plan):
    res = {"replied": 0, "none": 0, "reset": 0, "stuck": 0}
    for c in plan["conns"]:
        s = connect(host, port, 1)
        if c["linger0"]:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.sendall(bytes.fromhex(c["req"]))
        if c["shut"]:
            s.shutdown(socket.SHUT_WR)
        got, want = 0, c["read"] if not c["shut"] else 1 << 30
        try:
            while got < want:
                data = s.recv(65536)
                if not data:
                    break
                got += len(data)
            if c["shut"]:
                # nginx closes at the end of the stream, after the
                # kernel's reply or its own.
                res["replied" if got > 0 else "none"] += 1
        except ConnectionResetError:
            res["reset"] += 1
        except socket.timeout:
            res["stuck"] += 1
        s.close()
    print(json.dumps(res))

mode, host, port, plan = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.load(open(sys.argv[4]))
{"keepalive": keepalive, "abort": abort}[mode](host, port, plan)
`
