package datapath

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/pkttest"
	"github.com/santa-offload/santa/rule"
)

// bigRule answers "Big" with a reply of n bytes: more than a native veth XDP
// frame can grow to, so on real devices the TC program answers it.
func bigRule(n int) rule.Rule {
	body := bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n]
	return rule.Rule{
		Condition:  rule.Condition{Offset: 0, Pattern: []byte("Big")},
		Processors: []rule.Processor{rule.Put(0, body)},
		ReplyLen:   uint16(n),
	}
}

func TestTCFixtures(t *testing.T) {
	d := openTest(t)
	v4 := boundUDP(t, "127.0.0.1:0")
	v6 := boundUDP(t, "[::1]:0")
	s4, s6 := register(t, d, v4), register(t, d, v6)
	big := bigRule(rule.MaxUDPReply)
	dns := pkttest.DNSRule("a.example.org", []byte{1, 2, 3})
	var ids []model.RuleID
	for _, s := range []model.ServiceID{s4, s6} {
		got, err := d.AddRules(s, []rule.Rule{big, dns})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got...)
	}
	query := pkttest.DNSQuery(0x1234, "a.example.org")
	badCsum := request(local(v4), []byte("Big")).Bytes()
	badCsum[14+20+6] ^= 0xff

	cases := []struct {
		name    string
		frame   pkttest.UDPFrame
		raw     []byte
		verdict uint32
		reply   []byte
		rule    model.RuleID
	}{
		{name: "largest reply ipv4", frame: request(local(v4), []byte("Big")), verdict: tcActRedirect, reply: expectReply(big, []byte("Big")), rule: ids[0]},
		{name: "largest reply ipv6", frame: request(local(v6), []byte("Big")), verdict: tcActRedirect, reply: expectReply(big, []byte("Big")), rule: ids[2]},
		{name: "copy processor", frame: request(local(v4), query), verdict: tcActRedirect, reply: expectReply(dns, query), rule: ids[1]},
		{name: "miss", frame: request(local(v4), []byte("Small")), verdict: tcActOK},
		{name: "bad checksum", raw: badCsum, verdict: tcActOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.raw
			if in == nil {
				in = tc.frame.Bytes()
			}
			verdict, out := run(t, d.TCProgram(), in)
			if verdict != tc.verdict {
				t.Fatalf("verdict %d, want %d", verdict, tc.verdict)
			}
			want := in
			if tc.verdict == tcActRedirect {
				want = tc.frame.Reply(tc.reply).Bytes()
			}
			if !bytes.Equal(out, want) {
				t.Fatalf("output\n got %x\nwant %x", out, want)
			}
			if tc.rule != 0 {
				st, err := d.RuleStats(tc.rule)
				if err != nil {
					t.Fatal(err)
				}
				if st.Hits != 1 || st.Bytes != uint64(len(tc.reply)) {
					t.Errorf("rule stats %+v, want 1 hit of %d bytes", st, len(tc.reply))
				}
			}
		})
	}
	st, err := d.ServiceStats(s4)
	if err != nil {
		t.Fatal(err)
	}
	// No XDP program saw these requests: TC answers them for want of XDP.
	if want := (model.ServiceStats{Matched: 2, Passed: 2, BadCsum: 1, TCNoXDP: 2}); st != want {
		t.Errorf("service stats %+v, want %+v", st, want)
	}
}

// The largest reply also fits an XDP frame with enough tailroom, as the test
// run's is: XDP answers it directly there.
func TestXDPLargestReply(t *testing.T) {
	d := openTest(t)
	c := boundUDP(t, "127.0.0.1:0")
	big := bigRule(rule.MaxUDPReply)
	if _, err := d.AddRule(register(t, d, c), big); err != nil {
		t.Fatal(err)
	}
	req := request(local(c), []byte("Big"))
	verdict, out := run(t, d.XDPProgram(), req.Bytes())
	if verdict != xdpTX {
		t.Fatalf("verdict %d, want XDP_TX", verdict)
	}
	if want := req.Reply(expectReply(big, []byte("Big"))).Bytes(); !bytes.Equal(out, want) {
		t.Fatalf("output\n got %x\nwant %x", out, want)
	}
}

// Datagrams GRO merged into one skb (a socket with UDP_GRO; gso_segs in
// the test run's __sk_buff) are several requests: TC passes them as they
// are, where the same bytes as one datagram are answered.
func TestTCPassesGROMergedDatagrams(t *testing.T) {
	d := openTest(t)
	c := boundUDP(t, "127.0.0.1:0")
	if _, err := d.AddRule(register(t, d, c), hello()); err != nil {
		t.Fatal(err)
	}
	frame := request(local(c), []byte("Hello")).Bytes()
	if verdict, _ := run(t, d.TCProgram(), frame); verdict != tcActRedirect {
		t.Fatalf("one datagram: verdict %d, want %d (answered)", verdict, tcActRedirect)
	}
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		t.Fatal(err)
	}
	var skb *btf.Struct
	if err := spec.TypeByName("__sk_buff", &skb); err != nil {
		t.Fatal(err)
	}
	ctx := make([]byte, skb.Size)
	for _, m := range skb.Members {
		if m.Name == "gso_segs" {
			binary.NativeEndian.PutUint32(ctx[m.Offset.Bytes():], 2)
		}
	}
	opts := ebpf.RunOptions{Data: frame, DataOut: make([]byte, 4096), Context: ctx}
	verdict, err := d.TCProgram().Run(&opts)
	if err != nil {
		t.Fatal(err)
	}
	if verdict != tcActOK || !bytes.Equal(opts.DataOut, frame) {
		t.Fatalf("two datagrams merged: verdict %d, frame out %x; want %d and the frame as it came", verdict, opts.DataOut, tcActOK)
	}
}
