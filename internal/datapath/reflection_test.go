package datapath

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/santa-offload/santa/internal/pkttest"
	"github.com/santa-offload/santa/rule"
)

// A DNS server drops queries from the source ports of the UDP services
// that answer anything (echo 7, daytime 13, chargen 19, time 37) and from
// port 0: a forged query from one of them at a victim would start a
// reflection (BIND 9.18, ns_client_dropport: no answer to a query from
// 7, 13, 19 or 37; measured by a review against named, which answered
// the same query from ports 53, 123, 161, 1900, 11211, 40000). The
// offload agent's rules match the payload and its length only, so the
// kernel answers such a query the server never would: the reflection the
// server refuses is made by the data plane, at line rate, for exactly the
// hot names an attacker would pick.
func TestDNSRuleFromReflectionSourcePorts(t *testing.T) {
	d := openTest(t)
	c := boundUDP(t, "127.0.0.1:0")
	query := pkttest.DNSQuery(0xbeef, "hot.example")
	dns := pkttest.DNSRule("hot.example", []byte{1, 2, 3, 4})
	dns.Condition = rule.ExactLength(dns.Condition, uint16(len(query)))
	if _, err := d.AddRules(register(t, d, c), []rule.Rule{dns}); err != nil {
		t.Fatal(err)
	}
	for _, port := range []uint16{40000, 0, 7, 13, 19, 37} {
		frame := request(local(c), query)
		frame.Src = netip.AddrPortFrom(frame.Src.Addr(), port)
		in := frame.Bytes()
		verdict, out := run(t, d.XDPProgram(), in)
		switch answered := verdict == xdpTX; {
		case port == 40000 && !answered:
			t.Fatalf("the query from port %d is not answered (verdict %d): the rule does not match", port, verdict)
		case port != 40000 && answered:
			t.Errorf("the query from source port %d is answered by XDP (%x); the server drops it", port, out[:min(len(out), 64)])
		case port != 40000 && !bytes.Equal(out, passedUnchanged(in, metaSeen)):
			t.Errorf("port %d: verdict %d, output %x", port, verdict, out[:min(len(out), 64)])
		}
		if verdict, _ := run(t, d.TCProgram(), in); port != 40000 && verdict == tcActRedirect {
			t.Errorf("the query from source port %d is answered by TC", port)
		}
	}
}
