package daemon

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/internal/santadtest"
	"github.com/santa-offload/santa/rule"
)

// The real santad learns what a service passes: HOT reports the key of
// requests no rule answered, counted once each, within a couple of
// windows; requests a rule answers are not counted. A key's passes count
// from its sample, at its second pass in a window.
func TestLearnHot(t *testing.T) {
	e := newEnv(t, "l", "")
	c, _, svc := e.attachedUDP(t)
	if _, err := c.AddRules(svc.ServiceID, []rule.Rule{pingRule}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetLearning(svc.ServiceID, client.Learning{KeyOffset: 2, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	services, err := c.Services()
	if err != nil || len(services) != 1 || services[0].Manager == "" {
		t.Fatalf("services %+v, %v: want this test as the manager", services, err)
	}
	q := e.dialUDP(t, svc.Port)
	const batch = 50
	// A batch that straddles the end of a window is counted in two: then
	// the next batch is looked for, at most three.
	for try := range 3 {
		q.SetDeadline(time.Time{}) // Ask's, long past after waitHot
		for i := range batch {
			if _, err := q.Write(append([]byte{byte(try), byte(i)}, "hot-key"...)); err != nil {
				t.Fatal(err)
			}
			if got, err := santadtest.Ask(q, []byte("ping"), time.Second); err != nil || string(got) != "pong" {
				t.Fatalf("ping: %q, %v", got, err)
			}
		}
		want := batch
		if try == 0 {
			want = batch - 2
		}
		got := waitHot(t, c, svc.ServiceID)
		if got == fmt.Sprintf("%d:hot-key", want) {
			return
		}
		t.Logf("batch %d: hot set %s", try, got)
	}
	t.Fatalf("no window counted the %d requests", batch)
}

// waitHot waits up to 3 s for a window with passed requests, and gives its
// first as count:key.
func waitHot(t *testing.T, c *client.Client, service uint32) string {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		set, err := c.Hot(service, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(set.Requests) > 0 {
			if len(set.Requests) != 1 || set.Window <= 0 {
				t.Fatalf("hot set %+v over %v: want one key", set.Requests, set.Window)
			}
			return fmt.Sprintf("%d:%s", set.Requests[0].Passes, set.Requests[0].Key)
		}
	}
	return "nothing"
}

// A hot set larger than one HOT reply is read whole, in pages of one
// window (protocol version 5): 1500 keys of 200 bytes, about 630 to a
// reply. Each key passes three times: its second brings its sample, its
// third counts. With counts asked for (protocol version 6) above the
// passes of a window, every passed request is counted, and the set says
// so.
func TestLearnHotPages(t *testing.T) {
	e := newEnv(t, "p", "")
	c, _, svc := e.attachedUDP(t)
	if err := c.SetLearning(svc.ServiceID, client.Learning{KeyOffset: 2, Enabled: true, Counts: 50000}); err != nil {
		t.Fatal(err)
	}
	const keys, keyLen = 1500, 200
	onePage := (protocol.MaxMessage - protocol.HotOverhead(protocol.MaxVersion)) / (6 + keyLen)
	q := e.dialUDP(t, svc.Port)
	// A batch that straddles the end of a window may leave too few keys in
	// either: then the next batch is looked for, at most three.
	for try := range 3 {
		for range 3 {
			for i := range keys {
				key := fmt.Appendf(nil, "%d-%04d-", try, i)
				key = append(key, bytes.Repeat([]byte{'x'}, keyLen-len(key))...)
				if _, err := q.Write(append([]byte{0, 0}, key...)); err != nil {
					t.Fatal(err)
				}
			}
		}
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			set, err := c.Hot(svc.ServiceID, 2*keys)
			if err != nil {
				t.Fatal(err)
			}
			if len(set.Requests) <= onePage {
				continue
			}
			seen := map[string]bool{}
			for _, r := range set.Requests {
				if len(r.Key) != keyLen || seen[string(r.Key)] {
					t.Fatalf("a key of %d bytes, or twice: %q", len(r.Key), r.Key[:min(len(r.Key), 12)])
				}
				seen[string(r.Key)] = true
			}
			if set.Number == 0 || set.CountedPPM != 1e6 {
				t.Fatalf("%d forms of window %d, %d ppm counted; want a window's, all counted", len(set.Requests), set.Number, set.CountedPPM)
			}
			t.Logf("batch %d: %d forms of window %d, %d to a reply", try, len(set.Requests), set.Number, onePage)
			return
		}
	}
	t.Fatalf("no window's hot set held more than one reply's %d forms", onePage)
}
