package rules

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/santa-offload/santa/rule"
)

// IndexKey is struct santa_index_key without the service's index_id: the
// FNV-1a hash of payload[regions[Region].Off : End].
type IndexKey struct {
	Region uint8
	End    uint16
	Hash   uint32
}

// IndexNode is struct santa_index_node: up to NodeSlots rule slots, most
// specific first, all ending before NextEnd; every condition below the node
// is longer than all of them. NextEnd 0 marks a leaf. HeadID is the ID of
// the rule in Slots[0], the likeliest to answer: the data plane reads its
// counters while it waits for the rule itself.
type IndexNode struct {
	Slots   []uint32
	NextEnd uint16
	HeadID  uint32
}

// Entry is one rule's condition to index: Slot is where the data plane
// stores the rule, ID the stable rule id that breaks ties.
type Entry struct {
	Slot uint32
	ID   uint32
	Cond rule.Condition
}

// CheckDuplicates rejects two rules with the same condition, or with the
// same offset and pattern and length ranges that overlap: the data plane
// could answer only one of them, and enough of them would overflow a node.
func CheckDuplicates(entries []Entry) error {
	_, err := NewServiceIndex(rule.MaxRegions).checkDuplicates(entries, nil)
	return err
}

// DuplicateError names two rules with the same offset and pattern whose
// length ranges overlap: First's condition is Cond, Second's SecondCond.
type DuplicateError struct {
	First, Second uint32
	Cond          rule.Condition
	SecondCond    rule.Condition
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("rules %d and %d have the same condition (%s)", e.First, e.Second, DescribeOverlap(e.Cond, e.SecondCond))
}

// DescribeOverlap says what two overlapping conditions share: "3 bytes at
// offset 1", and the lengths when either has a range ("3 bytes at offset
// 1, request lengths 30-40 and 35-").
func DescribeOverlap(a, b rule.Condition) string {
	s := fmt.Sprintf("%d bytes at offset %d", len(a.Pattern), a.Offset)
	if a.HasLength() || b.HasLength() {
		s += fmt.Sprintf(", request lengths %s and %s", lengthOrAny(a), lengthOrAny(b))
	}
	return s
}

func lengthOrAny(c rule.Condition) string {
	if c.HasLength() {
		return c.LengthText()
	}
	return "any"
}

// RootKey is the key of the root node c is indexed under: the hash of c's
// first bytes over the region starting at c's offset. ok is false if no
// region starts there or c is shorter than that region.
func RootKey(regions []Region, c rule.Condition) (key IndexKey, ok bool) {
	ri := RegionOf(regions, c)
	if ri < 0 || len(c.Pattern) < int(regions[ri].Len) {
		return IndexKey{}, false
	}
	r := regions[ri]
	return IndexKey{Region: uint8(ri), End: r.Off + r.Len, Hash: FNV1a(FNVOffset, c.Pattern[:r.Len])}, true
}

// BuildIndex builds the hash trie the data plane walks. A node holds the
// conditions whose bytes hash to its key up to its End. A node with more
// than NodeSlots of them keeps the (at most NodeSlots) shortest ones, those
// ending before the fifth-smallest end, and hashes the others on to that end
// (at most MaxExtendLen bytes further) into children. Conditions sharing a
// long prefix thus spread over many nodes instead of piling into one bucket,
// and every condition below a node is longer than the ones it keeps, so the
// deepest full match in a region is the region's most specific one.
//
// Nodes are keys, not byte strings: conditions whose bytes differ but whose
// hashes collide share a node (the kernel cannot tell them apart either),
// and it lists them all for a full compare.
func BuildIndex(regions []Region, entries []Entry) (map[IndexKey]IndexNode, error) {
	b, err := buildIndex(regions, entries)
	if err != nil {
		return nil, err
	}
	return b.index, nil
}

// buildIndex builds the index and notes the nodes that hang below more than
// one root, which ServiceIndex cannot rebuild one root at a time.
func buildIndex(regions []Region, entries []Entry) (*indexBuilder, error) {
	if len(regions) > math.MaxUint8+1 {
		return nil, &rule.LimitError{Field: "number of regions", Value: len(regions), Limit: math.MaxUint8 + 1}
	}
	b := &indexBuilder{
		regions: regions,
		pending: map[uint16]map[IndexKey]*pendingNode{},
		// About one node per entry: sized once, not grown a million times.
		index:  make(map[IndexKey]IndexNode, len(entries)),
		byRoot: make(map[IndexKey][]Entry, len(entries)),
	}
	roots := make([]IndexKey, len(entries))
	// Root nodes per region, and where they end: their pending maps are
	// sized once.
	type rootLevel struct {
		end uint16
		n   int
	}
	perRegion := make([]rootLevel, len(regions))
	for i, e := range entries {
		if e.Slot == SlotNone {
			return nil, fmt.Errorf("rule %d: slot %d is reserved for the end of a slot list", e.ID, SlotNone)
		}
		if e.Cond.End() > rule.MaxCondEnd {
			return nil, fmt.Errorf("rule %d: %w", e.ID, &rule.LimitError{Field: "condition end (offset + pattern length)", Value: e.Cond.End(), Limit: rule.MaxCondEnd})
		}
		key, ok := RootKey(regions, e.Cond)
		if !ok {
			return nil, fmt.Errorf("rule %d: no region starts at offset %d and fits its %d-byte pattern",
				e.ID, e.Cond.Offset, len(e.Cond.Pattern))
		}
		roots[i] = key
		perRegion[key.Region] = rootLevel{key.End, perRegion[key.Region].n + 1}
		b.byRoot[key] = append(b.byRoot[key], e)
	}
	for _, l := range perRegion {
		if l.n > 0 {
			b.pendingAt(l.end, l.n)
		}
	}
	for i, e := range entries {
		b.add(roots[i], 0, e, roots[i], false)
	}
	// A child ends after its parent, so splitting nodes in order of End
	// gathers every entry of a node, whichever parents they come from,
	// before the node itself is split.
	for len(b.ends) > 0 {
		end := b.ends[0]
		b.ends = b.ends[1:]
		for key, n := range b.pending[end] {
			if err := b.split(key, n); err != nil {
				return nil, err
			}
		}
		delete(b.pending, end)
	}
	return b, nil
}

