package cli

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/offload/dnsmsg"
	"github.com/santa-offload/santa/rule"
)

// Tables show a pattern decoded where santactl knows the service's
// protocol: a DNS rule's query as its name and type, a memcached rule's
// as its command and key. santactl knows it from the service's manager
// (the client that attached it: the offload agents name themselves) or,
// failing that, its port. A pattern that does not decode as a request of
// that protocol is shown as bytes, as for any other service; -json shows
// bytes always.

// proto is what a service's requests are, as far as santactl knows.
type proto int

const (
	protoUnknown proto = iota
	protoDNS
	protoMemcachedUDP // behind memcached's 8-byte UDP frame header
	protoMemcachedTCP
)

// Managers and ports santactl takes a service's protocol from.
const (
	dnsManager       = "santa-offload dns"
	memcachedManager = "santa-offload memcached"
	dnsPort          = 53
	memcachedPort    = 11211
	memcachedFrame   = 8 // the UDP frame header before a memcached command
	protoUDP         = 17
)

// protoOf is what santactl takes service s's requests to be.
func protoOf(s client.ServiceInfo) proto {
	switch {
	case s.Manager == dnsManager || s.Manager == "" && s.Port == dnsPort && s.Protocol == protoUDP:
		return protoDNS
	case s.Manager == memcachedManager || s.Manager == "" && s.Port == memcachedPort:
		if s.Protocol == protoUDP {
			return protoMemcachedUDP
		}
		return protoMemcachedTCP
	}
	return protoUnknown
}

// serviceProto is what santactl takes service id's requests to be; a
// service not listed (gone, or another uid's) is unknown.
func serviceProto(c *client.Client, id uint32) (proto, error) {
	services, err := c.Services()
	if err != nil {
		return protoUnknown, err
	}
	for _, s := range services {
		if s.ServiceID == id {
			return protoOf(s), nil
		}
	}
	return protoUnknown, nil
}

// decode is the request condition c matches, in p's terms, or "".
func (p proto) decode(c rule.Condition) string {
	switch p {
	case protoDNS:
		return dnsQuestion(c)
	case protoMemcachedUDP:
		return memcachedCommand(c, memcachedFrame)
	case protoMemcachedTCP:
		return memcachedCommand(c, 0)
	}
	return ""
}

// patternCell is the table cell of condition c's pattern: decoded if p
// knows how, else its bytes quoted and cut after width characters.
func (p proto) patternCell(c rule.Condition, width int) string {
	if decoded := p.decode(c); decoded != "" {
		return decoded
	}
	return quoteUpTo(c.Pattern, width)
}

// dnsQuestion is a DNS query pattern's question, "www.example.com. AAAA"
// (a class other than IN after the type, "+EDNS" when the query carries an
// OPT record), or "" unless the pattern is a whole query after the id, as
// the DNS agent's rules are.
func dnsQuestion(c rule.Condition) string {
	if c.Offset > 2 {
		return "" // the header's counts are not in the pattern
	}
	msg := append(make([]byte, c.Offset), c.Pattern...)
	m, err := dnsmsg.Parse(msg)
	if err != nil || len(m.Question) != 1 || m.QR() || len(m.Answer)+len(m.Authority) > 0 {
		return ""
	}
	q := m.Question[0]
	out := q.Name.String() + " " + dnsType(q.Type)
	if q.Class != dnsmsg.ClassIN {
		out += fmt.Sprintf(" CLASS%d", q.Class)
	}
	for _, rr := range m.Additional {
		if rr.Type == dnsmsg.TypeOPT {
			out += " +EDNS"
		}
	}
	return out
}

// dnsTypes name the record types people look for (IANA "Resource Record
// (RR) TYPEs"); the others are TYPEn, as in RFC 3597.
var dnsTypes = map[uint16]string{1: "A", 2: "NS", 5: "CNAME", 6: "SOA", 12: "PTR", 15: "MX", 16: "TXT",
	28: "AAAA", 33: "SRV", 35: "NAPTR", 43: "DS", 46: "RRSIG", 47: "NSEC", 48: "DNSKEY", 52: "TLSA",
	64: "SVCB", 65: "HTTPS", 255: "ANY", 257: "CAA"}

func dnsType(t uint16) string {
	if name, ok := dnsTypes[t]; ok {
		return name
	}
	return fmt.Sprintf("TYPE%d", t)
}

// memcachedCommand is a memcached read's command and key, "get k1", from
// a pattern that holds the whole command line, which starts at offset
// start of the request; "" for anything else.
func memcachedCommand(c rule.Condition, start int) string {
	if int(c.Offset) > start || int(c.Offset)+len(c.Pattern) <= start {
		return ""
	}
	line, ok := bytes.CutSuffix(c.Pattern[start-int(c.Offset):], []byte("\r\n"))
	if !ok {
		return ""
	}
	fields := strings.Fields(string(line))
	if len(fields) < 2 || !readCommands[fields[0]] || strings.Join(fields, " ") != string(line) {
		return ""
	}
	for _, b := range []byte(fields[1]) {
		if b <= ' ' || b > '~' {
			return "" // not a key memcached accepts in its text protocol
		}
	}
	return string(line)
}

// readCommands are the memcached commands a rule answers: reads.
var readCommands = map[string]bool{"get": true, "gets": true, "gat": true, "gats": true, "mg": true}
