package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/rule"
)

// The payload encoding of records (docs/operations.md, "The journal").
// Integers are little-endian; byte strings are a u16 length and the bytes.
// A rule of version 2 has a flags byte after its processor count; bit 0:
// its length condition, min and max u16, follows.

var le = binary.LittleEndian

// Record kinds: the first byte of a payload.
const (
	kindAttach = 1 // a service and its owner
	kindRemove = 2 // a service ended: detached or its socket closed
	kindBatch  = 3 // a committed batch of rule changes
)

// encoder appends fields to a payload.
type encoder struct{ b []byte }

func (e *encoder) u8(v uint8)   { e.b = append(e.b, v) }
func (e *encoder) u16(v uint16) { e.b = le.AppendUint16(e.b, v) }
func (e *encoder) u32(v uint32) { e.b = le.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64) { e.b = le.AppendUint64(e.b, v) }

func (e *encoder) bytes16(p []byte) {
	e.u16(uint16(len(p)))
	e.b = append(e.b, p...)
}

func (e *encoder) attach(s *Service) {
	e.u8(kindAttach)
	e.u32(uint32(s.ID))
	e.u32(s.UID)
	e.u32(s.GID)
	e.u64(s.Info.Cookie)
	e.u64(s.Info.NetnsCookie)
	e.u8(uint8(s.Info.Protocol))
	addr := s.Info.Local.Addr().As16()
	e.b = append(e.b, addr[:]...)
	e.u8(boolByte(s.Info.Local.Addr().Is4()))
	e.u16(s.Info.Local.Port())
}

func (e *encoder) remove(id model.ServiceID) {
	e.u8(kindRemove)
	e.u32(uint32(id))
}

func (e *encoder) batch(id model.ServiceID, b model.Batch) {
	e.u8(kindBatch)
	e.u32(uint32(id))
	e.u32(uint32(len(b.Add)))
	for i, r := range b.Add {
		e.u32(uint32(b.AddIDs[i]))
		e.rule(r)
	}
	e.u32(uint32(len(b.Replace)))
	for _, u := range b.Replace {
		e.u32(uint32(u.ID))
		e.rule(u.Rule)
	}
	e.u32(uint32(len(b.Delete)))
	for _, id := range b.Delete {
		e.u32(uint32(id))
	}
}

// ruleFlagLength is bit 0 of a rule's flags: its length condition follows.
const ruleFlagLength = 1

func (e *encoder) rule(r rule.Rule) {
	e.u16(r.Condition.Offset)
	e.bytes16(r.Condition.Pattern)
	e.u16(r.ReplyLen)
	e.u8(uint8(len(r.Processors)))
	if r.Condition.HasLength() {
		e.u8(ruleFlagLength)
		e.u16(r.Condition.MinLen)
		e.u16(r.Condition.MaxLen)
	} else {
		e.u8(0)
	}
	for _, p := range r.Processors {
		e.u8(uint8(p.Kind))
		switch p.Kind {
		case rule.ProcessorPut:
			e.u16(p.DstOffset)
			e.bytes16(p.Bytes)
		default:
			e.u16(p.SrcOffset)
			e.u16(p.Length)
			e.u16(p.DstOffset)
		}
	}
}

// RuleSize is the bytes a rule and its id take in a batch record, so that
// the daemon can tell how large a snapshot of its state would be.
func RuleSize(r rule.Rule) int64 {
	n := 4 + 2 + 2 + len(r.Condition.Pattern) + 2 + 1 + 1
	if r.Condition.HasLength() {
		n += 4
	}
	for _, p := range r.Processors {
		n++
		if p.Kind == rule.ProcessorPut {
			n += 2 + 2 + len(p.Bytes)
		} else {
			n += 6
		}
	}
	return int64(n)
}

// batchLen is the length of b's batch record payload.
func batchLen(b model.Batch) int64 {
	n := int64(1 + 4 + 3*4 + 4*len(b.Delete))
	for _, r := range b.Add {
		n += RuleSize(r)
	}
	for _, u := range b.Replace {
		n += RuleSize(u.Rule)
	}
	return n
}

