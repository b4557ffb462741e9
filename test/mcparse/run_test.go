package mcparse_test

import (
	"bytes"
	"slices"
	"testing"

	"github.com/santa-offload/santa/internal/mcproto"
	"github.com/santa-offload/santa/test/mcparse"
)

// A stream's run: its events, offsets counted from the stream's start,
// and the states after it.
type run struct {
	events        []mcproto.Event
	req, rep      []byte
	lost, repLost bool
}

// segments cuts stream at cuts (increasing offsets), and cuts pieces
// longer than a test run takes.
func segments(stream []byte, cuts []int) [][]byte {
	var segs [][]byte
	prev := 0
	for _, c := range append(slices.Clone(cuts), len(stream)) {
		for c-prev > mcparse.MaxSegment {
			segs = append(segs, stream[prev:prev+mcparse.MaxSegment])
			prev += mcparse.MaxSegment
		}
		if c > prev {
			segs = append(segs, stream[prev:c])
			prev = c
		}
	}
	return segs
}

func absolute(evs []mcproto.Event, base int) []mcproto.Event {
	for i := range evs {
		evs[i].Off += uint32(base)
	}
	return evs
}

// goRun parses requests, then replies, with the Go reference.
func goRun(t testing.TB, requests, replies []byte, reqCuts, repCuts []int) run {
	t.Helper()
	var req mcproto.RequestState
	var rep mcproto.ReplyState
	var r run
	base := 0
	for _, s := range segments(requests, reqCuts) {
		r.events = append(r.events, absolute(req.Parse(s), base)...)
		base += len(s)
	}
	base = 0
	for _, s := range segments(replies, repCuts) {
		r.events = append(r.events, absolute(rep.Parse(s, req.MnMark), base)...)
		base += len(s)
	}
	r.req, _ = req.MarshalBinary()
	r.rep, _ = rep.MarshalBinary()
	r.lost, r.repLost = req.Lost(), rep.Lost()
	return r
}

// bpfRun parses the same with the data plane's parsers.
func bpfRun(t testing.TB, p *mcparse.Parsers, requests, replies []byte, reqCuts, repCuts []int) run {
	t.Helper()
	if err := p.Reset(); err != nil {
		t.Fatal(err)
	}
	var r run
	for dir, stream := range [][]byte{requests, replies} {
		base := 0
		for _, s := range segments(stream, [][]int{reqCuts, repCuts}[dir]) {
			parse := p.Request
			if dir == 1 {
				parse = p.Reply
			}
			evs, lost, err := parse(s)
			if err != nil {
				t.Fatal(err)
			}
			r.events = append(r.events, absolute(evs, base)...)
			base += len(s)
			if dir == 0 {
				r.lost = lost
			} else {
				r.repLost = lost
			}
		}
	}
	var err error
	if r.req, err = p.RequestState(); err != nil {
		t.Fatal(err)
	}
	if r.rep, err = p.ReplyState(); err != nil {
		t.Fatal(err)
	}
	return r
}

// same fails unless two runs reported the same events and reached the
// same states.
func same(t testing.TB, what string, got, want run) {
	t.Helper()
	if !slices.Equal(got.events, want.events) {
		t.Fatalf("%s: events\n%v\nwant\n%v", what, got.events, want.events)
	}
	if !bytes.Equal(got.req, want.req) || !bytes.Equal(got.rep, want.rep) {
		t.Fatalf("%s: states\nrequest %x\nreply   %x\nwant\nrequest %x\nreply   %x", what, got.req, got.rep, want.req, want.rep)
	}
	if got.lost != want.lost || got.repLost != want.repLost {
		t.Fatalf("%s: lost %v/%v, want %v/%v", what, got.lost, got.repLost, want.lost, want.repLost)
	}
}

func load(t testing.TB) *mcparse.Parsers {
	t.Helper()
	p, err := mcparse.Load()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}
