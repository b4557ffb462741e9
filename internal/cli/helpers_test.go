package cli

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/rule"
)

// start is when the tests' clock starts; it moves a second at each reading.
var start = time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)

// testEnv is santactl's env for a test: the daemon at socket, standard
// input stdin, and the tests' clock, which calls tick at each reading.
func testEnv(socket, stdin string, tick func()) *env {
	now := start.Add(-time.Second)
	return &env{
		global: globalOptions{socket: socket},
		stdin:  strings.NewReader(stdin),
		stdout: &bytes.Buffer{},
		stderr: &bytes.Buffer{},
		clock: func() time.Time {
			if tick != nil {
				tick()
			}
			now = now.Add(time.Second)
			return now
		},
	}
}

// santactl runs santactl with args against the daemon at socket.
func santactl(t *testing.T, socket string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runEnv(t, testEnv(socket, "", nil), args...)
}

func runEnv(t *testing.T, e *env, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	err := run(context.Background(), append([]string{"-socket", e.global.socket}, args...), e)
	return e.stdout.(*bytes.Buffer).String(), e.stderr.(*bytes.Buffer).String(), ExitCode(err)
}

// output is what santactl with args writes, successfully.
type output struct {
	args []string
	want string
}

// checkOutputs runs santactl against the daemon at socket with each
// output's args, and compares what it writes with the want.
func checkOutputs(t *testing.T, socket string, outputs []output) {
	t.Helper()
	for _, o := range outputs {
		stdout, stderr, code := santactl(t, socket, o.args...)
		if code != 0 || stderr != "" {
			t.Errorf("%q: exit status %d, stderr %q", o.args, code, stderr)
		}
		check(t, fmt.Sprint(o.args), stdout, o.want)
	}
}

// check compares what santactl wrote with what it should have.
func check(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s:\n%s\nwant:\n%s", what, got, want)
	}
}

// hello and dns are the rules of the tests' service: the paper's Listing 1
// and a DNS answer that copies the query's transaction id, for queries of
// exactly the question's length.
var (
	hello = rule.Rule{
		Condition:  rule.Condition{Offset: 0, Pattern: []byte("Hello")},
		Processors: []rule.Processor{rule.Put(0, []byte("COMSYS"))},
		ReplyLen:   6,
	}
	dns = rule.Rule{
		Condition:  rule.Condition{Offset: 2, Pattern: []byte("\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01"), MinLen: 29, MaxLen: 29},
		Processors: []rule.Processor{rule.Put(2, []byte("\x81\x80\x00\x01\x00\x01")), rule.Copy(0, 2, 0)},
		ReplyLen:   12,
	}
	hi = rule.Rule{
		Condition:  rule.Condition{Offset: 0, Pattern: []byte("Hi")},
		Processors: []rule.Processor{rule.Put(0, []byte("Ho")), rule.Copy(2, 4, 2), rule.Put(3, []byte("!"))},
		ReplyLen:   6,
	}
)

// withService is a fake with one service, 7, on 127.0.0.1:7777, holding
// hello, dns and hi as rules 1, 2 and 3.
func withService(t *testing.T) (*fake, string) {
	f, path := newFake(t)
	f.addService(client.ServiceInfo{Protocol: 17, Family: 4, Port: 7777, Addr: [16]byte{127, 0, 0, 1}, Cookie: 4097, NetnsCookie: 1, OwnerUID: 1000},
		client.ServiceStats{Matched: 150, Passed: 20, Fallback: 1, TCChecksum: 1, BadCsum: 0, RuleBytes: 93},
		hello, dns, hi)
	return f, path
}
