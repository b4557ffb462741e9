package rule

import "bytes"

// CopyPiece copies request payload bytes [Src, Src+Len) to reply bytes
// [Dst, Dst+Len) (struct santa_copy).
type CopyPiece struct {
	Src, Dst, Len uint16
}

// Compiled is a rule as the data plane stores it: the kernel cannot replay
// processors in order cheaply, so their overlaps are resolved here once.
type Compiled struct {
	Template []byte      // the reply with every put applied and copy destinations zeroed
	Copies   []CopyPiece // disjoint, ordered by Dst
	Csum     uint32      // Sum16LE(Template, 0)
}

// Compile resolves r's processors into a template and copy pieces. A byte's
// final value comes from the last processor that writes it, so a copy keeps
// only the bytes no later processor overwrites; a copy cut in the middle
// becomes two pieces. The rule is validated against the widest limits of
// the data plane, which size the stored record; a service's own limits
// (LimitsFor) are its registration's to check.
func Compile(r Rule) (Compiled, error) {
	if err := r.Validate(storable); err != nil {
		return Compiled{}, err
	}
	tmpl := make([]byte, r.ReplyLen)
	// last[j] is 1 + the index of the processor that writes reply byte j
	// last, 0 if none does (bytes: MaxProcessors is far below 255). On the
	// stack for replies that fit a UDP frame: a million of them compile in
	// one install.
	var lastBuf [MaxUDPReply]uint8
	var last []uint8
	if int(r.ReplyLen) <= len(lastBuf) {
		last = lastBuf[:r.ReplyLen]
	} else {
		last = make([]uint8, r.ReplyLen)
	}
	for i, p := range r.Processors {
		dst := int(p.DstOffset)
		written := last[dst : dst+p.span()]
		for j := range written {
			written[j] = uint8(i + 1)
		}
		if p.Kind == ProcessorPut {
			copy(tmpl[dst:], p.Bytes)
		}
	}
	var pieces []CopyPiece
	for j := 0; j < len(last); {
		i := int(last[j]) - 1
		if i < 0 || r.Processors[i].Kind != ProcessorCopy {
			j++
			continue
		}
		// A run of bytes last written by one copy reads a contiguous source.
		start := j
		for j < len(last) && int(last[j]) == i+1 {
			tmpl[j] = 0
			j++
		}
		p := r.Processors[i]
		pieces = append(pieces, CopyPiece{
			Src: p.SrcOffset + uint16(start-int(p.DstOffset)),
			Dst: uint16(start),
			Len: uint16(j - start),
		})
	}
	if len(pieces) > MaxCopies {
		return Compiled{}, tooBig("number of copy pieces after later processors cut copies", "", len(pieces), MaxCopies)
	}
	return Compiled{Template: tmpl, Copies: pieces, Csum: Sum16LE(tmpl, 0)}, nil
}

// SourceEnd is the shortest request payload the reply can be built from: the
// end of the last request byte a copy piece reads (0 without copies). The
// data plane passes shorter requests to the stack.
func (c Compiled) SourceEnd() int {
	end := 0
	for _, p := range c.Copies {
		end = max(end, int(p.Src)+int(p.Len))
	}
	return end
}

// Reply builds the reply to a request payload, as the data plane does; false
// if a copy source lies beyond the payload.
func (c Compiled) Reply(payload []byte) ([]byte, bool) {
	if c.SourceEnd() > len(payload) {
		return nil, false
	}
	reply := bytes.Clone(c.Template)
	for _, p := range c.Copies {
		copy(reply[p.Dst:], payload[p.Src:p.Src+p.Len])
	}
	return reply, true
}
