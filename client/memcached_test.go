package client

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/rule"
)

// SetParser, Generation, guarded rules and MemcachedStats send what they
// say, in version 2.
func TestMemcached(t *testing.T) {
	var mu sync.Mutex
	var sent []protocol.Body
	path := serve(t, func(req protocol.Body, _ []int) protocol.Body {
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, req)
		switch req := req.(type) {
		case *protocol.Hello:
			return &protocol.HelloReply{Version: 2}
		case *protocol.Parser:
			return &protocol.ParserReply{}
		case *protocol.Generation:
			return &protocol.GenerationReply{Gen: 5, DomainGen: 2, Epoch: 1, InFlight: true}
		case *protocol.AddRules:
			return &protocol.AddRulesReply{RuleIDs: []uint32{10, 11}[:len(req.Rules)]}
		case *protocol.ReplaceRules:
			return &protocol.ReplaceRulesReply{}
		case *protocol.Begin:
			return &protocol.BeginReply{Txn: 4}
		case *protocol.MemcachedStats:
			return &protocol.MemcachedStatsReply{Domain: 3, Writes: 9}
		}
		return protocol.Errorf(syscall.EINVAL, "unexpected %v", req.Type())
	})
	c := dialTo(t, path)
	if err := c.SetParser(4, Parser{Kind: ParserMemcached, Domain: 3}); err != nil {
		t.Fatal(err)
	}
	g, err := c.Generation(4, []byte("k1"))
	if err != nil || g != (Generation{Gen: 5, DomainGen: 2, Epoch: 1, InFlight: true}) {
		t.Fatalf("Generation gives %+v, %v", g, err)
	}
	guard := g.Guard([]byte("k1"), 1500*time.Microsecond)
	r := rule.Rule{Condition: rule.Condition{Pattern: []byte("get k1\r\n")}, Processors: []rule.Processor{rule.Put(0, []byte("V"))}, ReplyLen: 1}
	ids, err := c.AddGuardedRules(4, []GuardedRule{{Rule: r, Guard: guard}, {Rule: r}})
	if err != nil || !reflect.DeepEqual(ids, []uint32{10, 11}) {
		t.Fatalf("AddGuardedRules gives %v, %v", ids, err)
	}
	if err := c.ReplaceRules(4, []RuleEntry{{RuleID: 10, Rule: r, Guard: guard}}); err != nil {
		t.Fatal(err)
	}
	txn, err := c.Begin(4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := txn.AddGuardedRules([]GuardedRule{{Rule: r, Guard: guard}}); err != nil {
		t.Fatal(err)
	}
	st, err := c.MemcachedStats(4)
	if err != nil || st.Domain != 3 || st.Writes != 9 {
		t.Fatalf("MemcachedStats gives %+v, %v", st, err)
	}

	wantGuard := &protocol.Guard{Key: []byte("k1"), Gen: 5, DomainGen: 2, Epoch: 1, ExpiresInMS: 2} // rounded up
	want := []protocol.Body{
		&protocol.Hello{MinVersion: protocol.MinVersion, MaxVersion: protocol.MaxVersion},
		&protocol.Parser{ServiceID: 4, Kind: protocol.ParserMemcached, Domain: 3},
		&protocol.Generation{ServiceID: 4, Key: []byte("k1")},
		&protocol.AddRules{ServiceID: 4, Rules: []rule.Rule{r, r}, Guards: []*protocol.Guard{wantGuard, nil}},
		&protocol.ReplaceRules{ServiceID: 4, Updates: []protocol.RuleEntry{{RuleID: 10, Rule: r, Guard: wantGuard}}},
		&protocol.Begin{ServiceID: 4},
		&protocol.AddRules{ServiceID: 4, Txn: 4, Rules: []rule.Rule{r}, Guards: []*protocol.Guard{wantGuard}},
		&protocol.MemcachedStats{ServiceID: 4},
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != len(want) {
		t.Fatalf("sent %d requests, want %d", len(sent), len(want))
	}
	for i := 1; i < len(want); i++ { // HELLO's client name is the program's
		if !reflect.DeepEqual(sent[i], want[i]) {
			t.Errorf("request %d is %+v, want %+v", i, sent[i], want[i])
		}
	}
}

func TestGuardDeadline(t *testing.T) {
	g := Generation{Gen: 1, Epoch: 2}
	for _, tt := range []struct {
		in   time.Duration
		want uint32
	}{{0, 0}, {time.Nanosecond, 1}, {time.Second, 1000}, {100 * 24 * time.Hour, math.MaxUint32}} {
		if got := g.Guard(nil, tt.in).ExpiresInMS; got != tt.want {
			t.Errorf("a guard for %v expires in %d ms, want %d", tt.in, got, tt.want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("a guard expiring in -1s does not panic")
		}
	}()
	g.Guard(nil, -time.Second)
}

// A daemon of version 1 has no memcached messages and no guards.
func TestMemcachedNeedsVersion2(t *testing.T) {
	old := &fake{newest: protocol.Version1}
	c := dialTo(t, serve(t, old.handle))
	var pe *Error
	if err := c.SetParser(fakeService, Parser{Kind: ParserMemcached, Domain: fakeService}); !errors.As(err, &pe) || pe.Code != syscall.EPROTO {
		t.Errorf("SetParser on version 1 gives %v", err)
	}
	r := rule.Rule{Condition: rule.Condition{Pattern: []byte("x")}}
	_, err := c.AddGuardedRules(fakeService, []GuardedRule{{Rule: r, Guard: &Guard{Epoch: 1}}})
	if !errors.As(err, &pe) || pe.Code != syscall.EINVAL || !strings.Contains(err.Error(), "a guard needs protocol version 2") {
		t.Errorf("AddGuardedRules on version 1 gives %v", err)
	}
}

// Generations sends one GENERATION per key, several in flight, and gives
// each key its own reply, in order; a refused key is an error, after
// which the connection still answers in step.
func TestGenerations(t *testing.T) {
	var mu sync.Mutex
	var sent []string
	path := serve(t, func(req protocol.Body, _ []int) protocol.Body {
		switch req := req.(type) {
		case *protocol.Hello:
			return &protocol.HelloReply{Version: 2}
		case *protocol.Generation:
			mu.Lock()
			sent = append(sent, string(req.Key))
			mu.Unlock()
			if string(req.Key) == "bad" {
				return protocol.Errorf(syscall.EINVAL, "key: bad")
			}
			return &protocol.GenerationReply{Gen: uint32(len(req.Key)), DomainGen: req.ServiceID, Epoch: 1}
		}
		return protocol.Errorf(syscall.EINVAL, "unexpected %v", req.Type())
	})
	c := dialTo(t, path)
	var keys [][]byte
	for i := range 70 { // three batches
		keys = append(keys, []byte(strings.Repeat("k", i+1)))
	}
	got, err := c.Generations(4, keys)
	if err != nil || len(got) != len(keys) {
		t.Fatalf("Generations gives %d, %v; want %d", len(got), err, len(keys))
	}
	for i, g := range got {
		if g != (Generation{Gen: uint32(i + 1), DomainGen: 4, Epoch: 1}) {
			t.Fatalf("key %d: %+v", i, g)
		}
	}
	if _, err := c.Generations(4, [][]byte{[]byte("a"), []byte("bad"), []byte("ccc")}); err == nil || !strings.Contains(err.Error(), "key: bad") {
		t.Errorf("a refused key gives %v; want the refusal", err)
	}
	if g, err := c.Generation(4, []byte("dd")); err != nil || g.Gen != 2 {
		t.Errorf("after a refusal, Generation gives %+v, %v; want gen 2: the replies out of step", g, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 70+3+1 {
		t.Errorf("%d GENERATION requests; want 74", len(sent))
	}
}

// Fresh travels in version 3 only: a version 2 daemon's reply has no room
// for it.
func TestGenerationFresh(t *testing.T) {
	for _, v := range []uint16{protocol.Version2, protocol.Version3} {
		path := serve(t, func(req protocol.Body, _ []int) protocol.Body {
			switch req.(type) {
			case *protocol.Hello:
				return &protocol.HelloReply{Version: v}
			case *protocol.Generation:
				return &protocol.GenerationReply{Gen: 5, DomainGen: 2, Epoch: 1, Fresh: true}
			}
			return protocol.Errorf(syscall.EINVAL, "unexpected %v", req.Type())
		})
		c := dialTo(t, path)
		g, err := c.Generation(4, []byte("k1"))
		if want := (Generation{Gen: 5, DomainGen: 2, Epoch: 1, Fresh: v >= protocol.Version3}); err != nil || g != want {
			t.Errorf("version %d: Generation gives %+v, %v; want %+v", v, g, err, want)
		}
		gs, err := c.Generations(4, [][]byte{[]byte("k1")})
		if err != nil || len(gs) != 1 || gs[0].Fresh != (v >= protocol.Version3) {
			t.Errorf("version %d: Generations gives %+v, %v", v, gs, err)
		}
	}
}
