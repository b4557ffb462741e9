package mcproto

import (
	"bytes"
	"encoding/binary"
)

// ReplyState is a connection's reply parser, laid out as struct
// mc_rep_state (48 bytes); the zero value is a stream's start.
type ReplyState struct {
	Tok    token
	Phase  uint8
	Kind   uint8 // the line's first token: rk*
	NTok   uint8 // tokens of the line so far (saturates)
	Bits   uint8 // rp*
	Line   uint16
	_      uint16
	Skip   uint32 // data bytes still to come, its CRLF included
	Seen   uint32 // replies done, by the commands' count (RequestState.Due)
	MnSeen uint32 // MN replies
	_      uint32
}

// Reply phases.
const (
	rpSep   = iota // between tokens, or at a line's start
	rpToken        // in a token
	rpCR           // after a CR: LF must follow
	rpRest         // in the rest of a line that does not matter
	rpData         // in a value's data
	rpLost
)

// What a line is, by its first token.
const (
	rkNone  = iota
	rkValue // VALUE <key> <flags> <bytes> [<cas>], then data: more of a get's reply
	rkStat  // STAT, ITEM, PREFIX ...: more of a stats reply
	rkVA    // VA <size> <flags>*, then data: a reply
	rkAlone // END, STORED, a number...: a text reply, alone on its line
	rkText  // VERSION ...: a text reply
	rkMeta  // HD NS EX NF EN ME ...: a meta reply
	rkMn
	rkError // ERROR, CLIENT_ERROR ..., SERVER_ERROR ...
)

// ReplyState.Bits.
const (
	rpStarted = 1 // the stream's first byte was seen
	rpMulti   = 2 // in a get's or a stats' reply: before its END
)

var replyWords = func() map[uint64]uint8 {
	m := map[uint64]uint8{}
	for kind, names := range map[uint8][]string{
		rkValue: {"VALUE"},
		rkStat:  {"STAT", "ITEM", "PREFIX"},
		rkVA:    {"VA"},
		rkAlone: {"END", "STORED", "NOT_STORED", "EXISTS", "NOT_FOUND", "DELETED", "TOUCHED", "OK", "RESET"},
		rkText:  {"VERSION"},
		rkMeta:  {"HD", "NS", "EX", "NF", "EN", "ME"},
		rkMn:    {"MN"},
		rkError: {"ERROR", "CLIENT_ERROR", "SERVER_ERROR"},
	} {
		for _, n := range names {
			m[word(n)] = kind
		}
	}
	return m
}()

var (
	wordEnd    = word("END")
	wordStored = word("STORED")
)

// Lost reports whether sync was lost.
func (s *ReplyState) Lost() bool { return s.Phase == rpLost }

// MarshalBinary is the state as the data plane lays it out.
func (s *ReplyState) MarshalBinary() ([]byte, error) {
	var b bytes.Buffer
	err := binary.Write(&b, binary.LittleEndian, s)
	return b.Bytes(), err
}

// Parse parses the next bytes of the stream; mnMark is the request
// state's MnMark.
func (s *ReplyState) Parse(seg []byte, mnMark uint64) []Event {
	p := replyParse{s: s, mnMark: mnMark}
	for i, b := range seg {
		if s.Phase == rpLost {
			break
		}
		p.byte(b, uint32(i+1))
	}
	return p.evs
}

type replyParse struct {
	s      *ReplyState
	mnMark uint64
	evs    []Event
}

func (p *replyParse) lose(reason uint8, off uint32) {
	p.s.Phase = rpLost
	p.evs = append(p.evs, Event{Type: EvLost, Flags: reason, Off: off})
}

// done: a reply ended. After the n-th MN, if the n-th mn was the last one
// received, every command up to it is done.
func (p *replyParse) done(family, flags uint8, off uint32) {
	s := p.s
	s.Seen++
	if family == FamMn {
		s.MnSeen++
		if uint32(p.mnMark>>32) == s.MnSeen && int32(uint32(p.mnMark)-s.Seen) > 0 {
			s.Seen = uint32(p.mnMark)
		}
	}
	s.Bits &= rpStarted
	p.evs = append(p.evs, Event{Type: EvReply, Reply: family, Flags: flags, Off: off, Seq: s.Seen})
}