type pendingNode struct {
	entries []Entry
	depth   int      // the deepest level any parent puts it at
	root    IndexKey // the root it hangs below
	shared  bool     // it also hangs below another root: hashes collide
}

type indexBuilder struct {
	regions []Region
	pending map[uint16]map[IndexKey]*pendingNode // by End
	ends    []uint16                             // pending's keys, in order
	index   map[IndexKey]IndexNode
	shared  map[IndexKey]bool    // nodes below more than one root
	byRoot  map[IndexKey][]Entry // the entries below each root
}

// pendingAt is the pending nodes ending at end, made with room for n if
// there are none yet. (Only the ends in use are kept: a change of a few
// rules would otherwise walk every possible end.)
func (b *indexBuilder) pendingAt(end uint16, n int) map[IndexKey]*pendingNode {
	nodes := b.pending[end]
	if nodes == nil {
		nodes = make(map[IndexKey]*pendingNode, n)
		b.pending[end] = nodes
		at, _ := slices.BinarySearch(b.ends, end)
		b.ends = slices.Insert(b.ends, at, end)
	}
	return nodes
}

func (b *indexBuilder) add(key IndexKey, depth int, e Entry, root IndexKey, shared bool) {
	nodes := b.pendingAt(key.End, 0)
	n := nodes[key]
	if n == nil {
		n = &pendingNode{root: root}
		nodes[key] = n
	}
	n.entries = append(n.entries, e)
	n.depth = max(n.depth, depth)
	n.shared = n.shared || shared || n.root != root
}

// done records a finished node.
func (b *indexBuilder) done(key IndexKey, n *pendingNode, node IndexNode) {
	b.index[key] = node
	if n.shared {
		if b.shared == nil {
			b.shared = map[IndexKey]bool{}
		}
		b.shared[key] = true
	}
}

// split turns a pending node into an index node, passing the entries it
// cannot keep on to its children.
func (b *indexBuilder) split(key IndexKey, n *pendingNode) error {
	if len(n.entries) <= NodeSlots {
		b.done(key, n, nodeOf(n.entries, 0))
		return nil
	}
	off := int(b.regions[key.Region].Off)
	end := int(key.End)
	ends := make([]int, len(n.entries))
	for i, e := range n.entries {
		ends[i] = e.Cond.End()
	}
	slices.Sort(ends)
	next := min(ends[NodeSlots], end+MaxExtendLen)
	if next == end {
		return fmt.Errorf("%d conditions at offset %d of %d bytes collide in one index bucket; the limit is %d",
			countEqual(ends, end), off, end-off, NodeSlots)
	}
	if n.depth == MaxDepth {
		return fmt.Errorf("%d conditions at offset %d still share one index node after hashing bytes [%d, %d) "+
			"(too many of them are prefixes of one another); the limit is %d levels of %d conditions below the root",
			len(n.entries), off, off, end, MaxDepth, NodeSlots)
	}
	var kept []Entry
	for _, e := range n.entries {
		if e.Cond.End() < next {
			kept = append(kept, e)
			continue
		}
		h := FNV1a(key.Hash, e.Cond.Pattern[end-off:next-off])
		b.add(IndexKey{Region: key.Region, End: uint16(next), Hash: h}, n.depth+1, e, n.root, n.shared)
	}
	b.done(key, n, nodeOf(kept, uint16(next)))
	return nil
}

// nodeOf is the node holding entries, most specific first: longest
// pattern, then lowest ID, so the kernel can stop at the first slot that
// matches.
func nodeOf(entries []Entry, nextEnd uint16) IndexNode {
	slices.SortFunc(entries, func(a, b Entry) int {
		return cmp.Or(cmp.Compare(len(b.Cond.Pattern), len(a.Cond.Pattern)), cmp.Compare(a.ID, b.ID))
	})
	n := IndexNode{Slots: make([]uint32, len(entries)), NextEnd: nextEnd}
	for i, e := range entries {
		n.Slots[i] = e.Slot
	}
	if len(entries) > 0 {
		n.HeadID = entries[0].ID
	}
	return n
}

func countEqual(sorted []int, v int) int {
	n := 0
	for _, x := range sorted {
		if x == v {
			n++
		}
	}
	return n
}
