package dnstest

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/santa-offload/santa/internal/dnsload"
)

// The zones every server serves: Origin with Config.Names A records and a
// record of each kind a DNS offload must handle, and SubOrigin, delegated
// from it to the same server, with its own SOA: a change to one zone
// leaves the other's serial alone.
const (
	Origin    = "example."
	SubOrigin = "sub.example."
	// SubNames is how many A records SubOrigin has: SubName(0...).
	SubNames = 16
)

// Names in Origin besides Name(i).
const (
	// RotatingName has four A records: BIND answers them in a different
	// order each time (rrset-order), Knot and NSD always in the same.
	RotatingName = "rot.example"
	// AliasName is a CNAME of Name(0).
	AliasName = "alias.example"
	// BigName has a TXT record of 429 bytes of data: the reply to a query
	// without EDNS is 470 bytes, near the 512-byte limit.
	BigName = "big.example"
)

// Name is the i-th generated name of Origin (an A record 10.a.b.c, i's
// three low bytes), as queried: "n<i>.example".
func Name(i int) string { return fmt.Sprintf("n%d.example", i) }

// SubName is the i-th name of SubOrigin (i < SubNames).
func SubName(i int) string { return fmt.Sprintf("s%d.sub.example", i) }

// UnknownName is a name in Origin that does not exist (NXDOMAIN).
func UnknownName(i int) string { return fmt.Sprintf("nx%d.example", i) }

// Questions are the A questions for the first n names (at most
// Config.Names), then one of every other kind: the rotating RRset, the
// CNAME, the big TXT, a name of SubOrigin, both zones' SOA and an
// unknown name.
func Questions(n int) []dnsload.Question {
	var qs []dnsload.Question
	for i := range n {
		qs = append(qs, dnsload.Question{Name: Name(i), Type: dnsload.TypeA})
	}
	return append(qs,
		dnsload.Question{Name: RotatingName, Type: dnsload.TypeA},
		dnsload.Question{Name: AliasName, Type: dnsload.TypeA},
		dnsload.Question{Name: BigName, Type: dnsload.TypeTXT},
		dnsload.Question{Name: SubName(0), Type: dnsload.TypeA},
		dnsload.Question{Name: strings.TrimSuffix(Origin, "."), Type: dnsload.TypeSOA},
		dnsload.Question{Name: strings.TrimSuffix(SubOrigin, "."), Type: dnsload.TypeSOA},
		dnsload.Question{Name: UnknownName(0), Type: dnsload.TypeA})
}

// A Record is a zone file line: Name relative to the zone's origin.
type Record struct{ Name, Type, Data string }

// A Zone is the contents of one zone file.
type Zone struct {
	Origin string // with the final dot
	Serial uint32
	// names generated A records Name(0...) follow records, but for those
	// in replaced (by Set).
	names    int
	records  []Record
	replaced map[string]bool // "name type" of generated records Set replaced
}

// Set replaces the records of name (relative to the origin, "@" for the
// origin itself) and type with one per data; no data deletes them. It
// does not touch the serial: Server.Update bumps it.
func (z *Zone) Set(name, typ string, data ...string) {
	z.records = slices.DeleteFunc(z.records, func(r Record) bool { return r.Name == name && r.Type == typ })
	if typ == "A" && z.generated(name) {
		z.replaced[name+" A"] = true
	}
	for _, d := range data {
		z.records = append(z.records, Record{name, typ, d})
	}
}

// generated reports whether name is one of the generated names.
func (z *Zone) generated(name string) bool {
	var i int
	_, err := fmt.Sscanf(name, "n%d", &i)
	return err == nil && fmt.Sprintf("n%d", i) == name && i < z.names
}

// WriteFile writes the zone file to path.
func (z *Zone) WriteFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "$ORIGIN %s\n$TTL 3600\n@ IN SOA ns.%s admin.%[2]s %d 3600 600 86400 60\n", z.Origin, Origin, z.Serial)
	for _, r := range z.records {
		fmt.Fprintf(w, "%s IN %s %s\n", r.Name, r.Type, r.Data)
	}
	for i := range z.names {
		if n := fmt.Sprintf("n%d", i); !z.replaced[n+" A"] {
			fmt.Fprintf(w, "%s IN A 10.%d.%d.%d\n", n, i>>16&255, i>>8&255, i&255)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// newZones are the two zones, with names generated names and ns.example.
// at addrs.
func newZones(names int, addrs []netip.Addr) []*Zone {
	top := &Zone{Origin: Origin, Serial: 1, names: names, replaced: map[string]bool{}}
	top.Set("@", "NS", "ns."+Origin)
	for _, a := range addrs {
		typ := "A"
		if a.Is6() {
			typ = "AAAA"
		}
		top.records = append(top.records, Record{"ns", typ, a.String()})
	}
	top.Set("rot", "A", "10.255.0.1", "10.255.0.2", "10.255.0.3", "10.255.0.4")
	top.Set("alias", "CNAME", "n0."+Origin)
	top.Set("big", "TXT", `"`+strings.Repeat("x", 254)+`" "`+strings.Repeat("y", 173)+`"`)
	top.Set("sub", "NS", "ns."+Origin)
	sub := &Zone{Origin: SubOrigin, Serial: 1, replaced: map[string]bool{}}
	sub.Set("@", "NS", "ns."+Origin)
	for i := range SubNames {
		sub.records = append(sub.records, Record{fmt.Sprintf("s%d", i), "A", fmt.Sprintf("10.254.0.%d", i)})
	}
	return []*Zone{top, sub}
}
