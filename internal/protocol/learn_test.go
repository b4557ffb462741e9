package protocol

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// Version 2's learning and memcached messages, a service's manager and the
// reasons its requests were answered in TC. (The C and Python SDKs speak
// none of LEARN, HOT, PARSER, GENERATION and MEMCACHED_STATS: vectors.json
// holds the manager and guarded rules only.)
var v2Messages = []struct {
	name string
	body Body
	hex  string // the body
}{
	{"learn on", &Learn{ServiceID: 3, KeyOff: 2, ProbePort: 5353, Enable: true}, "03000000" + "0200" + "e914" + "01"},
	{"learn off", &Learn{ServiceID: 3}, "03000000" + "0000" + "0000" + "00"},
	{"learn reply", &LearnReply{}, ""},
	{"hot", &Hot{ServiceID: 3, Max: 100}, "03000000" + "64000000"},
	{"hot reply", &HotReply{WindowMS: 1000, Requests: []HotRequest{{Passes: 9, Key: []byte("ab")}, {Passes: 1, Key: []byte{}}}},
		"e8030000" + "02000000" + "09000000" + "0200" + "6162" + "01000000" + "0000"},
	{"parser memcached", &Parser{ServiceID: 3, Kind: ParserMemcached, Domain: 2}, "03000000" + "01" + "02000000"},
	{"parser none", &Parser{ServiceID: 3}, "03000000" + "00" + "00000000"},
	{"parser reply", &ParserReply{}, ""},
	{"generation", &Generation{ServiceID: 3, Key: []byte("k1")}, "03000000" + "0200" + "6b31"},
	{"generation reply", &GenerationReply{Gen: 5, DomainGen: 2, Epoch: 1, InFlight: true}, "05000000" + "02000000" + "01000000" + "01"},
	{"memcached stats", &MemcachedStats{ServiceID: 3}, "03000000"},
	{"path stats", &PathStats{}, ""},
	{"path stats reply", &PathStatsReply{Paths: []PathCount{{Name: "answered", Count: 5}, {Name: "tcp_fin", Count: 256}}},
		"0200" + "0800" + "616e737765726564" + "0500000000000000" + "0700" + "7463705f66696e" + "0001000000000000"},
	{"memcached stats reply", &MemcachedStatsReply{Domain: 2, Writes: 1, KeyBumps: 2, DomainBumps: 3, Completed: 4, Released: 5,
		Overflow: 6, Lost: 7, GuardStale: 8, GuardInFlight: 9, GuardExpired: 10},
		"02000000" + "0100000000000000" + "0200000000000000" + "0300000000000000" + "0400000000000000" + "0500000000000000" +
			"0600000000000000" + "0700000000000000" + "0800000000000000" + "0900000000000000" + "0a00000000000000"},
	{"a domain guard", &ReplaceRules{ServiceID: 3, Updates: []RuleEntry{{RuleID: 1, Rule: helloRule, Guard: &Guard{Epoch: 4}}}},
		"03000000" + "00000000" + "01000000" + "01000000" + "0000" + "0500" + "48656c6c6f" + "0600" + "01" + "02" +
			"0000" + "00000000" + "00000000" + "04000000" + "00000000" + "0100" + "0000" + "0600" + "434f4d535953"},
	{"service with its manager", &ServiceInfo{ServiceID: 4, Protocol: 17, Family: 4, Port: 53, Addr: [16]byte{10, 0, 0, 1},
		Cookie: 7, NetnsCookie: 8, OwnerUID: 0, Rules: 1, Manager: "santa-offload"},
		"04000000" + "11" + "04" + "3500" + "0a000001000000000000000000000000" + "0700000000000000" + "0800000000000000" +
			"00000000" + "01000000" + "0d00" + "73616e74612d6f66666c6f6164"},
	{"services with managers", &ListServicesReply{Services: []ServiceInfo{{ServiceID: 1, Manager: "a"}, {ServiceID: 2}}},
		"02000000" + "01000000" + strings.Repeat("00", 44) + "0100" + "61" + "02000000" + strings.Repeat("00", 44) + "0000"},
	{"service stats with the TC reasons", &ServiceStatsReply{Matched: 10, Passed: 1, Fallback: 6, Rules: 2, RuleBytes: 9,
		TCChecksum: 3, TCTooLong: 2, TCNoXDP: 1},
		"0a00000000000000" + "0100000000000000" + "0600000000000000" + "0000000000000000" + "02000000" + "0900000000000000" +
			"0300000000000000" + "0200000000000000" + "0100000000000000"},
}

