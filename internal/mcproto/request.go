package mcproto

import (
	"bytes"
	"encoding/binary"
)

// RequestState is a connection's request parser, laid out as struct
// mc_req_state (64 bytes); the zero value is a stream's start.
type RequestState struct {
	Tok    token
	Phase  uint8
	Cmd    Command // the line's command (CmdNone: none yet)
	NTok   uint8   // tokens of the line so far, the command's included (saturates)
	Bits   uint8   // rq*
	Line   uint16  // bytes of the line so far
	NKeys  uint16  // keys of a gat/gats so far (saturates)
	Key    uint32  // FNV-1a of the command's key
	Skip   uint32  // data bytes still to come, its CRLF included
	Arg    int32   // flush_all's delay
	Due    uint32  // replies the commands so far may get (ReplyOne and ReplyMaybe count 1)
	MFlags uint64  // a meta command's flags: bit c-'A' for flag c, bit 63 for any other
	MnMark uint64  // number of mn commands << 32 | Due as of the last mn
}

// Request phases.
const (
	rqSep   = iota // between tokens, or at a line's start
	rqToken        // in a token
	rqCR           // after a CR: LF must follow
	rqRest         // in a get/gets line: only its end matters
	rqData         // in a value's data
	rqLost
)

// RequestState.Bits.
const (
	rqStarted = 1 // the stream's first byte was seen
	rqNoreply = 2 // the last token was "noreply"
	rqDelay   = 4 // flush_all's first argument was a number (in Arg)
	rqTTL     = 8 // a storage command's exptime is not 0
)

var wordNoreply = word("noreply")

func flag(c byte) uint64 { return 1 << (c - 'A') }

// mgReadFlags are the flags an mg may carry and stay a read
// (protocol.txt: N, R and T modify the item).
var mgReadFlags = flag('b') | flag('c') | flag('f') | flag('h') | flag('k') | flag('l') |
	flag('O') | flag('P') | flag('L') | flag('q') | flag('s') | flag('t') | flag('u') | flag('v')

// commandWords maps token.Word to a command.
var commandWords = func() map[uint64]Command {
	m := make(map[uint64]Command, len(commandNames))
	for name, c := range commandNames {
		m[word(name)] = c
	}
	return m
}()

func storage(c Command) bool { return c >= CmdSet && c <= CmdCAS }
func meta(c Command) bool    { return c >= CmdMg && c <= CmdMa }

// Idle reports whether the stream is between commands, in sync: where a
// UDP datagram must end.
func (s *RequestState) Idle() bool { return s.Phase == rqSep && s.NTok == 0 }

// Lost reports whether sync was lost.
func (s *RequestState) Lost() bool { return s.Phase == rqLost }

// MarshalBinary is the state as the data plane lays it out.
func (s *RequestState) MarshalBinary() ([]byte, error) {
	var b bytes.Buffer
	err := binary.Write(&b, binary.LittleEndian, s)
	return b.Bytes(), err
}

// Parse parses the next bytes of the stream and returns its events, Off
// counted from seg's start. Nothing is parsed once sync is lost.
func (s *RequestState) Parse(seg []byte) []Event {
	p := requestParse{s: s}
	for i, b := range seg {
		if s.Phase == rqLost {
			break
		}
		p.byte(b, uint32(i+1))
	}
	return p.evs
}

type requestParse struct {
	s   *RequestState
	evs []Event
}

func (p *requestParse) emit(e Event) { p.evs = append(p.evs, e) }

func (p *requestParse) lose(reason uint8, off uint32) {
	p.s.Phase = rqLost
	p.emit(Event{Type: EvLost, Flags: reason, Off: off})
}

