package rules

import "github.com/santa-offload/santa/rule"

// condKey is a condition's offset and pattern. Rules sharing one may
// coexist only with disjoint length ranges (rule.Condition.Overlaps).
type condKey struct {
	off     uint16
	pattern string
}

func keyOf(c rule.Condition) condKey { return condKey{c.Offset, string(c.Pattern)} }

// condIDs are the rule ids by condition key. Almost every key has one
// rule, kept inline; the others (disjoint length ranges) sit in more, so
// that a million conditions cost a million map entries and no slices.
type condIDs struct {
	first map[condKey]uint32
	more  map[condKey][]uint32
}

func newCondIDs(n int) condIDs { return condIDs{first: make(map[condKey]uint32, n)} }

// has reports whether a rule has key k.
func (m condIDs) has(k condKey) bool {
	_, ok := m.first[k]
	return ok
}

// each calls f for every rule id with key k until f returns false.
func (m condIDs) each(k condKey, f func(id uint32) bool) {
	id, ok := m.first[k]
	if !ok || !f(id) {
		return
	}
	for _, id := range m.more[k] {
		if !f(id) {
			return
		}
	}
}

func (m *condIDs) add(k condKey, id uint32) {
	if _, ok := m.first[k]; !ok {
		m.first[k] = id
		return
	}
	if m.more == nil {
		m.more = map[condKey][]uint32{}
	}
	m.more[k] = append(m.more[k], id)
}

func (m *condIDs) remove(k condKey, id uint32) {
	more := m.more[k]
	if m.first[k] == id {
		if len(more) == 0 {
			delete(m.first, k)
			return
		}
		m.first[k], more = more[0], more[1:]
	} else {
		for i, o := range more {
			if o == id {
				more = append(more[:i:i], more[i+1:]...)
				break
			}
		}
	}
	if len(more) == 0 {
		delete(m.more, k)
	} else {
		m.more[k] = more
	}
}

// merge adds every id of o.
func (m *condIDs) merge(o condIDs) {
	for k, id := range o.first {
		m.add(k, id)
	}
	for k, ids := range o.more {
		for _, id := range ids {
			m.add(k, id)
		}
	}
}
