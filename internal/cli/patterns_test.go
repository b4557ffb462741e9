package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/offload/dnsmsg"
	"github.com/santa-offload/santa/internal/offload/dnsmsg/dnstest"
	"github.com/santa-offload/santa/rule"
)

// dnsRule is the DNS agent's rule for a query of name and type.
func dnsRule(name string, qtype uint16, extra ...dnstest.RR) rule.Rule {
	q := dnstest.Query(0, 0, name, qtype, extra...)
	reply := append([]byte{0, 0, 0x84, 0}, q[4:]...) // any reply will do
	return dnsmsg.Rule(q, reply)
}

// memcachedGet is a memcached rule for a request line at offset off.
func memcachedGet(off uint16, req string) rule.Rule {
	return rule.Rule{Condition: rule.Condition{Offset: off, Pattern: []byte(req)}, Processors: []rule.Processor{rule.Put(0, []byte("END\r\n"))}, ReplyLen: 5}
}

// Patterns are shown decoded where the service's manager or port says its
// protocol, and as bytes where they do not decode or nothing says.
func TestProtocolPatterns(t *testing.T) {
	f, path := newFake(t)
	udp := func(port uint16, manager string) client.ServiceInfo {
		return client.ServiceInfo{Protocol: 17, Family: 4, Port: port, Manager: manager}
	}
	dnsByPort := f.addService(udp(53, ""), client.ServiceStats{},
		dnsRule("www.example.com", 28), dnsRule("example.com", 1, dnstest.OPT(1232)), dnsRule("x.test", 65280),
		rule.Rule{Condition: rule.Condition{Pattern: []byte("ping")}, Processors: []rule.Processor{rule.Put(0, []byte("pong"))}, ReplyLen: 4})
	dnsByManager := f.addService(udp(5353, "santa-offload dns"), client.ServiceStats{}, dnsRule("a.example", 16))
	other := f.addService(udp(5354, "my-server"), client.ServiceStats{}, dnsRule("a.example", 16))
	mcUDP := f.addService(udp(11211, ""), client.ServiceStats{},
		memcachedGet(8, "get k1\r\n"), memcachedGet(2, "\x00\x00\x00\x01\x00\x00gets k2 k3\r\n"), memcachedGet(8, "set k1 0 0 1\r\n"), memcachedGet(10, "t k1\r\n"))
	mcTCP := f.addService(client.ServiceInfo{Protocol: 6, Family: 6, Port: 4000, Manager: "santa-offload memcached"}, client.ServiceStats{},
		memcachedGet(0, "mg user:42 v f\r\n"), memcachedGet(0, "get a\x01b\r\n"))
	f.setCounters(dnsByPort, client.RuleCounters{RuleID: 1, Hits: 3000, Bytes: 3 << 20})

	tests := []output{
		{[]string{"rules", fmt.Sprint(dnsByPort)}, `ID  OFFSET  PATTERN                LENGTH  REPLY  PROCESSORS
1   2       www.example.com. AAAA  33      33     put "\x84\x00\x00\x01"... (31 bytes) at 2, copy 2 bytes from 0 to 0
2   2       example.com. A +EDNS   40      40     put "\x84\x00\x00\x01"... (38 bytes) at 2, copy 2 bytes from 0 to 0
3   2       x.test. TYPE65280      24      24     put "\x84\x00\x00\x01"... (22 bytes) at 2, copy 2 bytes from 0 to 0
4   0       "ping"                 any     4      put "pong" at 0
`},
		{[]string{"stats", fmt.Sprint(dnsByPort)}, `service       7
matched       0
passed        0
fallback      0
  checksum    0
  too long    0
  no xdp      0
bad checksum  0
rules         4
rule bytes    0 B

RULE  HITS  BYTES    OFFSET  PATTERN                LENGTH
1     3000  3.0 MiB  2       www.example.com. AAAA  33
2     0     0 B      2       example.com. A +EDNS   40
3     0     0 B      2       x.test. TYPE65280      24
4     0     0 B      0       "ping"                 any
`},
		{[]string{"rules", fmt.Sprint(dnsByManager)}, `ID  OFFSET  PATTERN         LENGTH  REPLY  PROCESSORS
5   2       a.example. TXT  27      27     put "\x84\x00\x00\x01"... (25 bytes) at 2, copy 2 bytes from 0 to 0
`},
		{[]string{"rules", fmt.Sprint(other)}, `ID  OFFSET  PATTERN                                                   LENGTH  REPLY  PROCESSORS
6   2       "\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00"... (25 bytes)  27      27     put "\x84\x00\x00\x01"... (25 bytes) at 2, copy 2 bytes from 0 to 0
`},
		{[]string{"rules", fmt.Sprint(mcUDP)}, `ID  OFFSET  PATTERN             LENGTH  REPLY  PROCESSORS
7   8       get k1              any     5      put "END\r\n" at 0
8   2       gets k2 k3          any     5      put "END\r\n" at 0
9   8       "set k1 0 0 1\r\n"  any     5      put "END\r\n" at 0
10  10      "t k1\r\n"          any     5      put "END\r\n" at 0
`},
		{[]string{"rules", fmt.Sprint(mcTCP)}, `ID  OFFSET  PATTERN           LENGTH  REPLY  PROCESSORS
11  0       mg user:42 v f    any     5      put "END\r\n" at 0
12  0       "get a\x01b\r\n"  any     5      put "END\r\n" at 0
`},
		// -json keeps the bytes, as for any other service.
		{[]string{"-json", "stats", "-top", "1", fmt.Sprint(dnsByManager)}, `{
  "service_id": 8,
  "matched": 0,
  "passed": 0,
  "fallback": 0,
  "tc_checksum": 0,
  "tc_too_long": 0,
  "tc_no_xdp": 0,
  "bad_csum": 0,
  "rules": 1,
  "rule_bytes": 0,
  "rule_counters": [
    {
      "id": 5,
      "hits": 0,
      "bytes": 0,
      "condition": {
        "offset": 2,
        "hex": "000000010000000000000161076578616d706c650000100001",
        "length": "27"
      }
    }
  ]
}
`},
	}
	checkOutputs(t, path, tests)
	stdout, _, _ := santactl(t, path, "rules", "show", fmt.Sprint(dnsByPort), "2")
	if want := "\nrequest    example.com. A +EDNS\nlength     requests of 40 bytes\n"; !strings.Contains(stdout, want) {
		t.Errorf("rules show: no %q in\n%s", want, stdout)
	}
}