// ServiceSize is what a service takes in a snapshot besides its rules: its
// attach record and the frame of its batch record (of each, for rules of
// more than snapshotBatch bytes: a few bytes in 64 MiB not counted).
const ServiceSize = frameLen + attachLen + frameLen + 1 + 4 + 3*4

const attachLen = 1 + 3*4 + 2*8 + 1 + 16 + 1 + 2

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// errShort is a payload that ends inside a field: at the end of the file,
// what a write cut short leaves; in a record whose CRC matched, only a bug
// or a bad disk writes one.
var errShort = errors.New("record ends inside a field")

// decoder reads fields of a payload; after the first error every read
// yields zeros. Byte strings alias the payload, which the caller keeps.
type decoder struct {
	v   uint32 // the journal's version
	b   []byte
	err error
}

// fail keeps the first error: the later ones are reads of the zeros it
// yields, and a payload cut short must read as cut short (cutShort).
func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *decoder) take(n int) []byte {
	if d.err != nil || len(d.b) < n {
		d.fail(errShort)
		return make([]byte, n)
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) u8() uint8   { return d.take(1)[0] }
func (d *decoder) u16() uint16 { return le.Uint16(d.take(2)) }
func (d *decoder) u32() uint32 { return le.Uint32(d.take(4)) }
func (d *decoder) u64() uint64 { return le.Uint64(d.take(8)) }

func (d *decoder) bytes16() []byte { return d.take(int(d.u16())) }

// count reads a list length and checks it against the bytes left, each item
// taking at least min bytes, before anyone allocates room for it.
func (d *decoder) count(min int) int {
	n := int(d.u32())
	if n*min > len(d.b) {
		d.fail(errShort)
		return 0
	}
	return n
}

func (d *decoder) attach() *Service {
	s := &Service{ID: model.ServiceID(d.u32()), UID: d.u32(), GID: d.u32(), Rules: map[model.RuleID]rule.Rule{}}
	s.Info.Cookie = d.u64()
	s.Info.NetnsCookie = d.u64()
	s.Info.Protocol = int(d.u8())
	addr := netip.AddrFrom16([16]byte(d.take(16)))
	if d.u8() == 1 {
		addr = addr.Unmap()
	}
	s.Info.Local = netip.AddrPortFrom(addr, d.u16())
	return s
}

// minRuleLen is the smallest encoded rule with its id (in version 1;
// version 2 adds a flags byte).
const minRuleLen = 4 + 2 + 2 + 2 + 1

func (d *decoder) batch() (model.ServiceID, model.Batch) {
	id := model.ServiceID(d.u32())
	var b model.Batch
	n := d.count(minRuleLen)
	b.Add, b.AddIDs = make([]rule.Rule, n), make([]model.RuleID, n)
	for i := range n {
		b.AddIDs[i] = model.RuleID(d.u32())
		b.Add[i] = d.rule()
	}
	b.Replace = make([]model.RuleUpdate, d.count(minRuleLen))
	for i := range b.Replace {
		b.Replace[i].ID = model.RuleID(d.u32())
		b.Replace[i].Rule = d.rule()
	}
	b.Delete = make([]model.RuleID, d.count(4))
	for i := range b.Delete {
		b.Delete[i] = model.RuleID(d.u32())
	}
	return id, b
}

func (d *decoder) rule() rule.Rule {
	var r rule.Rule
	r.Condition.Offset = d.u16()
	r.Condition.Pattern = d.bytes16()
	r.ReplyLen = d.u16()
	r.Processors = make([]rule.Processor, d.u8())
	if d.v >= version {
		switch flags := d.u8(); flags {
		case 0:
		case ruleFlagLength:
			r.Condition.MinLen, r.Condition.MaxLen = d.u16(), d.u16()
		default:
			d.fail(fmt.Errorf("rule flags %#x", flags))
		}
	}
	for i := range r.Processors {
		p := &r.Processors[i]
		p.Kind = rule.ProcessorKind(d.u8())
		switch p.Kind {
		case rule.ProcessorPut:
			p.DstOffset = d.u16()
			p.Bytes = d.bytes16()
		case rule.ProcessorCopy:
			p.SrcOffset, p.Length, p.DstOffset = d.u16(), d.u16(), d.u16()
		default:
			d.fail(fmt.Errorf("processor kind %d", p.Kind))
		}
	}
	return r
}
