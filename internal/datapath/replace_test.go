package datapath

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/rule"
)

// versioned is rule key's reply in version v: every byte says which version
// it belongs to, and the lengths differ, so a reply mixing two versions (or
// an old length with new bytes) cannot pass for either.
func versioned(key string, v int) rule.Rule {
	n := 100 + (v%2)*900
	body := bytes.Repeat([]byte{byte('A' + v%26)}, n)
	return rule.Rule{
		Condition:  rule.Condition{Offset: 0, Pattern: []byte(key)},
		Processors: []rule.Processor{rule.Put(0, body), rule.Copy(0, uint16(len(key)), 0)},
		ReplyLen:   uint16(n),
	}
}

// Rules change under traffic without a torn reply: a writer replaces rules
// and, now and then, adds and deletes a rule at another offset with a short
// condition, which changes the service's regions and switches it to a new
// index generation. Readers on every CPU check each reply byte for byte
// against every version that could be live.
func TestReplaceUnderTraffic(t *testing.T) {
	d := openTest(t)
	c := boundUDP(t, "127.0.0.1:0")
	svc := register(t, d, c)
	to := local(c)

	const keys = 8
	ids := make([]model.RuleID, keys)
	for k := range keys {
		id, err := d.AddRule(svc, versioned(fmt.Sprintf("key-%d", k), 0))
		if err != nil {
			t.Fatal(err)
		}
		ids[k] = id
	}
	// Replies of every version a reader may meet, by key.
	const versions = 26
	valid := make([]map[string]bool, keys)
	for k := range keys {
		key := fmt.Sprintf("key-%d", k)
		valid[k] = map[string]bool{}
		for v := range versions {
			valid[k][string(expectReply(versioned(key, v), []byte(key)))] = true
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var replaced, replies, misses atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the writer
		defer wg.Done()
		defer cancel()
		for v := 1; ctx.Err() == nil && v < 100000; v++ {
			k := v % keys
			if err := d.ReplaceRule(ids[k], versioned(fmt.Sprintf("key-%d", k), v%versions)); err != nil {
				t.Error(err)
				return
			}
			replaced.Add(1)
			if v%50 == 0 { // regions change twice: a new generation each time
				extra, err := d.AddRule(svc, rule.Rule{Condition: rule.Condition{Offset: 3, Pattern: []byte("z")},
					Processors: []rule.Processor{rule.Put(0, []byte("z"))}, ReplyLen: 1})
				if err != nil {
					t.Error(err)
					return
				}
				if err := d.DeleteRule(extra); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	for r := range 4 { // readers, spread over the CPUs by the scheduler
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil && i < 2_000_000; i++ {
				k := (i + r) % keys
				key := fmt.Sprintf("key-%d", k)
				req := request(to, []byte(key))
				verdict, out := run(t, d.XDPProgram(), req.Bytes())
				if verdict != xdpTX {
					misses.Add(1)
					continue
				}
				replies.Add(1)
				hdr := len(req.Bytes()) - len(key) // Ethernet, IPv4, UDP
				if !valid[k][string(out[hdr:])] {
					t.Errorf("torn or wrong reply for %s: %q", key, out[hdr:])
					cancel()
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d replacements, %d replies checked, %d misses", replaced.Load(), replies.Load(), misses.Load())
	if replaced.Load() < 100 || replies.Load() < 1000 {
		t.Fatalf("too little happened to tell: %d replacements, %d replies", replaced.Load(), replies.Load())
	}
	if misses.Load() != 0 {
		t.Errorf("%d requests for installed rules were not answered", misses.Load())
	}
}
