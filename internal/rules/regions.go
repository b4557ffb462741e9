package rules

import (
	"fmt"
	"maps"
	"slices"

	"github.com/santa-offload/santa/rule"
)

// Region is a hashed range of the request payload: [Off, Off+Len).
type Region struct {
	Off, Len uint16
}

// Regions picks the payload ranges the data plane hashes (paper, section
// 2.2): one region per distinct condition offset, so a request costs one
// hash per offset rather than one per condition. The region at offset o is
// as long as the shortest pattern starting at o, cut so that it ends before
// the next offset (regions never overlap) and at MaxRegionLen bytes. Every
// pattern at o is therefore at least as long as its region.
func Regions(conds []rule.Condition, maxRegions int) ([]Region, error) {
	shortest := map[uint16]int{}
	for _, c := range conds {
		if len(c.Pattern) == 0 {
			return nil, fmt.Errorf("condition at offset %d has an empty pattern", c.Offset)
		}
		if n, ok := shortest[c.Offset]; !ok || len(c.Pattern) < n {
			shortest[c.Offset] = len(c.Pattern)
		}
	}
	return regionsOf(shortest, maxRegions)
}

// regionsOf turns the shortest pattern length at each offset into regions.
func regionsOf(shortest map[uint16]int, maxRegions int) ([]Region, error) {
	if len(shortest) > maxRegions {
		return nil, &rule.LimitError{Field: "number of distinct condition offsets", Value: len(shortest), Limit: maxRegions}
	}
	offs := slices.Sorted(maps.Keys(shortest))
	regions := make([]Region, len(offs))
	for i, off := range offs {
		n := min(shortest[off], MaxRegionLen)
		if i+1 < len(offs) {
			n = min(n, int(offs[i+1]-off))
		}
		regions[i] = Region{Off: off, Len: uint16(n)}
	}
	return regions, nil
}

// RegionOf is the index of the region a condition belongs to, the one
// starting at its offset; -1 if there is none. regions must be sorted by
// offset, as Regions returns them.
func RegionOf(regions []Region, c rule.Condition) int {
	i, ok := slices.BinarySearchFunc(regions, c.Offset, func(r Region, off uint16) int {
		return int(r.Off) - int(off)
	})
	if !ok {
		return -1
	}
	return i
}