func (p *requestParse) byte(b byte, off uint32) {
	s := p.s
	if s.Phase == rqData {
		if s.Skip--; s.Skip == 0 {
			p.done(off)
		}
		return
	}
	if s.Bits&rqStarted == 0 {
		s.Bits |= rqStarted
		// memcached picks the binary protocol by a connection's (or
		// datagram's) first byte.
		if b == 0x80 {
			p.lose(LostBinary, off)
			return
		}
	}
	if s.Phase == rqRest {
		if b == '\n' {
			p.done(off)
		}
		return
	}
	if s.Line++; s.Line > MaxLine {
		p.lose(LostLine, off)
		return
	}
	if s.Phase == rqCR {
		if b != '\n' {
			p.lose(LostByte, off)
			return
		}
		p.lineEnd(off)
		return
	}
	switch b {
	case ' ', '\r', '\n':
		if s.Phase == rqToken {
			s.Phase = rqSep
			if !p.tokenEnd(off) {
				return
			}
		}
		switch {
		case s.Phase == rqRest:
			if b == '\n' {
				p.done(off)
			}
		case b == '\r':
			s.Phase = rqCR
		case b == '\n':
			p.lineEnd(off)
		}
		return
	case 0:
		p.lose(LostByte, off)
		return
	}
	if s.Phase == rqSep {
		s.Tok.start()
		s.Phase = rqToken
	}
	s.Tok.add(b, false)
}

// tokenEnd takes the token that just ended, the NTok-th of its line (0:
// the command): checks what memcached would read otherwise, remembers what
// the line's end needs. It reports whether sync holds.
func (p *requestParse) tokenEnd(off uint32) bool {
	s, t := p.s, &p.s.Tok
	i, cmd := s.NTok, s.Cmd
	if s.NTok < 255 {
		s.NTok++
	}
	if t.Word == wordNoreply {
		s.Bits |= rqNoreply
	} else {
		s.Bits &^= rqNoreply
	}
	if i == 0 {
		s.Cmd = commandWords[t.Word]
		if s.Cmd == CmdNone {
			p.lose(LostCommand, off)
			return false
		}
		if s.Cmd == CmdGet || s.Cmd == CmdGets {
			s.Phase = rqRest
		}
		return true
	}
	if cmd == CmdGat || cmd == CmdGats {
		// gat <exptime> <key>*: each key is touched.
		if i >= 2 {
			s.Key = t.Hash
			if s.NKeys < 0xffff {
				s.NKeys++
			}
			p.emit(Event{Type: EvKey, Off: off, Hash: t.Hash})
		}
		return true
	}
	ok := true
	switch {
	case i == 1 && (storage(cmd) || meta(cmd) || cmd == CmdIncr || cmd == CmdDecr || cmd == CmdDelete || cmd == CmdTouch):
		// memcached refuses a longer key before anything else, without
		// reading a storage command's data.
		ok = t.Len <= MaxKey
		s.Key = t.Hash
	case storage(cmd):
		// <key> <flags> <exptime> <bytes> [<cas>] [noreply]: a number
		// memcached reads otherwise means its data is read as commands.
		switch {
		case i == 2:
			ok = t.number(false, maxDigits)
		case i == 3:
			ok = t.number(true, maxDigits)
			if t.Num != 0 {
				s.Bits |= rqTTL
			}
		case i == 4:
			ok = t.number(false, maxDigits)
			s.Skip = t.Num + 2
		case i == 5 && cmd == CmdCAS:
			ok = t.number(false, maxCASDigits)
		}
	case cmd == CmdMs && i == 2:
		ok = t.number(false, maxDigits)
		s.Skip = t.Num + 2
	case meta(cmd):
		limit := uint8(MaxFlags + 1)
		if cmd == CmdMs {
			limit++
		}
		switch {
		case i > limit:
			ok = false
		case t.First >= 'A' && t.First <= 'z':
			s.MFlags |= flag(t.First)
		default:
			s.MFlags |= 1 << 63
		}
	case cmd == CmdFlushAll && i == 1 && t.number(true, maxDigits):
		s.Bits |= rqDelay
		s.Arg = t.value()
	}
	if !ok {
		p.lose(LostFormat, off)
	}
	return ok
}

// arity reports whether memcached dispatches a line of NTok tokens to the
// command (its WANT_TOKENS, whose ntokens counts one more), with the
// arguments read as we read them.
func (s *RequestState) arity() bool {
	n := s.NTok
	noreply := s.Bits&rqNoreply != 0
	switch s.Cmd {
	case CmdSet, CmdAdd, CmdReplace, CmdAppend, CmdPrepend:
		return n == 5 || n == 6
	case CmdCAS:
		return n == 6 || n == 7
	case CmdIncr, CmdDecr, CmdTouch:
		return n == 3 || n == 4
	case CmdDelete:
		return n >= 2 && n <= 4
	case CmdVerbosity:
		return n == 2 || n == 3
	case CmdFlushAll:
		// flush_all [delay] [noreply]: memcached reads the first
		// argument as the delay unless it is the noreply alone.
		if n == 1 || (n == 2 && noreply) {
			return true
		}
		return (n == 2 || (n == 3 && noreply)) && s.Bits&rqDelay != 0
	case CmdGat, CmdGats, CmdMg, CmdMd, CmdMa:
		return n >= 2
	case CmdMs:
		return n >= 3
	}
	return true // version quit stats mn me: any
}

