package dnsmsg

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/santa-offload/santa/rule"
)

// Reason says why a query form is not offloaded. The agent counts skips by
// reason (docs/offload-dns.md lists them).
type Reason string

// Reasons found in the query.
const (
	Malformed     Reason = "malformed"      // does not parse, a compressed or bad QNAME, bytes after the message
	NotQuery      Reason = "not_query"      // QR set, or an opcode other than QUERY
	Questions     Reason = "questions"      // not exactly one question
	Records       Reason = "records"        // answer or authority records in a query
	Additional    Reason = "additional"     // more than one additional record, or one that is not OPT
	TSIG          Reason = "tsig"           // a TSIG record (query or reply)
	SIG0          Reason = "sig0"           // a SIG(0) record (query or reply)
	Cookie        Reason = "cookie"         // an EDNS COOKIE option
	ECS           Reason = "ecs"            // an EDNS Client Subnet option
	UnknownOption Reason = "unknown_option" // any other EDNS option
	TooLong       Reason = "too_long"       // longer than a rule's condition holds
)

// Reasons found in the server's replies.
const (
	Timeout          Reason = "timeout"           // no reply in time
	ReplyMalformed   Reason = "reply_malformed"   // does not parse, or answers another question
	Truncated        Reason = "truncated"         // TC set
	Recursion        Reason = "recursion"         // RA set: recursion offered to the agent, perhaps not to every client
	RCode            Reason = "rcode"             // neither NOERROR nor NXDOMAIN
	NotAuthoritative Reason = "not_authoritative" // AA clear: not from a zone the server serves
	ReplyTooLong     Reason = "reply_too_long"    // longer than a UDP rule's reply
	Unstable         Reason = "unstable"          // two asks, two different replies
	NoZone           Reason = "no_zone"           // no zone found for a name of the answer
	ZoneLimit        Reason = "zone_limit"        // its zones would be more than the agent follows (max_zones)
)

// Skip is a query form the agent does not offload, and why.
type Skip struct {
	Reason Reason
	Detail string
	rcode  int // the reply's, for Reason RCode
}

func (s *Skip) Error() string { return fmt.Sprintf("%s: %s", s.Reason, s.Detail) }

