package rules

import (
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/santa-offload/santa/rule"
)

// checkIndex walks every entry's own path through the index as the kernel
// would for a payload equal to the entry's pattern, and checks the index's
// invariants: each entry sits in exactly one node, on its own path, at most
// MaxDepth levels down; no node has more than NodeSlots slots; slots are
// ordered most specific first; every slot ends before its node's NextEnd, so
// every condition in a child is longer than all those kept above it; and no
// node is unreachable. It returns the deepest level used.
func checkIndex(t *testing.T, regions []Region, entries []Entry, index map[IndexKey]IndexNode) int {
	t.Helper()
	bySlot := map[uint32]Entry{}
	for _, e := range entries {
		bySlot[e.Slot] = e
	}
	placed := map[uint32]int{}
	for key, n := range index {
		if len(n.Slots) > NodeSlots {
			t.Fatalf("node %+v has %d slots", key, len(n.Slots))
		}
		for i, s := range n.Slots {
			placed[s]++
			e := bySlot[s]
			if n.NextEnd != 0 && e.Cond.End() >= int(n.NextEnd) {
				t.Fatalf("node %+v keeps a condition ending at %d, not before its NextEnd %d", key, e.Cond.End(), n.NextEnd)
			}
			if i > 0 && !moreSpecificEntry(bySlot[n.Slots[i-1]], e) {
				t.Fatalf("node %+v slots are not ordered most specific first", key)
			}
		}
		if len(n.Slots) == 0 && n.NextEnd == 0 {
			t.Fatalf("node %+v is an empty leaf", key)
		}
		if len(n.Slots) > 0 && n.HeadID != bySlot[n.Slots[0]].ID {
			t.Fatalf("node %+v has head id %d; its first slot holds rule %d", key, n.HeadID, bySlot[n.Slots[0]].ID)
		}
	}
	visited := map[IndexKey]bool{}
	deepest := 0
	for _, e := range entries {
		if placed[e.Slot] != 1 {
			t.Fatalf("slot %d appears in %d nodes", e.Slot, placed[e.Slot])
		}
		key, ok := RootKey(regions, e.Cond)
		if !ok {
			t.Fatalf("no root key for %+v", e)
		}
		off := int(e.Cond.Offset)
		longestAbove := 0
		for depth := 0; ; depth++ {
			n, ok := index[key]
			if !ok {
				t.Fatalf("entry %d: no node %+v on its path", e.ID, key)
			}
			if depth > MaxDepth {
				t.Fatalf("entry %d lies below depth %d", e.ID, MaxDepth)
			}
			visited[key] = true
			if slices.Contains(n.Slots, e.Slot) {
				if len(e.Cond.Pattern) <= longestAbove {
					t.Fatalf("entry %d (%d bytes) is not longer than a condition kept above it (%d bytes)", e.ID, len(e.Cond.Pattern), longestAbove)
				}
				deepest = max(deepest, depth)
				break
			}
			if n.NextEnd == 0 || int(n.NextEnd) > e.Cond.End() {
				t.Fatalf("entry %d: path ends at node %+v without it", e.ID, key)
			}
			for _, s := range n.Slots {
				longestAbove = max(longestAbove, len(bySlot[s].Cond.Pattern))
			}
			key.Hash = FNV1a(key.Hash, e.Cond.Pattern[int(key.End)-off:int(n.NextEnd)-off])
			key.End = n.NextEnd
		}
	}
	if len(visited) != len(index) {
		t.Fatalf("%d of %d nodes are not on any entry's path", len(index)-len(visited), len(index))
	}
	return deepest
}

func moreSpecificEntry(a, b Entry) bool {
	la, lb := len(a.Cond.Pattern), len(b.Cond.Pattern)
	return la > lb || la == lb && a.ID < b.ID
}

func entriesOf(cs []rule.Condition) []Entry {
	es := make([]Entry, len(cs))
	for i, c := range cs {
		es[i] = Entry{Slot: uint32(i + 1), ID: uint32(1000 + i), Cond: c}
	}
	return es
}

func buildChecked(t *testing.T, cs []rule.Condition) (map[IndexKey]IndexNode, int) {
	t.Helper()
	regions, err := Regions(cs, rule.MaxRegions)
	if err != nil {
		t.Fatal(err)
	}
	es := entriesOf(cs)
	if err := CheckDuplicates(es); err != nil {
		t.Fatal(err)
	}
	index, err := BuildIndex(regions, es)
	if err != nil {
		t.Fatal(err)
	}
	return index, checkIndex(t, regions, es, index)
}

// TestIndexSharedPrefix is the case that hurt the paper: many conditions
// sharing a long prefix (DNS names, memcached keys) all land in one bucket.
func TestIndexSharedPrefix(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	prefix := strings.Repeat("p", 30)
	seen := map[string]bool{}
	var cs []rule.Condition
	for len(cs) < 10000 {
		tail := make([]byte, 1+rng.IntN(60))
		for i := range tail {
			tail[i] = 'a' + byte(rng.IntN(26))
		}
		p := prefix + string(tail)
		if !seen[p] {
			seen[p] = true
			cs = append(cs, rule.Condition{Offset: 0, Pattern: []byte(p)})
		}
	}
	index, depth := buildChecked(t, cs)
	if depth == 0 {
		t.Fatal("the shared prefix did not need a deeper level")
	}
	t.Logf("%d conditions: %d nodes, deepest level %d", len(cs), len(index), depth)
}

