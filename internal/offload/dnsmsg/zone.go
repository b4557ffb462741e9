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

// ZoneNames are the names whose zones the answer to m's question comes
// from: the question's name and every other owner name of the answer
// section (a CNAME chain may lead into other zones). A DS record lives in
// the parent's zone, so for a DS question the name's parent stands in for
// the name.
func (m *Message) ZoneNames() []Name {
	q := m.Question[0]
	first := q.Name
	if q.Type == TypeDS {
		first = first.Parent()
	}
	names := []Name{first}
	seen := map[string]bool{q.Name.Key(): true}
	for _, rr := range m.Answer {
		if k := rr.Name.Key(); !seen[k] {
			seen[k] = true
			names = append(names, rr.Name)
		}
	}
	return names
}