func (p *replyParse) byte(b byte, off uint32) {
	s := p.s
	if s.Phase == rpData {
		if s.Skip--; s.Skip == 0 {
			kind := s.Kind
			s.Phase, s.Kind = rpSep, rkNone
			if kind == rkVA {
				p.done(FamMeta, 0, off)
			}
		}
		return
	}
	if s.Bits&rpStarted == 0 {
		s.Bits |= rpStarted
		if b == 0x81 { // a binary protocol response's magic
			p.lose(LostBinary, off)
			return
		}
	}
	if s.Line++; s.Line > MaxLine {
		p.lose(LostLine, off)
		return
	}
	switch {
	case s.Phase == rpCR:
		if b != '\n' {
			p.lose(LostByte, off)
			return
		}
		p.lineEnd(off)
		return
	case s.Phase == rpRest:
		if b == '\n' {
			p.lineEnd(off)
		}
		return
	}
	switch b {
	case ' ', '\r', '\n':
		if s.Phase == rpToken {
			s.Phase = rpSep
			if !p.tokenEnd(off) {
				return
			}
		}
		if b == '\n' {
			p.lineEnd(off)
		} else if b == '\r' && s.Phase == rpSep {
			s.Phase = rpCR
		}
		return
	case 0:
		p.lose(LostByte, off)
		return
	}
	if s.Phase == rpSep {
		s.Tok.start()
		s.Phase = rpToken
	}
	s.Tok.add(b, true)
}

func (p *replyParse) tokenEnd(off uint32) bool {
	s, t := p.s, &p.s.Tok
	i := s.NTok
	if s.NTok < 255 {
		s.NTok++
	}
	if i == 0 {
		s.Kind = replyWords[t.Word]
		if s.Kind == rkNone && t.number(false, maxValueDigits) {
			s.Kind = rkAlone // incr/decr's new value
		}
		if s.Kind == rkNone {
			p.lose(LostCommand, off)
			return false
		}
		// In a get's or stats' reply: only its lines, END or an error.
		if s.Bits&rpMulti != 0 && s.Kind != rkValue && s.Kind != rkStat && s.Kind != rkError && t.Word != wordEnd {
			p.lose(LostFormat, off)
			return false
		}
		switch s.Kind {
		case rkStat, rkText, rkMeta, rkMn, rkError:
			s.Phase = rpRest
		}
		return true
	}
	if s.Kind == rkAlone || (s.Kind == rkValue && i > 4) {
		p.lose(LostFormat, off)
		return false
	}
	if (s.Kind == rkValue && i == 3) || (s.Kind == rkVA && i == 1) {
		if !t.number(false, maxDigits) {
			p.lose(LostFormat, off)
			return false
		}
		s.Skip = t.Num + 2
	}
	return true
}

func (p *replyParse) lineEnd(off uint32) {
	s := p.s
	kind := s.Kind
	// A line alone has one token: the one just read.
	stored := kind == rkAlone && s.Tok.Word == wordStored
	if s.NTok == 0 {
		p.lose(LostByte, off)
		return
	}
	if (kind == rkValue && s.NTok < 4) || (kind == rkVA && s.NTok < 2) {
		p.lose(LostFormat, off)
		return
	}
	s.Phase, s.Kind, s.NTok, s.Line = rpSep, rkNone, 0, 0
	switch kind {
	case rkValue, rkVA:
		if kind == rkValue {
			s.Bits |= rpMulti
		}
		s.Kind = kind // what the data's end is
		s.Phase = rpData
	case rkStat:
		s.Bits |= rpMulti
	case rkMeta:
		p.done(FamMeta, 0, off)
	case rkMn:
		p.done(FamMn, 0, off)
	case rkError:
		p.done(FamError, 0, off)
	default:
		var flags uint8
		if stored {
			flags = ReplyStored
		}
		p.done(FamText, flags, off)
	}
}
