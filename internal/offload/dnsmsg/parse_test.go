package dnsmsg_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/santa-offload/santa/internal/offload/dnsmsg"
	. "github.com/santa-offload/santa/internal/offload/dnsmsg/dnstest"
)

// reply1 is a header for a reply with one question and one answer record,
// followed by body.
func reply1(body ...byte) []byte {
	return append([]byte{0, 1, 0x84, 0, 0, 1, 0, 1, 0, 0, 0, 0}, body...)
}

func TestParseNames(t *testing.T) {
	// Question "a.b." at 12; the answer's owner is "x" and a pointer to
	// "b." at 14; its data is one A record.
	q := []byte{1, 'a', 1, 'b', 0, 0, 1, 0, 1}
	ok := reply1(append(q, 1, 'x', 0xc0, 14, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1)...)
	m, err := dnsmsg.Parse(ok)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Answer[0].Name.String(); got != "x.b." {
		t.Errorf("answer owner %q; want x.b.", got)
	}
	if !slices.Equal(m.Answer[0].Data, []byte{192, 0, 2, 1}) || m.Answer[0].TTL != 60 {
		t.Errorf("answer %+v", m.Answer[0])
	}
	owner := func(name ...byte) []byte { return reply1(append(append(q, name...), 0, 1, 0, 1, 0, 0, 0, 60, 0, 0)...) }
	hostile := []struct {
		name string
		msg  []byte
	}{
		{"pointer to itself", owner(0xc0, 21)},
		{"pointer forward", owner(0xc0, 23)},
		{"pointer to a pointer to itself", owner(1, 'x', 0xc0, 21)},
		{"pointer cut", owner(0xc0)},
		{"label past the end", owner(9, 'x')},
	}
	for _, h := range hostile {
		t.Run(h.name, func(t *testing.T) {
			if _, err := dnsmsg.Parse(h.msg); !errors.Is(err, dnsmsg.ErrMalformed) {
				t.Fatalf("Parse = %v; want ErrMalformed", err)
			}
		})
	}
}

func TestPointerChainTooLong(t *testing.T) {
	// Five questions: a 63-byte label, then four times a 63-byte label and
	// a pointer to the name before. Every pointer goes backwards, yet the
	// last name has five labels: 321 bytes, over the 255 allowed.
	msg := []byte{0, 1, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0}
	label := append([]byte{63}, make([]byte, 63)...)
	prev := len(msg)
	msg = append(append(msg, label...), 0, 0, 1, 0, 1)
	for range 4 {
		start := len(msg)
		msg = append(append(msg, label...), 0xc0|byte(prev>>8), byte(prev), 0, 1, 0, 1)
		prev = start
	}
	_, err := dnsmsg.Parse(msg)
	if !errors.Is(err, dnsmsg.ErrMalformed) || !strings.Contains(err.Error(), "question 3: malformed DNS message: name at 221 is longer than 255 bytes") {
		t.Fatalf("Parse = %v; want question 3 over 255 bytes", err)
	}
}

func TestNameString(t *testing.T) {
	for _, tt := range []struct {
		name dnsmsg.Name
		want string
	}{
		{dnsmsg.Name{0}, "."},
		{Name("www.Example.com"), "www.Example.com."},
		{dnsmsg.Name{3, 'a', '.', 'b', 1, '\\', 0}, `a\.b.\\.`},
		{dnsmsg.Name{2, 0, 0xff, 0}, `\000\255.`},
	} {
		if got := tt.name.String(); got != tt.want {
			t.Errorf("%x: %q; want %q", []byte(tt.name), got, tt.want)
		}
	}
	n := Name("www.Example.COM")
	if n.Labels() != 3 || n.Parent().String() != "Example.COM." || !n.Equal(Name("WWW.example.com")) || n.Key() != string(Name("www.example.com")) {
		t.Errorf("Labels %d, Parent %s, Key %q", n.Labels(), n.Parent(), n.Key())
	}
	if root := (dnsmsg.Name{0}); root.Parent().String() != "." {
		t.Error("the root's parent is not the root")
	}
}

