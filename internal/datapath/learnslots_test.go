package datapath

import (
	"testing"

	"github.com/cilium/ebpf"
)

// Slots are taken until none is free; one given up is free again only
// after two steps (a whole window), and a slot taken again starts where
// its new key's count does.
func TestLearnSlots(t *testing.T) {
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 2, Flags: 1024 /* BPF_F_MMAPABLE */})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := newSlots(m)
	if err != nil {
		t.Fatal(err)
	}
	a, okA := s.take()
	b, okB := s.take()
	if _, ok := s.take(); !okA || !okB || a == b || ok {
		t.Fatalf("took %d (%v), %d (%v) and a third (%v) of 2 slots", a, okA, b, okB, ok)
	}
	if err := s.start(a, 7); err != nil {
		t.Fatal(err)
	}
	if err := m.Update(b, uint64(40), ebpf.UpdateExist); err != nil { // the data plane counts
		t.Fatal(err)
	}
	if err := s.read(); err != nil || s.passes(a) != 7 || s.passes(b) != 40 {
		t.Fatalf("read %d and %d (%v); want 7 and 40", s.passes(a), s.passes(b), err)
	}
	s.give(b)
	s.step()
	if _, ok := s.take(); ok {
		t.Fatal("a slot given up is free within the window")
	}
	s.step()
	c, ok := s.take()
	if !ok || c != b {
		t.Fatalf("after two steps took %d (%v); want %d", c, ok, b)
	}
	if err := s.start(c, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.read(); err != nil || s.passes(c) != 0 {
		t.Fatalf("a slot taken again reads %d (%v); want 0", s.passes(c), err)
	}
	// Over steps, every slot is in use, free, waiting or given up, once.
	inUse := map[uint32]bool{a: true, c: true}
	for step := range 6 {
		for slot := range inUse {
			if step%2 == 0 {
				s.give(slot)
				delete(inUse, slot)
			}
		}
		s.step()
		if slot, ok := s.take(); ok {
			inUse[slot] = true
		}
		seen := map[uint32]int{}
		for _, l := range [][]uint32{s.free, s.waiting, s.given} {
			for _, slot := range l {
				seen[slot]++
			}
		}
		for slot := range inUse {
			seen[slot]++
		}
		if len(seen) != 2 || seen[0] != 1 || seen[1] != 1 {
			t.Fatalf("step %d: slots seen %v (in use %v, free %v, waiting %v, given %v); want each of 0 and 1 once",
				step, seen, inUse, s.free, s.waiting, s.given)
		}
	}
}