func skip(r Reason, format string, args ...any) *Skip {
	return &Skip{Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// ReasonOf is the reason of a *Skip in err's chain, else "".
func ReasonOf(err error) Reason {
	var s *Skip
	if errors.As(err, &s) {
		return s.Reason
	}
	return ""
}

// Refused is whether err is a reply with rcode REFUSED (CheckReply).
func Refused(err error) bool {
	var s *Skip
	return errors.As(err, &s) && s.Reason == RCode && s.rcode == RCodeRefused
}

// MaxQuery is the longest query a rule can match: the condition is every
// byte after the transaction id, and a condition holds MaxCondLen bytes.
const MaxQuery = 2 + rule.MaxCondLen

// MaxReply is the longest reply a UDP rule gives.
const MaxReply = rule.MaxUDPReply

// CheckQuery parses a query (the UDP payload, any transaction id) and
// says whether a rule may answer it: one question with a well-formed,
// uncompressed name, opcode QUERY, no records but at most one OPT without
// options, and short enough for a rule's condition. The error is a *Skip.
func CheckQuery(q []byte) (*Message, error) {
	m, err := Parse(q)
	if err != nil {
		return nil, &Skip{Reason: Malformed, Detail: err.Error()}
	}
	switch {
	case m.QR() || m.Opcode() != 0:
		return nil, skip(NotQuery, "QR %v, opcode %d", m.QR(), m.Opcode())
	case m.QDCount != 1:
		return nil, skip(Questions, "%d questions", m.QDCount)
	case m.qnameCompressed:
		return nil, skip(Malformed, "compressed question name")
	case m.ANCount != 0 || m.NSCount != 0:
		return nil, skip(Records, "%d answer and %d authority records", m.ANCount, m.NSCount)
	}
	if err := checkSignatures(m); err != nil {
		return nil, err
	}
	if m.ARCount > 1 {
		return nil, skip(Additional, "%d additional records", m.ARCount)
	}
	if m.ARCount == 1 {
		if err := checkQueryOPT(m.Additional[0]); err != nil {
			return nil, err
		}
	}
	if len(q) > MaxQuery {
		return nil, skip(TooLong, "%d bytes; a rule matches at most %d", len(q), MaxQuery)
	}
	return m, nil
}

// checkQueryOPT accepts an OPT record without options: options (a cookie,
// a client subnet, ...) make the answer depend on the client.
func checkQueryOPT(rr RR) error {
	if rr.Type != TypeOPT {
		return skip(Additional, "an additional record of type %d", rr.Type)
	}
	if len(rr.Name) != 1 {
		return skip(Malformed, "OPT owner %s is not the root", rr.Name)
	}
	if len(rr.Data) == 0 {
		return nil
	}
	// Any option refuses the query; the first one names the reason.
	if len(rr.Data) < 4 {
		return skip(Malformed, "OPT data of %d bytes is no option", len(rr.Data))
	}
	switch code := binary.BigEndian.Uint16(rr.Data); code {
	case OptionCookie:
		return skip(Cookie, "EDNS COOKIE option")
	case OptionECS:
		return skip(ECS, "EDNS Client Subnet option")
	default:
		return skip(UnknownOption, "EDNS option %d", code)
	}
}

// checkSignatures refuses a message carrying TSIG or SIG(0), which sign
// one exchange and must never be replayed.
func checkSignatures(m *Message) error {
	for _, section := range [][]RR{m.Answer, m.Authority, m.Additional} {
		for _, rr := range section {
			switch rr.Type {
			case TypeTSIG:
				return skip(TSIG, "a TSIG record")
			case TypeSIG:
				return skip(SIG0, "a SIG(0) record")
			}
		}
	}
	return nil
}

// CheckReply says whether reply, the server's answer to query (both UDP
// payloads, query already accepted by CheckQuery), may be given by a rule:
// a response to the same id and question, not truncated, authoritative,
// rcode NOERROR or NXDOMAIN (extended by EDNS), without TSIG or SIG(0), no
// longer than a UDP rule's reply. The error is a *Skip.
func CheckReply(query, reply []byte) (*Message, error) {
	if len(reply) > MaxReply {
		return nil, skip(ReplyTooLong, "%d bytes; a rule answers at most %d", len(reply), MaxReply)
	}
	m, err := Parse(reply)
	if err != nil {
		return nil, &Skip{Reason: ReplyMalformed, Detail: err.Error()}
	}
	qEnd := questionEnd(query)
	switch {
	case !m.QR():
		return nil, skip(ReplyMalformed, "QR clear")
	case len(query) < 2 || m.ID != binary.BigEndian.Uint16(query):
		return nil, skip(ReplyMalformed, "id %#04x does not answer the query's", m.ID)
	case m.QDCount != 1 || qEnd > len(reply) || !bytes.Equal(reply[HeaderLen:qEnd], query[HeaderLen:qEnd]):
		return nil, skip(ReplyMalformed, "the question is not the query's, byte for byte")
	case m.TC():
		return nil, skip(Truncated, "TC set")
	case m.RA():
		// The agent asks from the server's host, to which BIND's
		// defaults (allow-recursion localnets and localhost) offer
		// recursion: a client elsewhere gets RA clear, and may get
		// other records (cached data, the root hints).
		return nil, skip(Recursion, "RA set: the server offers the agent recursion")
	}
	if err := checkSignatures(m); err != nil {
		return nil, err
	}
	if rc := m.RCode(); rc != RCodeNoError && rc != RCodeNXDomain {
		return nil, &Skip{Reason: RCode, Detail: fmt.Sprintf("rcode %d", rc), rcode: rc}
	}
	if !m.AA() {
		return nil, skip(NotAuthoritative, "AA clear")
	}
	return m, nil
}

// questionEnd is the offset after the question of a query CheckQuery
// accepted: its name is uncompressed, so it ends at its zero byte.
func questionEnd(query []byte) int {
	off := HeaderLen
	for off < len(query) && query[off] != 0 {
		off += 1 + int(query[off])
	}
	return off + 1 + 4
}

// RCode is the response code, extended by an OPT record's upper 8 bits
// (RFC 6891 6.1.3).
func (m *Message) RCode() int {
	rc := m.Header.RCode()
	for _, rr := range m.Additional {
		if rr.Type == TypeOPT {
			rc |= int(rr.TTL>>24) << 4
		}
	}
	return rc
}