// Names compare without regard to ASCII case only (RFC 4343): bytes
// beyond ASCII are distinct, whatever UTF-8 makes of them.
func TestNameCaseIsASCIIOnly(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"\x03WwW\x07example\x03com\x00", "\x03www\x07EXAMPLE\x03com\x00", true},
		{"\x02\xc3\x84\x07example\x03com\x00", "\x02\xc3\xa4\x07example\x03com\x00", false}, // Ä, ä
		{"\x01\xff\x07example\x03com\x00", "\x01\xfe\x07example\x03com\x00", false},         // not UTF-8
		{"\x01@\x00", "\x01`\x00", false},                                                   // around the letters
		{"\x01[\x00", "\x01{\x00", false},
	} {
		a, b := Name(c.a), Name(c.b)
		if got := a.Key() == b.Key(); got != c.same {
			t.Errorf("%q and %q: same key %v; want %v", c.a, c.b, got, c.same)
		}
		if got := a.Equal(b); got != c.same {
			t.Errorf("%q and %q: Equal %v; want %v", c.a, c.b, got, c.same)
		}
	}
}

func TestApexAndSerial(t *testing.T) {
	question := []Question{Q("www.example.com", dnsmsg.TypeSOA)}
	tests := []struct {
		name   string
		msg    []byte
		apex   string
		serial uint32
		reason dnsmsg.Reason
	}{
		{"SOA in the answer", Msg{Flags: QR | AA, Questions: []Question{Q("example.com", dnsmsg.TypeSOA)}, Answer: []RR{SOA("example.com", 42)}}.Bytes(), "example.com.", 42, ""},
		{"NODATA", Msg{Flags: QR | AA, Questions: question, Authority: []RR{SOA("example.com", 7)}}.Bytes(), "example.com.", 7, ""},
		{"NXDOMAIN", Msg{Flags: QR | AA | 3, Questions: question, Authority: []RR{SOA("Example.com", 9)}}.Bytes(), "Example.com.", 9, ""},
		{"referral", Msg{Flags: QR, Questions: question, Authority: []RR{{Name: "www.example.com", Type: TypeNS, Class: 1, Data: Name("ns.other")}}}.Bytes(), "", 0, dnsmsg.NoZone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := dnsmsg.Parse(tt.msg)
			if err != nil {
				t.Fatal(err)
			}
			apex, serial, err := m.Apex()
			if dnsmsg.ReasonOf(err) != tt.reason || tt.reason == "" && (err != nil || apex.String() != tt.apex || serial != tt.serial) {
				t.Fatalf("Apex = %s, %d, %v; want %s, %d, reason %q", apex, serial, err, tt.apex, tt.serial, tt.reason)
			}
		})
	}
	// The serial with compressed MNAME and RNAME: "ns" and "hostmaster"
	// pointing at the question's "example.com" (offset 12).
	soa := []byte{0, 0, 0x84, 0, 0, 1, 0, 1, 0, 0, 0, 0, 7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0, 0, 6, 0, 1,
		0xc0, 12, 0, 6, 0, 1, 0, 0, 0, 60, 0, 32, 2, 'n', 's', 0xc0, 12, 4, 'h', 'o', 's', 't', 0xc0, 12,
		0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4}
	m, err := dnsmsg.Parse(soa)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := m.Serial(Name("EXAMPLE.com")); err != nil || s != 256 {
		t.Errorf("Serial = %d, %v; want 256", s, err)
	}
	if _, err := m.Serial(Name("other.com")); err == nil {
		t.Error("Serial found the SOA of another zone")
	}
	soa[40] = 31 // RDLENGTH one short: 19 bytes after the names
	if m, err := dnsmsg.Parse(soa[:len(soa)-1]); err != nil {
		t.Fatal(err)
	} else if _, err := m.Serial(Name("example.com")); !errors.Is(err, dnsmsg.ErrMalformed) {
		t.Errorf("Serial of a short SOA = %v; want ErrMalformed", err)
	}
}

