package datapath

import (
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
)

// slotGens counts, per rule slot, how many times the slot was freed for
// reuse (slot_gens, bpf/include/maps.h), through the map's memory, mapped.
// The TCP reply program notes a slot's count when it builds a reply; if
// TCP takes only part of the reply, it builds the rest later from the same
// slot only if the count is still the same: the slot still holds the body
// it held then, though its rule may have been replaced meanwhile.
type slotGens struct {
	mem []byte
}

// slotGenEntries is slot_gens's size for maxRules rules: a count for each
// slot number (0 to maxRules) of each of the 4 classes, two to an element.
func slotGenEntries(maxRules uint32) uint32 { return 2 * (maxRules + 1) }

func newSlotGens(m *ebpf.Map) (*slotGens, error) {
	mem, err := mapMemory(m)
	if err != nil {
		return nil, err
	}
	return &slotGens{mem: mem}, nil
}

// freed counts slot as freed. Called before the slot goes back to its
// pool: whatever writes it next comes after.
func (g *slotGens) freed(slot uint32) { atomic.AddUint32(g.of(slot), 1) }

// of is slot's count, in the mapped memory (santa_slot_gen): the counts
// lie one after another, 4 bytes each.
func (g *slotGens) of(slot uint32) *uint32 {
	at := slotNumber(slot)<<2 | uint32(slotClass(slot))
	return (*uint32)(unsafe.Pointer(&g.mem[at*4]))
}

func (g *slotGens) close() error { return unmapMemory(&g.mem) }