func TestVersion2Messages(t *testing.T) {
	for _, m := range v2Messages {
		t.Run(m.name, func(t *testing.T) {
			msg, err := Encode(Version2, 7, m.body)
			if err != nil {
				t.Fatal(err)
			}
			if got := msg[HeaderLen:]; !bytes.Equal(got, mustHex(m.hex)) {
				t.Fatalf("body\n got %x\nwant %s", got, m.hex)
			}
			h, body, err := Decode(msg)
			if err != nil {
				t.Fatal(err)
			}
			if h.Seq != 7 || !reflect.DeepEqual(body, m.body) {
				t.Fatalf("decoded %+v, want %+v", body, m.body)
			}
		})
	}
}

// A version 1 connection has neither LEARN nor HOT, and a service without
// its manager.
func TestVersion1HasNoLearning(t *testing.T) {
	for _, b := range []Body{&Learn{}, &Hot{}, &HotReply{}} {
		_, err := Encode(Version1, 1, b)
		var pe *Error
		if !errors.As(err, &pe) || pe.Code != syscall.EPROTO || !strings.Contains(pe.Message, "protocol version 2") {
			t.Errorf("encoding %v in version 1: %v; want EPROTO naming version 2", b.Type(), err)
		}
		msg, _ := Encode(Version2, 1, b)
		msg[4] = Version1 // the header's version
		if _, _, err := Decode(msg); !errors.As(err, &pe) || pe.Code != syscall.EPROTO {
			t.Errorf("decoding %v in version 1: %v; want EPROTO", b.Type(), err)
		}
	}
	si := &ServiceInfo{ServiceID: 1, Manager: "agent"}
	v1, _ := Encode(Version1, 1, si)
	if len(v1) != HeaderLen+MinServiceInfoSize {
		t.Errorf("a version 1 service is %d bytes, want %d", len(v1)-HeaderLen, MinServiceInfoSize)
	}
	v2, _ := Encode(Version2, 1, si)
	if len(v2) != len(v1)+2+len("agent") {
		t.Errorf("a version 2 service is %d bytes, want %d", len(v2), len(v1)+2+len("agent"))
	}
}

func TestLearnRefusals(t *testing.T) {
	learn := messageIn(Version2, TypeLearn, u32(1), u16(2), u16(0), []byte{2})
	_, _, err := Decode(learn)
	var pe *Error
	if !errors.As(err, &pe) || pe.Code != syscall.EINVAL || pe.Message != "flags: is 2; it must be 0 or 1" {
		t.Errorf("LEARN with flags 2: %v", err)
	}
	hot := messageIn(Version2, TypeHot.Reply(), u32(1000), u32(3), u32(1), b16("a"))
	if _, _, err := Decode(hot); !errors.As(err, &pe) || pe.Code != syscall.EBADMSG {
		t.Errorf("HOT reply with a count beyond the body: %v", err)
	}
	if _, err := Encode(Version2, 1, &ServiceInfo{Manager: strings.Repeat("m", MaxClientName+1)}); err == nil {
		t.Errorf("a manager over %d bytes encodes", MaxClientName)
	}
}

// Version 1's service stats reply ends at rule_bytes: the TC reasons are
// version 2's (its fallback is their sum).
func TestServiceStatsReasonsAreVersion2(t *testing.T) {
	st := &ServiceStatsReply{Fallback: 6, TCChecksum: 3, TCTooLong: 2, TCNoXDP: 1}
	v1, err := Encode(Version1, 1, st)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(v1) - HeaderLen; got != 44 {
		t.Errorf("a version 1 service stats reply is %d bytes, want 44", got)
	}
	_, body, err := Decode(v1)
	if err != nil {
		t.Fatal(err)
	}
	if want := (&ServiceStatsReply{Fallback: 6}); !reflect.DeepEqual(body, want) {
		t.Errorf("version 1 decodes %+v, want %+v", body, want)
	}
}