func TestZoneNames(t *testing.T) {
	// names is the zone names of msg, those of the answer first, each in
	// presentation format.
	names := func(msg Msg) (answer, other []string) {
		m, err := dnsmsg.Parse(msg.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range m.ZoneNames() {
			if n.Answer {
				answer = append(answer, n.Name.String())
			} else {
				other = append(other, n.Name.String())
			}
		}
		return answer, other
	}
	ds := func(name string) RR { return RR{Name: name, Type: dnsmsg.TypeDS, Class: 1, Data: []byte{1, 2, 3, 4}} }
	nsec := func(name string) RR { return RR{Name: name, Type: 47, Class: 1, Data: Name(name)} }
	tests := []struct {
		name          string
		msg           Msg
		answer, other []string
	}{
		{"CNAME chain", Msg{Flags: QR | AA, Questions: []Question{Q("www.a.example", TypeA)},
			Answer: []RR{CNAME("www.a.example", "web.b.example"), CNAME("WEB.b.example", "x.c.example"), A("x.c.example", 192, 0, 2, 1), A("web.b.example", 192, 0, 2, 2)}},
			[]string{"www.a.example.", "WEB.b.example.", "x.c.example."}, nil},
		// A CNAME into another zone whose target does not exist: that
		// zone's SOA is in the authority section.
		{"NXDOMAIN after a CNAME", Msg{Flags: QR | AA | 3, Questions: []Question{Q("alias.example.com", TypeA)},
			Answer: []RR{CNAME("alias.example.com", "x.other.org")}, Authority: []RR{SOA("other.org", 7)}},
			[]string{"alias.example.com."}, []string{"other.org."}},
		// NS records, their addresses (one from another zone), an OPT
		// record (no zone's), and names again in another case.
		{"NS and glue", Msg{Flags: QR | AA, Questions: []Question{Q("www.example.com", TypeA)},
			Answer:     []RR{A("www.example.com", 192, 0, 2, 1)},
			Authority:  []RR{NS("example.com", "ns1.example.com"), NS("Example.COM", "ns.other.org"), NS("example.com", "WWW.example.com")},
			Additional: []RR{A("ns1.example.com", 192, 0, 2, 53), A("ns.other.org", 198, 51, 100, 53), A("WWW.example.com", 192, 0, 2, 1), OPT(1232)}},
			[]string{"www.example.com."}, []string{"example.com.", "ns1.example.com.", "ns.other.org."}},
		{"DS", Msg{Flags: QR | AA, Questions: []Question{Q("child.example", dnsmsg.TypeDS)}, Answer: []RR{ds("child.example")},
			Authority: []RR{NS("example", "ns.example")}, Additional: []RR{A("ns.example", 192, 0, 2, 53)}},
			[]string{"example."}, []string{"ns.example."}},
		// The parent's SOA and the NSEC at the name, the parent's too,
		// add no name.
		{"no DS", Msg{Flags: QR | AA, Questions: []Question{Q("child.example", dnsmsg.TypeDS)}, Authority: []RR{SOA("example", 3), nsec("child.example")}},
			[]string{"example."}, nil},
		{"the root's SOA", Msg{Flags: QR | AA | 3, Questions: []Question{Q("alias.example", TypeA)},
			Answer: []RR{CNAME("alias.example", "nowhere")}, Authority: []RR{SOA(".", 1)}},
			[]string{"alias.example."}, []string{"."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			answer, other := names(tt.msg)
			if !slices.Equal(answer, tt.answer) || !slices.Equal(other, tt.other) {
				t.Fatalf("ZoneNames: answer %q, other %q; want %q, %q", answer, other, tt.answer, tt.other)
			}
		})
	}
}
