package datapath

import (
	"bytes"
	"fmt"
	"io"
	osexec "os/exec"
	"sync"
	"testing"
	"time"

	"github.com/santa-offload/santa/rule"
)

// Many connections ask at once, each its own rule, whose reply copies the
// request: every reply must be built from its own connection's request.
// With receive packet steering on loopback, a segment sent on one CPU is
// received on the other, in a softirq an IPI starts in the middle of
// whatever runs there, often the sockmap worker running the reply program.
// When that program shared its per-CPU scratch with the verdict, connections
// got replies built from other connections' requests. And the verdict itself
// runs in a task when a socket's lock is released: while it read requests
// into the shared scratch, a softirq could overwrite one under it (the
// request passed, the connection's reads timed out), and while it added to
// its counters plainly, increments were lost (bounced below answered).
func TestTCPConcurrentRepliesStayApart(t *testing.T) {
	r := newTCPRig(t, "tcp4", "127.0.0.1:0", appServer{})
	defer r.back()
	if out, err := osexec.Command("unshare", "-m", "sh", "-c",
		"mount -t sysfs none /sys && echo 3 > /sys/class/net/lo/queues/rx-0/rps_cpus").CombinedOutput(); err != nil {
		t.Fatalf("enabling RPS on loopback: %v: %s", err, out)
	}
	const conns, rounds = 24, 2000
	request := func(i int) []byte { return fmt.Appendf(nil, "GET /c%03d\n", i) }
	reply := func(req []byte) []byte { return append(append(bytes.Repeat([]byte{'r'}, 40), req...), '\n') }
	for i := range conns {
		req := request(i)
		rr := rule.Rule{Condition: rule.Condition{Pattern: req},
			Processors: []rule.Processor{rule.Put(0, reply(bytes.Repeat([]byte{'?'}, len(req)))),
				rule.Copy(0, uint16(len(req)), 40)},
			ReplyLen: uint16(len(req) + 41)}
		if _, err := r.d.AddRule(r.svc, rr); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i := range conns {
		c := r.dial(t, "tcp4")
		req := request(i)
		want := reply(req)
		wg.Go(func() {
			got := make([]byte, len(want))
			c.SetDeadline(time.Now().Add(10 * time.Second))
			for range rounds {
				if _, err := c.Write(req); err != nil {
					t.Error(err)
					return
				}
				if _, err := io.ReadFull(c, got); err != nil {
					t.Errorf("connection %d: %v", i, err)
					return
				}
				if !bytes.Equal(got, want) {
					t.Errorf("connection %d: reply %q, want %q", i, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
	r.expectCounts(t, conns*rounds, 0, 0)
}
