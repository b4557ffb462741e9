package mcparse_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	m "github.com/santa-offload/santa/internal/mcproto"
)

// A session with a real memcached: each command's bytes and the reply
// memcached gave it (empty if none).
type exchange struct {
	command string
	reply   []byte
}

type recorded []exchange

func (r recorded) requests() string {
	var b strings.Builder
	for _, e := range r {
		b.WriteString(e.command)
	}
	return b.String()
}

// session is what FuzzMcParse starts from besides the fixtures: a few
// commands and memcached 1.6.18's replies, as recorded by
// TestRealMemcached.
var session = struct {
	recorded
	replies string
}{
	recorded{{command: "set a 0 0 5\r\nhello\r\n"}, {command: "mg a v q\r\n"}, {command: "mg b v q\r\n"},
		{command: "mn\r\n"}, {command: "get a\r\n"}},
	"STORED\r\nVA 5\r\nhello\r\nMN\r\nVALUE a 0 5\r\nhello\r\nEND\r\n",
}

// startMemcached runs memcached on a free loopback port for the test, and
// connects to it.
func startMemcached(t *testing.T) net.Conn {
	t.Helper()
	if _, err := exec.LookPath("memcached"); err != nil {
		t.Fatal("memcached is not installed (make test-deps)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	args := []string{"-U", "0", "-p", port, "-l", "127.0.0.1", "-m", "16", "-c", "16", "-t", "1"}
	if os.Geteuid() == 0 {
		args = append(args, "-u", "root") // memcached will not run as root unasked
	}
	cmd := exec.Command("memcached", args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
		if err == nil {
			t.Cleanup(func() { c.Close() })
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("memcached did not listen on %s: %v", port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// send sends command followed by mn, and returns what memcached replied
// before the MN: the command's reply. The mn tells when memcached is done
// with the command, and changes nothing; a session replayed without the
// mns gets the same replies. quit is answered by closing.
func send(t *testing.T, c net.Conn, r *bufio.Reader, command string) []byte {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	quit := strings.HasPrefix(command, "quit")
	if _, err := io.WriteString(c, command+"mn\r\n"); err != nil {
		t.Fatal(err)
	}
	var reply []byte
	if quit {
		reply, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		return reply
	}
	mns := 1
	if command == "mn\r\n" {
		mns = 2
	}
	for bytes.Count(reply, []byte("MN\r\n")) < mns || !bytes.HasSuffix(reply, []byte("MN\r\n")) {
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("%q: %v after %q", command, err, reply)
		}
		reply = append(reply, line...)
	}
	return reply[:len(reply)-4]
}

var casUnique = regexp.MustCompile(`VALUE a 0 \d+ (\d+)\r\n`)

// record runs the script against memcached. Each reply here is one reply
// or none.
func record(t *testing.T) recorded {
	c := startMemcached(t)
	r := bufio.NewReader(c)
	var rec recorded
	do := func(command string) []byte {
		reply := send(t, c, r, command)
		rec = append(rec, exchange{command, reply})
		return reply
	}
	do("version\r\n")
	do("set a 0 0 5\r\nhello\r\n")
	do("get a b\r\n")
	cas := casUnique.FindSubmatch(do("gets a\r\n"))
	if cas == nil {
		t.Fatalf("no cas unique in %q", rec[len(rec)-1].reply)
	}
	do(fmt.Sprintf("cas a 0 0 3 %s\r\nnew\r\n", cas[1]))
	do(fmt.Sprintf("cas a 0 0 3 %s\r\nold\r\n", cas[1]))
	for _, command := range []string{
		"add a 0 0 1\r\nx\r\n", "add b 0 0 1 noreply\r\nx\r\n", "replace c 0 0 1\r\nx\r\n",
		"append a 0 0 2\r\n!!\r\n", "prepend a 0 0 2\r\n<<\r\n", "set n 0 0 2\r\n10\r\n",
		"set data 0 0 19\r\ndelete a\r\nget a\r\n\r\n\r\n",
		"incr n 5\r\n", "decr n 1 noreply\r\n", "incr a 1\r\n", "incr a 1 noreply\r\n",
		"touch a 100\r\n", "touch zz 100 noreply\r\n", "gat 100 a n\r\n", "gats 100 zz\r\n",
		"delete b\r\n", "delete b 0\r\n", "delete n noreply\r\n", "delete noreply\r\n",
		"verbosity 0\r\n", "verbosity 0 noreply\r\n",
		"stats\r\n", "stats settings\r\n", "stats items\r\n", "stats slabs\r\n", "stats reset\r\n", "stats bogus\r\n",
		"mg a v\r\n", "mg a s t c f k O9 v\r\n", "mg zz v\r\n", "mg zz v q\r\n", "mg a v q\r\n",
		"mg nv N30 v\r\n", "mg a T60\r\n",
		"ms m 3 T0 F5\r\nabc\r\n", "ms m 3 q\r\nxyz\r\n", "ms m 3 q MA\r\ndef\r\n", "ms zz 1 q MR\r\nx\r\n",
		"ms bad 2 Z\r\nhi\r\n", "ms Zm9v 2 b\r\nhi\r\n",
		"md m q\r\n", "md m q\r\n", "md zz\r\n",
		"ma cnt N0 J10\r\n", "ma cnt q\r\n", "ma cnt v\r\n", "ma a q\r\n",
		"mg zz v q\r\n", "get a\r\n", "mn\r\n", "me a\r\n",
		"flush_all 0\r\n", "flush_all noreply\r\n", "get a\r\n", "quit\r\n",
	} {
		do(command)
	}
	return rec
}

// The parsers follow a scripted session with a real memcached: every
// command is seen to end where it ends, with the number of replies
// memcached gave it; every reply too; and no command counts as done
// before memcached answered it or a later one.
func TestRealMemcached(t *testing.T) {
	rec := record(t)
	requests := []byte(rec.requests())
	var replies []byte
	var cmdEnds, replyEnds, replyOf []int // replyOf: the command of each reply
	for i, e := range rec {
		cmdEnds = append(cmdEnds, len(rec[:i+1].requests()))
		if len(e.reply) > 0 {
			replies = append(replies, e.reply...)
			replyEnds = append(replyEnds, len(replies))
			replyOf = append(replyOf, i)
		}
	}
	t.Logf("%d commands, %d replies, %d and %d bytes", len(rec), len(replyOf), len(requests), len(replies))

	whole := goRun(t, requests, replies, nil, nil)
	p := load(t)
	same(t, "data plane", bpfRun(t, p, requests, replies, nil, nil), whole)
	rng := rand.New(rand.NewPCG(23, 1))
	for range 50 {
		reqCuts, repCuts := cuts(rng, len(requests)), cuts(rng, len(replies))
		same(t, "data plane, cut", bpfRun(t, p, requests, replies, reqCuts, repCuts), whole)
	}

	var cmds, reps []m.Event
	for _, e := range whole.events {
		switch e.Type {
		case m.EvCmd:
			cmds = append(cmds, e)
		case m.EvReply:
			reps = append(reps, e)
		case m.EvLost:
			t.Fatalf("lost sync: %v", e)
		}
	}
	if len(cmds) != len(rec) || len(reps) != len(replyOf) {
		t.Fatalf("%d commands and %d replies parsed, %d and %d sent", len(cmds), len(reps), len(rec), len(replyOf))
	}
	for i, e := range cmds {
		c := rec[i]
		fields := strings.Fields(c.command)
		switch {
		case e.Cmd.String() != fields[0] || int(e.Off) != cmdEnds[i]:
			t.Errorf("%q: parsed as %v", c.command, e)
		case e.Reply == m.ReplyOne && len(c.reply) == 0, e.Reply == m.ReplyNone && len(c.reply) != 0:
			t.Errorf("%q: expected replies %d, memcached's %q", c.command, e.Reply, c.reply)
		case e.Flags&^m.CmdTTL == m.CmdWrite && e.Hash != m.KeyHash([]byte(fields[1])) &&
			!((e.Cmd == m.CmdGat || e.Cmd == m.CmdGats) && e.Hash == m.KeyHash([]byte(fields[2]))):
			t.Errorf("%q: the write's key is not %q", c.command, fields[1])
		}
	}
	for j, e := range reps {
		if int(e.Off) != replyEnds[j] {
			t.Errorf("reply %d (%q) ends at %d, parsed at %d", j, rec[replyOf[j]].reply, replyEnds[j], e.Off)
		}
		// What memcached had done when it sent reply j: the commands up
		// to replyOf[j]. Any later command counted done is a write
		// counted done before memcached read it.
		for i, c := range cmds {
			if int32(c.Seq-e.Seq) <= 0 && i > replyOf[j] {
				t.Errorf("after reply %d (to %q), %q counts as done", j, rec[replyOf[j]].command, rec[i].command)
			}
		}
	}
	// The session ends in sync (its last mn): every command up to the
	// last one answered counts as done.
	last := reps[len(reps)-1]
	for i, c := range cmds[:replyOf[len(reps)-1]+1] {
		if int32(c.Seq-last.Seq) > 0 {
			t.Errorf("%q never counts as done", rec[i].command)
		}
	}
}

// TestSession keeps FuzzMcParse's recorded seed true to memcached.
func TestSession(t *testing.T) {
	c := startMemcached(t)
	r := bufio.NewReader(c)
	var replies []byte
	for _, e := range session.recorded {
		replies = append(replies, send(t, c, r, e.command)...)
	}
	if string(replies) != session.replies {
		t.Fatalf("memcached replied %q, the seed holds %q", replies, session.replies)
	}
}
