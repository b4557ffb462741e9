package daemon

import (
	"bytes"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/protocol"
)

// LEARN and HOT: the service's owner or an admin only (hot requests are
// other clients' requests), and the client that sets learning becomes
// the service's manager.
func TestLearnAndHot(t *testing.T) {
	s := newTestServer(t, nil)
	a := s.connectV2(t, alice)
	if a.version != 2 {
		t.Fatalf("HELLO agreed on version %d, want 2", a.version)
	}
	id := a.attach()
	svc := model.ServiceID(id)

	a.refused(&protocol.Hot{ServiceID: id}, syscall.EINVAL, "learning is off")
	a.ok(&protocol.Learn{ServiceID: id, KeyOff: 2, ProbePort: 5300, Enable: true})
	if got, want := s.dp.learningOf(svc), (model.Learning{KeyOffset: 2, ProbePort: 5300, Enabled: true}); got != want {
		t.Fatalf("the data plane learns %+v, want %+v", got, want)
	}
	a.refused(&protocol.Learn{ServiceID: id, KeyOff: model.MaxLearnOffset + 1, Enable: true}, syscall.EINVAL, "key_off is 1024; the limit is 1023")
	a.refused(&protocol.Learn{ServiceID: 999, Enable: true}, syscall.ENOENT, "no service 999")

	s.dp.setHot(svc, model.HotSet{Window: 1500 * time.Millisecond, Requests: []model.HotRequest{
		{Passes: 30, Key: []byte("www")}, {Passes: 20, Key: []byte("mail")}, {Passes: 1, Key: []byte("ftp")}}})
	got := a.ok(&protocol.Hot{ServiceID: id, Max: 2}).(*protocol.HotReply)
	want := &protocol.HotReply{WindowMS: 1500, Requests: []protocol.HotRequest{{Passes: 30, Key: []byte("www")}, {Passes: 20, Key: []byte("mail")}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("HOT gives %+v, want %+v", got, want)
	}
	if all := a.ok(&protocol.Hot{ServiceID: id}).(*protocol.HotReply); len(all.Requests) != 3 {
		t.Errorf("HOT with max 0 gives %d requests, want all 3", len(all.Requests))
	}

	// Another uid may neither read nor change it; an admin may.
	b := s.connectV2(t, bob)
	b.refused(&protocol.Hot{ServiceID: id}, syscall.EPERM, "belongs to uid 1000")
	b.refused(&protocol.Learn{ServiceID: id}, syscall.EPERM, "belongs to uid 1000")
	if !s.dp.learningOf(svc).Enabled {
		t.Fatal("bob's LEARN turned alice's learning off")
	}
	s.connectV2(t, admin).ok(&protocol.Hot{ServiceID: id})

	// The manager is reported in version 2.
	list := a.ok(&protocol.ListServices{}).(*protocol.ListServicesReply)
	if len(list.Services) != 1 || list.Services[0].Manager != "agent" {
		t.Fatalf("LIST_SERVICES gives %+v, want the manager \"agent\"", list.Services)
	}
	a.ok(&protocol.Learn{ServiceID: id})
	if s.dp.learningOf(svc).Enabled {
		t.Fatal("LEARN without the enable flag left learning on")
	}
}

// A version 1 connection has no LEARN: it is refused as an unknown type
// is, with a message that names the version.
func TestLearnNeedsVersion2(t *testing.T) {
	s := newTestServer(t, nil)
	c := s.connectV1(t, alice)
	id := c.attach()
	msg, err := protocol.Encode(protocol.Version2, 9, &protocol.Learn{ServiceID: id, Enable: true})
	if err != nil {
		t.Fatal(err)
	}
	msg[4] = protocol.Version1 // the header's version: LEARN in version 1
	c.send(msg)
	e, ok := c.recv().(*protocol.Error)
	if !ok || e.Code != syscall.EPROTO || e.Message != "LEARN is a message of protocol version 2; this message is in version 1" {
		t.Fatalf("LEARN on a version 1 connection: %v", e)
	}
	c.closed()
	// Its services carry no manager in version 1.
	list := s.connectV1(t, alice).ok(&protocol.ListServices{}).(*protocol.ListServicesReply)
	if len(list.Services) != 1 || list.Services[0].Manager != "" {
		t.Fatalf("version 1 LIST_SERVICES gives %+v", list.Services)
	}
}

// In version 5 HOT reads a set in pages: from an index on, each reply
// telling the window's number and the whole set's size; a set larger
// than one reply needs more than one.
func TestHotPages(t *testing.T) {
	s := newTestServer(t, nil)
	a := s.connect(t, alice, true)
	id := a.attach()
	a.ok(&protocol.Learn{ServiceID: id, KeyOff: 2, Enable: true})
	s.dp.setHot(model.ServiceID(id), model.HotSet{Window: time.Second, Number: 7, Requests: []model.HotRequest{
		{Passes: 30, Key: []byte("www")}, {Passes: 20, Key: []byte("mail")}, {Passes: 1, Key: []byte("ftp")}}})
	got := a.ok(&protocol.Hot{ServiceID: id, Max: 5, From: 1}).(*protocol.HotReply)
	want := &protocol.HotReply{WindowMS: 1000, Window: 7, Total: 3, Requests: []protocol.HotRequest{{Passes: 20, Key: []byte("mail")}, {Passes: 1, Key: []byte("ftp")}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("HOT from 1 gives %+v, want %+v", got, want)
	}
	if past := a.ok(&protocol.Hot{ServiceID: id, Max: 5, From: 9}).(*protocol.HotReply); len(past.Requests) != 0 || past.Total != 3 {
		t.Errorf("HOT past the end gives %+v", past)
	}

	// 1000 keys of 200 bytes: more than one reply holds.
	big := make([]model.HotRequest, 1000)
	for i := range big {
		big[i] = model.HotRequest{Passes: uint32(1000 - i), Key: bytes.Repeat([]byte{byte(i)}, 200)}
	}
	s.dp.setHot(model.ServiceID(id), model.HotSet{Window: time.Second, Number: 8, Requests: big})
	first := a.ok(&protocol.Hot{ServiceID: id, Max: 1000}).(*protocol.HotReply)
	n := len(first.Requests)
	if n == 0 || n >= 1000 || first.Total != 1000 {
		t.Fatalf("the first page holds %d of %d", n, first.Total)
	}
	rest := a.ok(&protocol.Hot{ServiceID: id, Max: uint32(1000 - n), From: uint32(n)}).(*protocol.HotReply)
	if len(rest.Requests) == 0 || rest.Requests[0].Passes != big[n].Passes {
		t.Fatalf("the second page starts with %+v, want passes %d", rest.Requests[:min(1, len(rest.Requests))], big[n].Passes)
	}
}

// A client of version 2 to 4 gets as many forms in a reply as before
// version 5: its replies carry neither window nor total.
func TestHotOlderClientsAsBefore(t *testing.T) {
	s := newTestServer(t, nil)
	c := s.connectV2(t, alice)
	id := c.attach()
	c.ok(&protocol.Learn{ServiceID: id, KeyOff: 2, Enable: true})
	const n = (protocol.MaxMessage - protocol.HeaderLen - 8) / 8 // 2-byte keys
	set := make([]model.HotRequest, n+5)
	for i := range set {
		set[i] = model.HotRequest{Passes: 1, Key: []byte{byte(i), byte(i >> 8)}}
	}
	s.dp.setHot(model.ServiceID(id), model.HotSet{Window: time.Second, Number: 1, Requests: set})
	if r := c.ok(&protocol.Hot{ServiceID: id}).(*protocol.HotReply); len(r.Requests) != n {
		t.Errorf("a version 2 HOT gives %d forms; %d fit", len(r.Requests), n)
	}
}

// Version 6's LEARN tells the counts the service asks for, up to the
// data plane's most; its HOT reply tells the share of passes counted.
func TestLearnCounts(t *testing.T) {
	s := newTestServer(t, nil)
	a := s.connect(t, alice, true)
	id := a.attach()
	svc := model.ServiceID(id)
	a.ok(&protocol.Learn{ServiceID: id, KeyOff: 2, Enable: true, Counts: 12500})
	if got, want := s.dp.learningOf(svc), (model.Learning{KeyOffset: 2, Enabled: true, Counts: 12500}); got != want {
		t.Fatalf("the data plane learns %+v, want %+v", got, want)
	}
	a.refused(&protocol.Learn{ServiceID: id, KeyOff: 2, Enable: true, Counts: model.MaxLearnCounts + 1}, syscall.EINVAL,
		"counts is 100001; the limit is 100000 (0: the limit)")
	if got := s.dp.learningOf(svc).Counts; got != 12500 {
		t.Fatalf("a refused LEARN changed the counts to %d", got)
	}
	s.dp.setHot(svc, model.HotSet{Window: time.Second, Number: 3, CountedPPM: 125000,
		Requests: []model.HotRequest{{Passes: 8, Key: []byte("www")}}})
	if r := a.ok(&protocol.Hot{ServiceID: id}).(*protocol.HotReply); r.CountedPPM != 125000 || len(r.Requests) != 1 {
		t.Fatalf("HOT gives %+v; want counted_ppm 125000 and one form", r)
	}
}
