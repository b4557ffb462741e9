package datapath

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"unsafe"

	"github.com/cilium/ebpf"
)

// rule_index is an open-addressing table in a plain BPF array (maps.h):
// an entry lies at its key's home position or up to indexProbes-1
// positions after it (linear probing), and a probe stops at a free
// position. User space decides every position; indexTable is its copy of
// which key lies where.
//
// A deleted entry becomes a tombstone, which probes go on past, so no
// other entry ever moves: a reader never misses a live entry because of
// someone else's change. A tombstone followed by a free position is freed
// (no probe needs to pass it), so tombstones do not pile up at the ends of
// runs. The table has four positions per possible entry: at a load of 1/4,
// linear probing takes about 1.2 positions for a hit and 1.4 for a miss.
type indexTable struct {
	keys []santaSantaIndexKey // by position; IndexId 0: free, indexTomb: deleted
}

const (
	indexProbes = uint32(santaSantaIndexLayoutSANTA_INDEX_PROBES)
	indexTomb   = uint32(santaSantaIndexLayoutSANTA_INDEX_TOMB)
	// maxIndexPositions keeps the table's size a power of two in 32 bits.
	maxIndexPositions = 1 << 31
)

var errIndexCrowded = errors.New("the rule index has no free position near this key's home")

// indexPositions is the table size for maxEntries entries: a power of two,
// four positions per entry.
func indexPositions(maxEntries uint32) uint32 {
	want := uint64(maxEntries) * 4
	if want >= maxIndexPositions {
		return maxIndexPositions
	}
	return 1 << bits.Len64(want-1)
}

// newIndexTable makes a table of positions, every page of it written
// once now. The kernel's rule_index is allocated in full when it is made;
// this copy, left to the first write of each page, took a page fault for
// each page a new key landed on, and new keys come in bursts while an
// agent installs thousands of rules a second on a busy server: in a VM,
// up to a quarter of santad's time while an agent learned 1M names
// (docs/benchmarks.md (h), "santad's garbage").
func newIndexTable(positions uint32) *indexTable {
	t := &indexTable{keys: make([]santaSantaIndexKey, positions)}
	perPage := max(1, os.Getpagesize()/int(unsafe.Sizeof(santaSantaIndexKey{})))
	for i := 0; i < len(t.keys); i += perPage {
		t.keys[i].IndexId = 0
	}
	t.keys[len(t.keys)-1].IndexId = 0 // the last page, wherever the stride ends
	return t
}

func (t *indexTable) mask() uint32 { return uint32(len(t.keys) - 1) }

// setMask tells a program spec that probes the table its size.
func (t *indexTable) setMask(spec *ebpf.CollectionSpec) error {
	if err := spec.Variables["santa_index_mask"].Set(t.mask()); err != nil {
		return fmt.Errorf("setting the rule index's size: %w", err)
	}
	return nil
}

// indexHome is santa_index_home (match.h): where a key's probe starts.
func indexHome(k santaSantaIndexKey) uint32 {
	h := k.Hash ^ (k.IndexId * 0x9e3779b1) ^ ((uint32(k.End)<<8 | uint32(k.Region)) * 0x85ebca77)
	h ^= h >> 15
	h *= 0x2c1b3c6d
	h ^= h >> 12
	return h
}

// find tells where k lies, probing as the data plane does.
func (t *indexTable) find(k santaSantaIndexKey) (uint32, bool) {
	home := indexHome(k)
	for i := range indexProbes {
		pos := (home + i) & t.mask()
		switch t.keys[pos].IndexId {
		case 0:
			return 0, false
		case k.IndexId:
			if t.keys[pos] == k {
				return pos, true
			}
		}
	}
	return 0, false
}

// place gives k, which the table does not hold, the first free or deleted
// position of its probe.
func (t *indexTable) place(k santaSantaIndexKey) (uint32, error) {
	if k.IndexId == 0 || k.IndexId == indexTomb {
		return 0, fmt.Errorf("index id %#x is reserved", k.IndexId)
	}
	home := indexHome(k)
	for i := range indexProbes {
		pos := (home + i) & t.mask()
		if id := t.keys[pos].IndexId; id == 0 || id == indexTomb {
			t.keys[pos] = k
			return pos, nil
		}
	}
	return 0, fmt.Errorf("%w (%d positions from %#x)", errIndexCrowded, indexProbes, home&t.mask())
}

// remove deletes the entry at pos, and returns the positions whose
// contents changed: pos itself (tombstone or free), and the tombstones
// before it that are freed with it.
func (t *indexTable) remove(pos uint32) []uint32 {
	t.keys[pos] = santaSantaIndexKey{IndexId: indexTomb}
	changed := []uint32{pos}
	if t.keys[(pos+1)&t.mask()].IndexId != 0 {
		return changed
	}
	// The run ends after pos: free it and the tombstones just before it.
	for p, n := pos, 0; n < len(t.keys) && t.keys[p].IndexId == indexTomb; p, n = (p-1)&t.mask(), n+1 {
		t.keys[p] = santaSantaIndexKey{}
		if p != pos {
			changed = append(changed, p)
		}
	}
	return changed
}

// entry is what the data plane reads at pos.
func (t *indexTable) entry(pos uint32, node santaSantaIndexNode) santaSantaIndexEntry {
	return santaSantaIndexEntry{Key: t.keys[pos], Node: node}
}
