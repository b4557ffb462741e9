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
	nextID, fulls := uint32(1), 0
	cond := func() rule.Condition {
		// Few offsets and a shared prefix: roots are shared, subtrees deep,
		// and now and then a shorter pattern changes the regions.
		p := fmt.Appendf(nil, "prefix-%d-%d", rng.IntN(40), rng.IntN(1000))
		return rule.Condition{Offset: uint16(rng.IntN(3) * 40), Pattern: p[:min(len(p), 9+rng.IntN(8))]}
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
			if i%2 == 0 { // replaced: same id, new condition and slot
				add = append(add, Entry{Slot: nextID, ID: id, Cond: cond()})
				nextID++
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
