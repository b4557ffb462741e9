package rules

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/santa-offload/santa/rule"
)

// checkAgainstFull asserts that the incrementally kept index is exactly what
// a full build of the same conditions gives, and that Walked agrees with it.
func checkAgainstFull(t *testing.T, s *ServiceIndex) {
	t.Helper()
	var es []Entry
	var cs []rule.Condition
	for _, e := range s.entries {
		es = append(es, e)
		cs = append(cs, e.Cond)
	}
	regions, err := Regions(cs, rule.MaxRegions)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(regions, s.regions) {
		t.Fatalf("regions %v; a full build has %v", s.regions, regions)
	}
	want, err := BuildIndex(regions, es)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.EqualFunc(want, s.index, func(a, b IndexNode) bool {
		return a.NextEnd == b.NextEnd && slices.Equal(a.Slots, b.Slots)
	}) {
		t.Fatalf("incremental index (%d nodes) differs from a full build (%d nodes)", len(s.index), len(want))
	}
	levels := map[indexLevel]int{}
	countLevels(levels, want, 1)
	if !maps.Equal(levels, s.levels) {
		t.Fatalf("walked levels %v; want %v", s.levels, levels)
	}
}

func TestServiceIndexMatchesFullBuild(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	s := NewServiceIndex(rule.MaxRegions)
	nextID, fulls, moved := uint32(1), 0, 0
	cond := func() rule.Condition {
		// Few offsets and a shared prefix: roots are shared, subtrees deep,
		// and now and then a shorter pattern changes the regions.
		p := fmt.Appendf(nil, "prefix-%d-%d", rng.IntN(40), rng.IntN(1000))
		c := rule.Condition{Offset: uint16(rng.IntN(3) * 40), Pattern: p[:min(len(p), 9+rng.IntN(8))]}
		if rng.IntN(4) == 0 { // variants of one condition by length, or an overlap refused
			c = rule.ExactLength(c, uint16(c.End()+rng.IntN(3)))
		}
		return c
	}
	for round := range 300 {
		var add []Entry
		var remove []uint32
		ids := slices.Sorted(maps.Keys(s.entries))
		for range rng.IntN(4) {
			if len(ids) > 0 {
				remove = append(remove, ids[rng.IntN(len(ids))])
			}
		}
		slices.Sort(remove)
		remove = slices.Compact(remove)
		for i, id := range remove {
			switch i % 3 {
			case 0: // replaced: same id, new condition and slot
				add = append(add, Entry{Slot: nextID, ID: id, Cond: cond()})
				nextID++
			case 1: // replaced in place: the same offset and pattern, maybe another length
				c := s.entries[id].Cond
				if rng.IntN(2) == 0 {
					c = rule.Condition{Offset: c.Offset, Pattern: c.Pattern}
				}
				add = append(add, Entry{Slot: nextID, ID: id, Cond: c})
				nextID++
				moved++
			}
		}
		for range rng.IntN(30) {
			add = append(add, Entry{Slot: nextID, ID: nextID, Cond: cond()})
			nextID++
		}
		c, err := s.Plan(add, remove)
		if err != nil {
			continue // a duplicate condition: nothing changed
		}
		if c.Full {
			fulls++
		}
		s.Apply(c)
		checkAgainstFull(t, s)
		if round == 150 && len(s.entries) < 100 {
			t.Fatalf("only %d rules after %d rounds: the test exercises little", len(s.entries), round)
		}
	}
	if fulls == 0 || fulls > 100 {
		t.Errorf("%d of 300 changes were full builds; want some, but few", fulls)
	}
	if moved < 50 {
		t.Errorf("%d rules replaced in place: the test exercises little", moved)
	}
}

