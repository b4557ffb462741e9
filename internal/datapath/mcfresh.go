package datapath

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/rule"
)

// mcFrameReply is memcached's frame header of a one-datagram reply past
// its request id: sequence 0, 1 datagram, reserved 0. Its native-word sum
// is the data plane's SANTA_MC_FRAME_SUM.
var mcFrameReply = []byte{0, 0, 0, 1, 0, 0}

// freshShape reports whether a guarded rule of key may answer with the
// value of a set of its key (SANTA_GUARD_FRESH; docs/memcached.md,
// "Answering after a set"): it matches exactly memcached's UDP request
// "get <key>\r\n" (one key, no cas) and answers it as memcached does, its
// template the frame header, its copies in the frame header (the request
// id), and "VALUE <key> <flags> <bytes>\r\n<data>\r\nEND\r\n" with both
// numbers in plain decimal, as memcached prints them: the data plane then
// writes a set's reply text in place of everything after the frame
// header.
func freshShape(r rule.Rule, c rule.Compiled, key []byte) bool {
	if key == nil || !readOnlyDatagram(r.Condition) {
		return false
	}
	get := append(append([]byte("get "), key...), "\r\n"...)
	if !bytes.Equal(r.Condition.Pattern[mcFrameHeader-2:], get) {
		return false
	}
	t := c.Template
	if len(t) < mcFrameHeader || !bytes.Equal(t[2:mcFrameHeader], mcFrameReply) {
		return false
	}
	for _, p := range c.Copies {
		if int(p.Dst)+int(p.Len) > mcFrameHeader {
			return false
		}
	}
	text, ok := bytes.CutPrefix(t[mcFrameHeader:], valueLine(key))
	if !ok {
		return false
	}
	line, rest, ok := bytes.Cut(text, []byte("\r\n"))
	if !ok {
		return false
	}
	flags, size, ok := bytes.Cut(line, []byte(" "))
	if !ok || !plainDecimal(flags) || !plainDecimal(size) {
		return false
	}
	n, err := strconv.Atoi(string(size))
	return err == nil && len(rest) == n+len("\r\nEND\r\n") && bytes.HasSuffix(rest, []byte("\r\nEND\r\n"))
}

// plainDecimal reports whether b is a number as memcached prints one: digits,
// no leading zero but for 0 itself, at most 10 (a 32-bit value).
func plainDecimal(b []byte) bool {
	if len(b) == 0 || len(b) > 10 || (b[0] == '0' && len(b) > 1) {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// fresh reports whether the data plane answers key (of domain, in slot at)
// with the value a set stored (mc_fresh.h), at the slot's generation gen:
// what santa_mc_fresh_usable checks of a record, read once here. A record
// being written reads as not fresh.
func (d *Datapath) fresh(key []byte, domain model.ServiceID, at, gen uint32) (bool, error) {
	var rec santaSantaMcFresh
	if err := d.objs.McFresh.Lookup(at&(uint32(santaSantaMcLayoutSANTA_MC_FRESH)-1), &rec); err != nil {
		return false, fmt.Errorf("reading a set's value: %w", err)
	}
	if rec.Seq&1 != 0 || rec.Ready == 0 || rec.Slot != at || rec.Domain != uint32(domain) || rec.Gen != gen {
		return false, nil
	}
	if rec.Deadline != 0 && monotonicNow() >= rec.Deadline {
		return false, nil
	}
	text := rec.Text[:min(int(rec.Len), len(rec.Text))]
	return bytes.HasPrefix(text, valueLine(key)), nil
}

// valueLine is how memcached's line of key's value starts: "VALUE <key> ".
func valueLine(key []byte) []byte { return append(append([]byte("VALUE "), key...), ' ') }
