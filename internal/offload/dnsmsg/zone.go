package dnsmsg

import (
	"encoding/binary"
	"fmt"
)

// The agent follows each offloaded answer's zones by their SOA serial. A
// zone is found by asking the server the SOA of a name: the owner of the
// SOA record in the answer (the name is the apex) or in the authority
// section (a NODATA or NXDOMAIN answer) is the zone's apex.

// Apex is the owner of the SOA record the reply (to an SOA query) holds
// in its answer or authority section, and that record's serial.
func (m *Message) Apex() (Name, uint32, error) {
	for _, section := range [][]RR{m.Answer, m.Authority} {
		for _, rr := range section {
			if rr.Type == TypeSOA {
				serial, err := m.soaSerial(rr)
				return rr.Name, serial, err
			}
		}
	}
	return nil, 0, &Skip{Reason: NoZone, Detail: "no SOA record in the answer or authority section"}
}

// Serial is the serial of apex's SOA record in the answer section (the
// reply to an SOA query for apex).
func (m *Message) Serial(apex Name) (uint32, error) {
	for _, rr := range m.Answer {
		if rr.Type == TypeSOA && rr.Name.Equal(apex) {
			return m.soaSerial(rr)
		}
	}
	return 0, fmt.Errorf("no SOA record of %s in the answer (rcode %d, AA %v)", apex, m.RCode(), m.AA())
}

// soaSerial reads SERIAL from an SOA record: after MNAME and RNAME, which
// may be compressed, come five 32-bit numbers.
func (m *Message) soaSerial(rr RR) (uint32, error) {
	_, off, err := m.NameAt(rr, 0)
	if err == nil {
		_, off, err = m.NameAt(rr, off)
	}
	if err == nil && off+20 != len(rr.Data) {
		err = malformed("SOA data has %d bytes after its names; want 20", len(rr.Data)-off)
	}
	if err != nil {
		return 0, fmt.Errorf("SOA of %s: %w", rr.Name, err)
	}
	return binary.BigEndian.Uint32(rr.Data[off:]), nil
}

// ZoneName is a name of a reply, whose zone the records it owns come
// from.
type ZoneName struct {
	Name Name
	// Answer is whether the name is the question's or owns records of
	// the answer section: the data asked for. Else it owns records of the
	// authority or additional section only.
	Answer bool
}

// ZoneNames are the names whose zones the records of m come from, each
// once (without regard to case), in order: the question's name, the
// other owner names of the answer section (a CNAME chain may lead into
// other zones), then those of the authority section (the SOA of a
// negative answer, NS records, of the zone a CNAME led into too) and of
// the additional section (addresses of NS targets, from whichever zone
// of the server holds them). The OPT record is no zone's data. A DS
// record lives in the parent's zone, so for a DS question the name's
// parent stands in for the name, whose records in the reply (the DS, or
// the NSEC denying it) are the parent's.
func (m *Message) ZoneNames() []ZoneName {
	q := m.Question[0]
	first := q.Name
	if q.Type == TypeDS {
		first = first.Parent()
	}
	names := []ZoneName{{first, true}}
	seen := map[string]bool{first.Key(): true, q.Name.Key(): true}
	for i, section := range [][]RR{m.Answer, m.Authority, m.Additional} {
		for _, rr := range section {
			if k := rr.Name.Key(); !seen[k] && rr.Type != TypeOPT {
				seen[k] = true
				names = append(names, ZoneName{rr.Name, i == 0})
			}
		}
	}
	return names
}