// A rule replaced with its offset and pattern unchanged keeps its place:
// the change rewrites the one node that holds it, with the new slot, not
// its root's subtree.
func TestServiceIndexReplacedInPlace(t *testing.T) {
	s := NewServiceIndex(rule.MaxRegions)
	var add []Entry
	for i := range uint32(40) { // one root, a subtree below it
		add = append(add, Entry{Slot: 100 + i, ID: i, Cond: rule.Condition{Pattern: fmt.Appendf(nil, "key-%02d", i)}})
	}
	add = append(add, Entry{Slot: 200, ID: 99, Cond: rule.Condition{Pattern: []byte("key-")}})
	c, err := s.Plan(add, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Apply(c)
	if len(s.index) < 3 {
		t.Fatalf("%d nodes: the test wants a subtree", len(s.index))
	}
	for i, cond := range []rule.Condition{
		{Pattern: []byte("key-07")},
		rule.ExactLength(rule.Condition{Pattern: []byte("key-07")}, 9), // a length range: still in place
	} {
		moved := Entry{Slot: 300 + uint32(i), ID: 7, Cond: cond}
		c, err := s.Plan([]Entry{moved}, []uint32{7})
		if err != nil {
			t.Fatal(err)
		}
		if c.Full || len(c.Index) != 1 || len(c.Old) != 1 {
			t.Fatalf("full %v, %d nodes written for %d old: want one node rewritten", c.Full, len(c.Index), len(c.Old))
		}
		for k, n := range c.Index {
			if old := c.Old[k]; !slices.Contains(n.Slots, moved.Slot) || slices.Contains(n.Slots, old.Slots[slices.Index(old.Slots, s.entries[7].Slot)]) {
				t.Fatalf("node %v: slots %v, were %v; want rule 7's slot %d for %d", k, n.Slots, old.Slots, moved.Slot, s.entries[7].Slot)
			}
		}
		s.Apply(c)
		checkAgainstFull(t, s)
		root, _ := RootKey(s.regions, cond)
		if !slices.ContainsFunc(s.byRoot[root], func(e Entry) bool {
			return e.ID == moved.ID && e.Slot == moved.Slot && e.Cond.MinLen == cond.MinLen
		}) {
			t.Fatalf("the root's entries %v lack %v", s.byRoot[root], moved)
		}
	}
}

func TestServiceIndexRefusesDuplicates(t *testing.T) {
	s := NewServiceIndex(rule.MaxRegions)
	c, err := s.Plan([]Entry{{Slot: 1, ID: 1, Cond: rule.Condition{Pattern: []byte("abc")}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Apply(c)
	_, err = s.Plan([]Entry{{Slot: 2, ID: 2, Cond: rule.Condition{Pattern: []byte("abc")}}}, nil)
	if want := "rules 1 and 2 have the same condition (3 bytes at offset 0)"; err == nil || err.Error() != want {
		t.Fatalf("Plan = %v; want %q", err, want)
	}
	// Replacing rule 1 by a rule with its own condition is no duplicate.
	if _, err := s.Plan([]Entry{{Slot: 2, ID: 1, Cond: rule.Condition{Pattern: []byte("abc")}}}, []uint32{1}); err != nil {
		t.Fatal(err)
	}
}

// Rules of one offset and pattern may coexist if their length ranges are
// disjoint; an overlap is refused as a duplicate, against installed rules
// and within one batch, and a deleted variant frees its range.
func TestServiceIndexLengthVariants(t *testing.T) {
	abc := rule.Condition{Pattern: []byte("abc")}
	ranged := func(min, max uint16) rule.Condition {
		c := abc
		c.MinLen, c.MaxLen = min, max
		return c
	}
	s := NewServiceIndex(rule.MaxRegions)
	apply := func(add []Entry, remove []uint32) {
		t.Helper()
		c, err := s.Plan(add, remove)
		if err != nil {
			t.Fatal(err)
		}
		s.Apply(c)
		checkAgainstFull(t, s)
	}
	apply([]Entry{{Slot: 1, ID: 1, Cond: rule.ExactLength(abc, 3)}, {Slot: 2, ID: 2, Cond: ranged(4, 10)}}, nil)
	apply([]Entry{{Slot: 3, ID: 3, Cond: ranged(11, 0)}}, nil)
	for _, tt := range []struct {
		add  []Entry
		want string
	}{
		{[]Entry{{Slot: 4, ID: 4, Cond: abc}},
			"rules 1 and 4 have the same condition (3 bytes at offset 0, request lengths 3 and any)"},
		{[]Entry{{Slot: 4, ID: 4, Cond: ranged(10, 10)}},
			"rules 2 and 4 have the same condition (3 bytes at offset 0, request lengths 4-10 and 10)"},
		{[]Entry{{Slot: 4, ID: 4, Cond: ranged(40, 50)}},
			"rules 3 and 4 have the same condition (3 bytes at offset 0, request lengths 11- and 40-50)"},
	} {
		if _, err := s.Plan(tt.add, nil); err == nil || err.Error() != tt.want {
			t.Errorf("Plan(%+v) = %v; want %q", tt.add[0].Cond, err, tt.want)
		}
	}
	// Within one batch, once rule 3 is gone.
	_, err := s.Plan([]Entry{{Slot: 4, ID: 4, Cond: ranged(20, 30)}, {Slot: 5, ID: 5, Cond: ranged(30, 0)}}, []uint32{3})
	if want := "rules 4 and 5 have the same condition (3 bytes at offset 0, request lengths 20-30 and 30-)"; err == nil || err.Error() != want {
		t.Errorf("Plan = %v; want %q", err, want)
	}
	apply([]Entry{{Slot: 4, ID: 4, Cond: ranged(20, 30)}, {Slot: 5, ID: 5, Cond: ranged(31, 35)}}, []uint32{3})
	// Rule 1 goes, and a rule with its range takes its place; rule 2 is
	// replaced by itself widened into rule 1's old range.
	apply(nil, []uint32{1})
	apply([]Entry{{Slot: 6, ID: 6, Cond: rule.ExactLength(abc, 3)}}, nil)
	apply([]Entry{{Slot: 7, ID: 2, Cond: ranged(4, 19)}}, []uint32{2})
	if _, err := s.Plan([]Entry{{Slot: 8, ID: 8, Cond: ranged(19, 19)}}, nil); err == nil {
		t.Error("a rule inside rule 2's widened range is taken")
	}
	// Five variants of one condition overflow its index node.
	_, err = s.Plan([]Entry{{Slot: 8, ID: 8, Cond: ranged(40, 40)}}, nil)
	if want := "5 conditions at offset 0 of 3 bytes collide in one index bucket; the limit is 4"; err == nil || err.Error() != want {
		t.Errorf("a fifth variant: %v; want %q", err, want)
	}
}

// TestServiceIndexSharedNode makes two roots' children collide on one key:
// a change below either root must then rebuild everything.
func TestServiceIndexSharedNode(t *testing.T) {
	const rootLen = 8
	pa, pb := []byte("rootAAAA"), []byte("rootBBBB")
	ha, hb := FNV1a(FNVOffset, pa), FNV1a(FNVOffset, pb)
	// Birthday search for 9-byte extensions x, y with equal child hashes.
	rng := rand.New(rand.NewPCG(13, 14))
	seen := map[uint32][]byte{}
	var x, y []byte
	for i := uint64(0); x == nil; i++ {
		if i == 1<<22 {
			t.Fatal("no collision found")
		}
		ext := binary.LittleEndian.AppendUint64([]byte{'x'}, rng.Uint64())
		seen[FNV1a(ha, ext)] = ext
		ext = binary.LittleEndian.AppendUint64([]byte{'y'}, rng.Uint64())
		if other, ok := seen[FNV1a(hb, ext)]; ok {
			x, y = other, ext
		}
	}
	// The bare prefixes make the region 8 bytes long.
	es := []Entry{{Slot: 1, ID: 1, Cond: rule.Condition{Pattern: pa}}, {Slot: 2, ID: 2, Cond: rule.Condition{Pattern: pb}}}
	id := uint32(3)
	for _, side := range []struct{ prefix, ext []byte }{{pa, x}, {pb, y}} {
		exts := [][]byte{side.ext, []byte("filler-01"), []byte("filler-02"), []byte("filler-03"), []byte("filler-04")}
		for _, ext := range exts {
			es = append(es, Entry{Slot: id, ID: id, Cond: rule.Condition{Pattern: slices.Concat(side.prefix, ext)}})
			id++
		}
	}
	s := NewServiceIndex(rule.MaxRegions)
	c, err := s.Plan(es, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Apply(c)
	if len(s.shared) != 1 || len(s.regions) != 1 || s.regions[0].Len != rootLen {
		t.Fatalf("shared nodes %v, regions %v; want one shared node below 8-byte roots", s.shared, s.regions)
	}
	c, err = s.Plan([]Entry{{Slot: 99, ID: 99, Cond: rule.Condition{Pattern: []byte("rootAAAAanother")}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Full {
		t.Fatal("a change below a root with a shared node was planned as a partial rebuild")
	}
	s.Apply(c)
	checkAgainstFull(t, s)
}

// Replacing one rule among 100k whose conditions share their first bytes
// (a root of ~1,000 rules, as memcached keys with a common prefix make),
// with its condition kept (a new reply: one node rewritten) and with
// another one (its root's subtree rebuilt).
func BenchmarkServiceIndexReplace(b *testing.B) {
	const n = 100_000
	s := NewServiceIndex(rule.MaxRegions)
	cond := func(i int) rule.Condition {
		return rule.Condition{Offset: 8, Pattern: fmt.Appendf(nil, "get user:%012d\r\n", i)}
	}
	add := make([]Entry, n)
	for i := range add {
		add[i] = Entry{Slot: uint32(i + 1), ID: uint32(i), Cond: cond(i)}
	}
	c, err := s.Plan(add, nil)
	if err != nil {
		b.Fatal(err)
	}
	s.Apply(c)
	for _, bc := range []struct {
		name string
		cond func(id int, slot uint32) rule.Condition
	}{
		{"same-condition", func(id int, _ uint32) rule.Condition { return cond(id) }},
		{"new-condition", func(_ int, slot uint32) rule.Condition { return cond(n + int(slot)) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			slot := uint32(n + 1)
			for i := 0; b.Loop(); i++ {
				id := (i * 7919) % n
				e := Entry{Slot: slot, ID: uint32(id), Cond: bc.cond(id, slot)}
				slot++
				c, err := s.Plan([]Entry{e}, []uint32{uint32(id)})
				if err != nil {
					b.Fatal(err)
				}
				s.Apply(c)
			}
		})
	}
}