// Version 5's HOT request ends with from, its reply tells the window and
// the set's size before the count; version 2's has none of them.
func TestHotVersion5(t *testing.T) {
	req := &Hot{ServiceID: 3, Max: 100, From: 5}
	v5 := mustEncode(Version5, 7, req)
	if got, want := v5[HeaderLen:], mustHex("03000000"+"64000000"+"05000000"); !bytes.Equal(got, want) {
		t.Fatalf("version 5 request %x, want %x", got, want)
	}
	if _, body, err := Decode(v5); err != nil || !reflect.DeepEqual(body, req) {
		t.Fatalf("version 5 request decodes to %+v (%v)", body, err)
	}
	reply := &HotReply{WindowMS: 1000, Window: 9, Total: 40, Requests: []HotRequest{{Passes: 9, Key: []byte("ab")}}}
	v5 = mustEncode(Version5, 7, reply)
	if got, want := v5[HeaderLen:], mustHex("e8030000"+"09000000"+"28000000"+"01000000"+"09000000"+"0200"+"6162"); !bytes.Equal(got, want) {
		t.Fatalf("version 5 reply %x, want %x", got, want)
	}
	if _, body, err := Decode(v5); err != nil || !reflect.DeepEqual(body, reply) {
		t.Fatalf("version 5 reply decodes to %+v (%v)", body, err)
	}
	if want := HotOverhead(Version5) + len("ab") + minHotRequestSize; len(v5) != want {
		t.Errorf("a version 5 reply of one 2-byte key is %d bytes; HotOverhead says %d", len(v5), want)
	}
	if v4, want := mustEncode(Version4, 7, reply), HotOverhead(Version4)+len("ab")+minHotRequestSize; len(v4) != want {
		t.Errorf("a version 4 reply of one 2-byte key is %d bytes; HotOverhead says %d", len(v4), want)
	}
	for _, b := range []Body{req, reply} {
		v4 := mustEncode(Version4, 7, b)
		_, body, err := Decode(v4)
		switch body := body.(type) {
		case *Hot:
			if err != nil || body.From != 0 || len(v4) != HeaderLen+8 {
				t.Errorf("version 4 request %x decodes to %+v (%v): from must not travel", v4, body, err)
			}
		case *HotReply:
			if err != nil || body.Window != 0 || body.Total != 0 || len(body.Requests) != 1 {
				t.Errorf("version 4 reply decodes to %+v (%v): window and total must not travel", body, err)
			}
		}
	}
}

// Version 6's LEARN ends with counts, its HOT reply tells counted_ppm
// before the count; version 5's have neither.
func TestLearnVersion6(t *testing.T) {
	learn := &Learn{ServiceID: 3, KeyOff: 2, ProbePort: 5353, Enable: true, Counts: 12500}
	v6 := mustEncode(Version6, 7, learn)
	if got, want := v6[HeaderLen:], mustHex("03000000"+"0200"+"e914"+"01"+"d4300000"); !bytes.Equal(got, want) {
		t.Fatalf("version 6 LEARN %x, want %x", got, want)
	}
	if _, body, err := Decode(v6); err != nil || !reflect.DeepEqual(body, learn) {
		t.Fatalf("version 6 LEARN decodes to %+v (%v)", body, err)
	}
	reply := &HotReply{WindowMS: 1000, Window: 9, Total: 40, CountedPPM: 125000, Requests: []HotRequest{{Passes: 9, Key: []byte("ab")}}}
	v6 = mustEncode(Version6, 7, reply)
	if got, want := v6[HeaderLen:], mustHex("e8030000"+"09000000"+"28000000"+"48e80100"+"01000000"+"09000000"+"0200"+"6162"); !bytes.Equal(got, want) {
		t.Fatalf("version 6 HOT reply %x, want %x", got, want)
	}
	if _, body, err := Decode(v6); err != nil || !reflect.DeepEqual(body, reply) {
		t.Fatalf("version 6 HOT reply decodes to %+v (%v)", body, err)
	}
	if want := HotOverhead(Version6) + len("ab") + minHotRequestSize; len(v6) != want {
		t.Errorf("a version 6 reply of one 2-byte key is %d bytes; HotOverhead says %d", len(v6), want)
	}
	var pe *Error
	if _, err := Encode(Version5, 7, learn); !errors.As(err, &pe) || pe.Code != syscall.EINVAL ||
		pe.Message != "counts: counts needs protocol version 6; this connection speaks version 5" {
		t.Errorf("version 5 LEARN with counts encodes: %v; want EINVAL", err)
	}
	learn.Counts = 0
	if _, body, err := Decode(mustEncode(Version5, 7, learn)); err != nil || !reflect.DeepEqual(body, learn) {
		t.Errorf("version 5 LEARN decodes to %+v (%v)", body, err)
	}
	if _, body, err := Decode(mustEncode(Version5, 7, reply)); err != nil || body.(*HotReply).CountedPPM != 0 {
		t.Errorf("version 5 HOT reply decodes to %+v (%v): counted_ppm must not travel", body, err)
	}
}
