// Package mcparse runs the data plane's memcached stream parsers
// (bpf/include/mc_request.h and mc_reply.h) through BPF_PROG_TEST_RUN, one
// segment a run, the parsers' states kept in maps between runs, for the
// tests that hold them to the Go reference (internal/mcproto).
package mcparse

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/santa-offload/santa/internal/mcproto"
)

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3" -target bpfel mcparse ../bpf/mc_parse.bpf.c -- -I../../bpf/include

// MaxSegment is the longest segment one run takes: a test run's frame is
// at most a page, less the kernel's head and tail room, and the direction
// byte.
const MaxSegment = 3000

// The frame's first byte: which parser the segment goes to.
const (
	dirRequest = 0
	dirReply   = 1
)

// Parsers is the loaded program, with one request stream and one reply
// stream (one connection).
type Parsers struct {
	objs mcparseObjects
}

// Load loads the program (root, or CAP_BPF) with both streams at their
// start.
func Load() (*Parsers, error) {
	p := &Parsers{}
	if err := loadMcparseObjects(&p.objs, nil); err != nil {
		return nil, fmt.Errorf("loading mc_parse: %w", err)
	}
	return p, nil
}

// Reset puts both streams back at their start.
func (p *Parsers) Reset() error {
	if err := p.objs.ReqState.Put(uint32(0), make([]byte, p.objs.ReqState.ValueSize())); err != nil {
		return err
	}
	return p.objs.RepState.Put(uint32(0), make([]byte, p.objs.RepState.ValueSize()))
}

// Request parses the next segment of the request stream. lost reports
// whether sync is lost (now or before).
func (p *Parsers) Request(seg []byte) (evs []mcproto.Event, lost bool, err error) {
	return p.run(dirRequest, seg)
}

// Reply parses the next segment of the reply stream.
func (p *Parsers) Reply(seg []byte) (evs []mcproto.Event, lost bool, err error) {
	return p.run(dirReply, seg)
}

// RequestState is the request parser's state, as the map holds it.
func (p *Parsers) RequestState() ([]byte, error) { return lookup(p.objs.ReqState) }

// ReplyState is the reply parser's state.
func (p *Parsers) ReplyState() ([]byte, error) { return lookup(p.objs.RepState) }

func lookup(m *ebpf.Map) ([]byte, error) {
	var b []byte
	if err := m.Lookup(uint32(0), &b); err != nil {
		return nil, err
	}
	return b, nil
}

func (p *Parsers) run(dir byte, seg []byte) ([]mcproto.Event, bool, error) {
	if len(seg) > MaxSegment {
		return nil, false, fmt.Errorf("a segment of %d bytes: at most %d a run", len(seg), MaxSegment)
	}
	if err := p.objs.Out.Put(uint32(0), make([]byte, p.objs.Out.ValueSize())); err != nil {
		return nil, false, err
	}
	// The frame: direction, segment length, segment, padded to the
	// Ethernet header's length a test run takes at least.
	frame := binary.LittleEndian.AppendUint16([]byte{dir}, uint16(len(seg)))
	frame = append(frame, seg...)
	for len(frame) < 14 {
		frame = append(frame, 0)
	}
	ret, err := p.objs.McParse.Run(&ebpf.RunOptions{Data: frame})
	if err != nil {
		return nil, false, err
	}
	if ret > 1 {
		return nil, false, errors.New("mc_parse refused the frame")
	}
	var out []byte
	if err := p.objs.Out.Lookup(uint32(0), &out); err != nil {
		return nil, false, err
	}
	var head struct{ N, Overflow uint32 }
	r := bytes.NewReader(out)
	if err := binary.Read(r, binary.LittleEndian, &head); err != nil {
		return nil, false, err
	}
	if head.Overflow != 0 {
		return nil, false, fmt.Errorf("%d events beyond those a run records", head.Overflow)
	}
	evs := make([]mcproto.Event, head.N)
	if err := binary.Read(r, binary.LittleEndian, evs); err != nil {
		return nil, false, err
	}
	return evs, ret == 1, nil
}

// Close releases the program.
func (p *Parsers) Close() error { return p.objs.Close() }