func TestIndexFigure3(t *testing.T) {
	cs := conds(0, "COMSYS", 0, "COM", 3, "SYS")
	index, depth := buildChecked(t, cs)
	// C1 and C2 share the root of region 0, C1 (longer) first and so the
	// head; C3 has region 1 to itself.
	want := map[IndexKey]IndexNode{
		{Region: 0, End: 3, Hash: FNV1a(FNVOffset, []byte("COM"))}: {Slots: []uint32{1, 2}, HeadID: 1000},
		{Region: 1, End: 6, Hash: FNV1a(FNVOffset, []byte("SYS"))}: {Slots: []uint32{3}, HeadID: 1002},
	}
	if depth != 0 || !maps.EqualFunc(index, want, func(a, b IndexNode) bool {
		return a.NextEnd == b.NextEnd && slices.Equal(a.Slots, b.Slots) && a.HeadID == b.HeadID
	}) {
		t.Fatalf("index %v; want %v", index, want)
	}
}

// nested returns n conditions at offset 0 that are prefixes of one another:
// the worst case for the index, each level can keep only NodeSlots of them.
func nested(n int) []rule.Condition {
	var cs []rule.Condition
	for i := 1; i <= n; i++ {
		cs = append(cs, rule.Condition{Pattern: []byte(strings.Repeat("a", i))})
	}
	return cs
}

func TestIndexDepthLimit(t *testing.T) {
	max := NodeSlots * (MaxDepth + 1)
	if _, depth := buildChecked(t, nested(max)); depth != MaxDepth {
		t.Fatalf("%d nested conditions reach depth %d; want %d", max, depth, MaxDepth)
	}
	cs := nested(max + 1)
	regions, _ := Regions(cs, rule.MaxRegions)
	_, err := BuildIndex(regions, entriesOf(cs))
	if err == nil || !strings.Contains(err.Error(), "the limit is 4 levels of 4 conditions below the root") {
		t.Fatalf("BuildIndex = %v; want a depth limit error", err)
	}
}

func TestIndexErrors(t *testing.T) {
	regions := []Region{{0, 3}}
	same := rule.Condition{Pattern: []byte("abcd")}
	five := make([]Entry, 5)
	for i := range five {
		five[i] = Entry{Slot: uint32(i + 1), ID: uint32(i), Cond: same}
	}
	tests := []struct {
		name    string
		regions []Region
		entries []Entry
		want    string
	}{
		{"bucket collision", regions, five, "5 conditions at offset 0 of 4 bytes collide in one index bucket; the limit is 4"},
		{"slot 0", regions, []Entry{{Slot: 0, ID: 7, Cond: same}}, "rule 7: slot 0 is reserved for the end of a slot list"},
		{"no region", regions, []Entry{{Slot: 1, ID: 7, Cond: rule.Condition{Offset: 1, Pattern: []byte("abc")}}},
			"rule 7: no region starts at offset 1 and fits its 3-byte pattern"},
		{"shorter than region", regions, []Entry{{Slot: 1, ID: 7, Cond: rule.Condition{Pattern: []byte("ab")}}},
			"rule 7: no region starts at offset 0 and fits its 2-byte pattern"},
		{"beyond MaxCondEnd", []Region{{1020, 3}}, []Entry{{Slot: 1, ID: 7, Cond: rule.Condition{Offset: 1020, Pattern: []byte("abcde")}}},
			"rule 7: condition end (offset + pattern length) is 1025; the limit is 1024"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := BuildIndex(tt.regions, tt.entries)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("BuildIndex = %v; want %q", err, tt.want)
			}
		})
	}
}

// TestIndexCollisionsShareNodes puts conditions whose different bytes hash
// alike into one node, at the root and (since FNV-1a continues from equal
// states) at every level below.
func TestIndexCollisionsShareNodes(t *testing.T) {
	var cs []rule.Condition
	for _, w := range []string{collideA, collideB} {
		for i := range 6 {
			cs = append(cs, rule.Condition{Pattern: []byte(w + strings.Repeat("z", i+1))})
		}
	}
	index, depth := buildChecked(t, cs)
	root := index[IndexKey{Region: 0, End: 10, Hash: FNV1a(FNVOffset, []byte(collideA+"z"))}]
	// Slots 1 and 7 are the 10-byte conditions of either word.
	if depth == 0 || !slices.Contains(root.Slots, 1) || !slices.Contains(root.Slots, 7) {
		t.Fatalf("depth %d, root %+v; want one shared root keeping both 10-byte conditions", depth, root)
	}
}

func TestCheckDuplicates(t *testing.T) {
	es := []Entry{
		{Slot: 1, ID: 3, Cond: rule.Condition{Offset: 0, Pattern: []byte("abc")}},
		{Slot: 2, ID: 4, Cond: rule.Condition{Offset: 1, Pattern: []byte("abc")}},
		{Slot: 3, ID: 5, Cond: rule.Condition{Offset: 0, Pattern: []byte("abcd")}},
	}
	if err := CheckDuplicates(es); err != nil {
		t.Fatalf("distinct conditions: %v", err)
	}
	es = append(es, Entry{Slot: 4, ID: 9, Cond: rule.Condition{Offset: 1, Pattern: []byte("abc")}})
	err := CheckDuplicates(es)
	if want := "rules 4 and 9 have the same condition (3 bytes at offset 1)"; err == nil || err.Error() != want {
		t.Fatalf("CheckDuplicates = %v; want %q", err, want)
	}
}