// write is the command's CmdWrite, CmdAll and CmdTTL flags; CmdTTL told
// generously: every meta write, whatever its flags.
func (s *RequestState) write() uint8 {
	switch s.Cmd {
	case CmdMg, CmdMs, CmdMd, CmdMa:
		if s.Cmd == CmdMg && s.MFlags&^mgReadFlags == 0 {
			return 0
		}
		// memcached decodes a base64 key (b): not the key hashed.
		if s.MFlags&flag('b') != 0 {
			return CmdWrite | CmdTTL | CmdAll
		}
		return CmdWrite | CmdTTL
	case CmdGat, CmdGats:
		switch {
		case s.NKeys == 0:
			return 0
		case s.NKeys > 1:
			return CmdWrite | CmdTTL | CmdAll
		}
		return CmdWrite | CmdTTL
	case CmdFlushAll:
		return CmdWrite | CmdAll
	case CmdTouch:
		return CmdWrite | CmdTTL
	}
	switch {
	case storage(s.Cmd) && s.Bits&rqTTL != 0:
		return CmdWrite | CmdTTL
	case storage(s.Cmd) || (s.Cmd >= CmdIncr && s.Cmd <= CmdTouch):
		return CmdWrite
	}
	return 0
}

// replies is how many replies the command gets.
func (s *RequestState) replies() uint8 {
	cmd := s.Cmd
	switch {
	case cmd == CmdQuit:
		return ReplyNone
	case meta(cmd):
		if s.MFlags&flag('q') != 0 {
			return ReplyMaybe
		}
		return ReplyOne
	}
	// set_noreply_maybe: the last token, for the commands that ask it
	// (delete only with an argument besides its key).
	asks := storage(cmd) || cmd == CmdIncr || cmd == CmdDecr || cmd == CmdTouch || cmd == CmdVerbosity ||
		cmd == CmdFlushAll || (cmd == CmdDelete && s.NTok >= 3)
	if s.Bits&rqNoreply != 0 && asks {
		return ReplyNone
	}
	return ReplyOne
}

// done: the command is fully received, its data too.
func (p *requestParse) done(off uint32) {
	s := p.s
	e := Event{Type: EvCmd, Cmd: s.Cmd, Off: off, Reply: s.replies(), Flags: s.write()}
	if e.Reply != ReplyNone {
		s.Due++
		e.Seq = s.Due
	} else {
		e.Seq = s.Due + 1 // done once a later command's reply is
	}
	if s.Cmd == CmdMn {
		s.MnMark = (s.MnMark>>32+1)<<32 | uint64(s.Due)
	}
	if e.Flags&(CmdWrite|CmdAll) == CmdWrite {
		e.Hash = s.Key
	}
	if s.Cmd == CmdFlushAll {
		e.Arg = s.Arg
	}
	s.Phase, s.Cmd, s.NTok, s.Bits = rqSep, CmdNone, 0, s.Bits&rqStarted
	s.Line, s.NKeys, s.Key, s.Skip, s.Arg, s.MFlags = 0, 0, 0, 0, 0, 0
	p.emit(e)
}

// lineEnd: the line ended; its keys are reported, then its data is
// awaited or the command is done.
func (p *requestParse) lineEnd(off uint32) {
	s := p.s
	if s.NTok == 0 {
		p.lose(LostByte, off)
		return
	}
	if !s.arity() {
		p.lose(LostFormat, off)
		return
	}
	if w := s.write(); w&CmdWrite != 0 && s.Cmd != CmdGat && s.Cmd != CmdGats {
		if w&CmdAll != 0 {
			p.emit(Event{Type: EvAll, Off: off, Arg: s.Arg})
		} else {
			p.emit(Event{Type: EvKey, Off: off, Hash: s.Key})
		}
	}
	if storage(s.Cmd) || s.Cmd == CmdMs {
		s.Phase = rqData
		return
	}
	p.done(off)
}
