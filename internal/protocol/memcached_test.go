package protocol

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/santa-offload/santa/rule"
)

// Version 1 has none of the memcached messages, and no guard.
func TestVersion1HasNoMemcached(t *testing.T) {
	for _, b := range []Body{&Parser{}, &Generation{}, &GenerationReply{}, &MemcachedStats{}, &MemcachedStatsReply{}} {
		_, err := Encode(Version1, 1, b)
		var pe *Error
		if !errors.As(err, &pe) || pe.Code != syscall.EPROTO || !strings.Contains(pe.Message, "protocol version 2") {
			t.Errorf("encoding %v in version 1: %v; want EPROTO naming version 2", b.Type(), err)
		}
	}
	guarded := []Body{
		&AddRules{ServiceID: 1, Rules: []rule.Rule{helloRule}, Guards: []*Guard{&mcGuard}},
		&ReplaceRules{ServiceID: 1, Updates: []RuleEntry{{RuleID: 1, Rule: helloRule, Guard: &mcGuard}}},
		&ListRulesReply{Rules: []RuleEntry{{RuleID: 1, Rule: helloRule, Guard: &mcGuard}}},
	}
	for _, b := range guarded {
		_, err := Encode(Version1, 1, b)
		var pe *Error
		if !errors.As(err, &pe) || pe.Code != syscall.EINVAL || !strings.Contains(pe.Message, "a guard needs protocol version 2") {
			t.Errorf("%v with a guard in version 1: %v; want EINVAL", b.Type(), err)
		}
	}
}

// Guards travel with their rules, in order; a rule without one has nil.
func TestGuardsFollowTheirRules(t *testing.T) {
	add := &AddRules{ServiceID: 1, Rules: []rule.Rule{helloRule, mcGetRule, echoRule}, Guards: []*Guard{nil, &mcGuard, nil}}
	_, body, err := Decode(mustEncode(Version2, 1, add))
	if err != nil {
		t.Fatal(err)
	}
	got := body.(*AddRules)
	if len(got.Guards) != 3 || got.Guards[0] != nil || got.Guards[2] != nil || string(got.Guards[1].Key) != "k1" || got.Guards[1].Gen != 5 {
		t.Errorf("decoded guards %+v", got.Guards)
	}
	// Guards all nil decode as none.
	_, body, err = Decode(mustEncode(Version2, 1, &AddRules{ServiceID: 1, Rules: []rule.Rule{helloRule}, Guards: []*Guard{nil}}))
	if err != nil || body.(*AddRules).Guards != nil {
		t.Errorf("a batch of unguarded rules decodes guards %v (%v), want nil", body.(*AddRules).Guards, err)
	}
}

func TestGuardRefusals(t *testing.T) {
	var pe *Error
	_, err := Encode(Version2, 1, &AddRules{ServiceID: 1, Rules: []rule.Rule{helloRule, echoRule}, Guards: []*Guard{&mcGuard}})
	if !errors.As(err, &pe) || pe.Code != syscall.EINVAL || !strings.Contains(pe.Message, "1 guards for 2 rules") {
		t.Errorf("one guard for two rules: %v", err)
	}
	_, err = Encode(Version2, 1, &AddRules{ServiceID: 1, Rules: []rule.Rule{helloRule}, Guards: []*Guard{{Key: []byte("k")}}})
	if !errors.As(err, &pe) || pe.Code != syscall.EINVAL || pe.Index != 0 || !strings.Contains(pe.Message, "rules[0].guard.epoch: is 0") {
		t.Errorf("a guard of epoch 0: %v", err)
	}
	gen := messageIn(Version2, TypeGeneration.Reply(), u32(1), u32(2), u32(3), []byte{2})
	if _, _, err := Decode(gen); !errors.As(err, &pe) || pe.Code != syscall.EINVAL {
		t.Errorf("GENERATION reply with in_flight 2: %v", err)
	}
}

// Version 3's GENERATION reply ends with the fresh flag; version 2's has
// none, and says nothing of it.
func TestGenerationReplyFresh(t *testing.T) {
	r := &GenerationReply{Gen: 5, DomainGen: 2, Epoch: 1, Fresh: true}
	v3 := mustEncode(Version3, 7, r)
	if got, want := v3[HeaderLen:], mustHex("05000000"+"02000000"+"01000000"+"00"+"01"); !bytes.Equal(got, want) {
		t.Fatalf("version 3 body %x, want %x", got, want)
	}
	if _, body, err := Decode(v3); err != nil || !reflect.DeepEqual(body, r) {
		t.Fatalf("version 3 decodes to %+v (%v), want %+v", body, err, r)
	}
	v2 := mustEncode(Version2, 7, r)
	if len(v2) != len(v3)-1 {
		t.Fatalf("version 2 body of %d bytes, want %d", len(v2)-HeaderLen, len(v3)-HeaderLen-1)
	}
	if _, body, err := Decode(v2); err != nil || body.(*GenerationReply).Fresh {
		t.Fatalf("version 2 decodes to %+v (%v): fresh must not travel", body, err)
	}
}

// Version 3's MEMCACHED_STATS reply ends with six more counters, version
// 4's with one more; version 2's stops before them.
func TestMemcachedStatsVersion3(t *testing.T) {
	r := &MemcachedStatsReply{Domain: 2, Writes: 1, UDPHeld: 11, UDPTimedOut: 12, UDPDomain: 13, DelayedFlush: 14,
		Refreshed: 15, FreshTorn: 16, Filled: 17}
	v4 := mustEncode(Version4, 7, r)
	if _, body, err := Decode(v4); err != nil || !reflect.DeepEqual(body, r) {
		t.Fatalf("version 4 decodes to %+v (%v), want %+v", body, err, r)
	}
	v3 := mustEncode(Version3, 7, r)
	if _, body, err := Decode(v3); err != nil || len(v3) != len(v4)-8 || body.(*MemcachedStatsReply).Filled != 0 {
		t.Fatalf("version 3 decodes to %+v (%v): filled must not travel", body, err)
	}
	v2 := mustEncode(Version2, 7, r)
	if len(v2) != len(v3)-6*8 {
		t.Fatalf("version 2 body of %d bytes, version 3's %d", len(v2)-HeaderLen, len(v3)-HeaderLen)
	}
	if _, body, err := Decode(v2); err != nil || body.(*MemcachedStatsReply).Refreshed != 0 {
		t.Fatalf("version 2 decodes to %+v (%v): the new counters must not travel", body, err)
	}
}
