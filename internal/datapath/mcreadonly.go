package datapath

import (
	"github.com/santa-offload/santa/internal/mcproto"
	"github.com/santa-offload/santa/rule"
)

// mcFrameHeader is memcached's UDP frame header: the request id (bytes 0
// and 1, which no condition covers), sequence, count and reserved.
const mcFrameHeader = 8

// readOnlyDatagram reports whether every memcached UDP request c matches
// holds reads only: c's pattern is the whole datagram from byte 2 on
// (its exact length), and memcached's requests in it, parsed from a fresh
// state by the reference parser as the data plane parses a datagram,
// write nothing and end between commands. The data plane then need not
// look for writes in what the rule answers (SANTA_RULE_READ_ONLY).
func readOnlyDatagram(c rule.Condition) bool {
	n := int(c.Offset) + len(c.Pattern)
	if c.Offset != 2 || int(c.MinLen) != n || int(c.MaxLen) != n || n <= mcFrameHeader || n > int(santaSantaLimitSANTA_MAX_UDP_REQUEST) {
		return false
	}
	var st mcproto.RequestState
	for _, e := range st.Parse(c.Pattern[mcFrameHeader-2:]) {
		switch {
		case e.Type == mcproto.EvKey, e.Type == mcproto.EvAll, e.Type == mcproto.EvLost:
			return false
		case e.Type == mcproto.EvCmd && e.Flags&mcproto.CmdWrite != 0:
			return false
		}
	}
	return st.Idle()
}
