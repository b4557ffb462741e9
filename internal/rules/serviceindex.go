package rules

import (
	"bytes"
	"fmt"
	"maps"
	"slices"

	"github.com/santa-offload/santa/internal/maputil"
	"github.com/santa-offload/santa/rule"
)

// ServiceIndex is one service's indexed conditions, kept up to date change
// by change. The index is a forest: a root's subtree depends only on the
// conditions below that root, so a change rebuilds just the roots it
// touches and costs O(changed rules), not O(installed rules). It falls back
// to a full build when the regions change, or when a touched subtree shares
// a node with another root (a hash collision deeper down).
//
// Plan computes a change without modifying anything; Apply makes it the
// current state once the data plane holds it.
type ServiceIndex struct {
	maxRegions int
	entries    map[uint32]Entry       // by rule id
	conds      condIDs                // rule ids by condition, for duplicates
	lens       map[uint16]map[int]int // offset -> pattern length -> rules
	regions    []Region               // as the data plane has them
	index      map[IndexKey]IndexNode // as the data plane has it
	byRoot     map[IndexKey][]Entry   // the entries below each root
	shared     map[IndexKey]bool      // nodes below more than one root
	levels     map[indexLevel]int     // how many nodes make each level walked
}

// indexLevel is where the data plane looks up nodes: a region and an end.
type indexLevel struct {
	region uint8
	end    uint16
}

// NewServiceIndex returns an empty index allowing maxRegions regions.
func NewServiceIndex(maxRegions int) *ServiceIndex {
	return &ServiceIndex{
		maxRegions: maxRegions,
		entries:    map[uint32]Entry{},
		conds:      newCondIDs(0),
		lens:       map[uint16]map[int]int{},
		index:      map[IndexKey]IndexNode{},
		byRoot:     map[IndexKey][]Entry{},
		levels:     map[indexLevel]int{},
	}
}

// IndexChange is a planned change. With Full, Index is a whole new index
// for Regions, to be written as a new generation; otherwise Index holds the
// new nodes of the touched roots and Old the nodes they replace.
type IndexChange struct {
	Regions []Region
	Full    bool
	Index   map[IndexKey]IndexNode
	Old     map[IndexKey]IndexNode

	add     []Entry
	conds   condIDs // the added conditions, keyed once for Apply
	remove  []uint32
	built   *indexBuilder
	touched map[IndexKey]bool
	moved   map[IndexKey][]Entry // !Full: rules that only changed slot, by untouched root
	levels  map[indexLevel]int   // !Full: the change of s.levels
}

// Regions are the service's current regions.
func (s *ServiceIndex) Regions() []Region { return s.regions }

// Keys lists every node of the current index.
func (s *ServiceIndex) Keys() []IndexKey { return slices.Collect(maps.Keys(s.index)) }

// Has reports whether the current index holds a node at k.
func (s *ServiceIndex) Has(k IndexKey) bool {
	_, ok := s.index[k]
	return ok
}

// Plan indexes the service's conditions without the rules in remove and
// with the entries in add (a replaced rule is in both).
func (s *ServiceIndex) Plan(add []Entry, remove []uint32) (*IndexChange, error) {
	removing := make(map[uint32]bool, len(remove))
	for _, id := range remove {
		if _, ok := s.entries[id]; !ok {
			return nil, fmt.Errorf("rule %d is not indexed", id)
		}
		removing[id] = true
	}
	// The duplicate check and the index build only read the index: side by
	// side, they take half the time at a million rules.
	var conds condIDs
	var dupErr error
	checked := make(chan struct{})
	go func() {
		defer close(checked)
		conds, dupErr = s.checkDuplicates(add, removing)
	}()
	c, err := s.plan(add, remove, removing)
	<-checked
	if dupErr != nil {
		return nil, dupErr
	}
	if err != nil {
		return nil, err
	}
	c.conds = conds
	return c, nil
}

// plan is Plan without the duplicate check.
func (s *ServiceIndex) plan(add []Entry, remove []uint32, removing map[uint32]bool) (*IndexChange, error) {
	regions, err := s.plannedRegions(add, remove)
	if err != nil {
		return nil, err
	}
	c := &IndexChange{Regions: regions, add: add, remove: remove}
	if slices.Equal(regions, s.regions) {
		if ok, err := s.planTouched(c, removing); ok || err != nil {
			return c, err
		}
	}
	return c, s.planFull(c, removing)
}

// checkDuplicates refuses a condition that overlaps another added one, or
// one of a rule kept: the same offset and pattern, and length ranges that
// share a length (rule.Condition.Overlaps). It returns the added
// conditions' rule ids by key.
func (s *ServiceIndex) checkDuplicates(add []Entry, removing map[uint32]bool) (condIDs, error) {
	fresh := newCondIDs(len(add))
	// The added entries by id, made once a key comes twice in add: only
	// then is an added rule's condition looked up.
	var added map[uint32]int
	for i, e := range add {
		k := keyOf(e.Cond)
		var dup *DuplicateError
		clash := func(c rule.Condition, id uint32) bool {
			if c.Overlaps(e.Cond) {
				dup = &DuplicateError{First: id, Second: e.ID, Cond: c, SecondCond: e.Cond}
			}
			return dup == nil
		}
		if fresh.has(k) {
			if added == nil {
				added = make(map[uint32]int, len(add))
				for j := range i {
					added[add[j].ID] = j
				}
			}
			fresh.each(k, func(id uint32) bool { return clash(add[added[id]].Cond, id) })
		}
		s.conds.each(k, func(id uint32) bool { return removing[id] || clash(s.entries[id].Cond, id) })
		if dup != nil {
			return condIDs{}, dup
		}
		fresh.add(k, e.ID)
		if added != nil {
			added[e.ID] = i
		}
	}
	return fresh, nil
}

// plannedRegions are the regions after the change: only the shortest
// pattern at each offset matters, so the change is counted per length.
func (s *ServiceIndex) plannedRegions(add []Entry, remove []uint32) ([]Region, error) {
	delta := map[uint16]map[int]int{}
	count := func(c rule.Condition, n int) {
		if len(c.Pattern) == 0 {
			return
		}
		if delta[c.Offset] == nil {
			delta[c.Offset] = map[int]int{}
		}
		delta[c.Offset][len(c.Pattern)] += n
	}
	for _, id := range remove {
		count(s.entries[id].Cond, -1)
	}
	for _, e := range add {
		if len(e.Cond.Pattern) == 0 {
			return nil, fmt.Errorf("rule %d: condition at offset %d has an empty pattern", e.ID, e.Cond.Offset)
		}
		count(e.Cond, 1)
	}
	shortest := map[uint16]int{}
	for off := range s.lens {
		if _, changed := delta[off]; !changed {
			shortest[off] = s.shortestAt(off, nil)
		}
	}
	for off, d := range delta {
		if n := s.shortestAt(off, d); n > 0 {
			shortest[off] = n
		}
	}
	return regionsOf(shortest, s.maxRegions)
}

// shortestAt is the shortest pattern length at off after adding delta, or
// 0 if no pattern is left there.
func (s *ServiceIndex) shortestAt(off uint16, delta map[int]int) int {
	shortest := 0
	for _, counts := range []map[int]int{s.lens[off], delta} {
		for n := range counts {
			if s.lens[off][n]+delta[n] > 0 && (shortest == 0 || n < shortest) {
				shortest = n
			}
		}
	}
	return shortest
}

// planTouched rebuilds the subtrees of the roots the change touches. A
// replaced rule whose offset and pattern stay (a new reply, or a new length
// range) touches no root: it keeps its place in its node, under its new
// slot (movedSlots). It returns false if it cannot: a node it would write is
// shared with, or already belongs to, a root it does not rebuild.
func (s *ServiceIndex) planTouched(c *IndexChange, removing map[uint32]bool) (bool, error) {
	c.touched = map[IndexKey]bool{}
	moved := map[uint32]bool{}
	for _, e := range c.add {
		if old, ok := s.entries[e.ID]; ok && removing[e.ID] && samePlace(old.Cond, e.Cond) {
			moved[e.ID] = true
		}
	}
	for _, id := range c.remove {
		if !moved[id] {
			key, _ := RootKey(s.regions, s.entries[id].Cond)
			c.touched[key] = true
		}
	}
	roots := make([]IndexKey, len(c.add))
	for i, e := range c.add {
		var ok bool
		if roots[i], ok = RootKey(s.regions, e.Cond); !ok {
			return false, nil // a full build names the rule in its error
		}
		if !moved[e.ID] {
			c.touched[roots[i]] = true
		}
	}
	var entries []Entry
	c.Old = map[IndexKey]IndexNode{}
	for root := range c.touched {
		for _, e := range s.byRoot[root] {
			if !removing[e.ID] {
				entries = append(entries, e)
			}
			for _, k := range s.path(root, e.Cond) {
				if s.shared[k] {
					return false, nil
				}
				c.Old[k] = s.index[k]
			}
		}
	}
	for i, e := range c.add {
		if c.touched[roots[i]] {
			entries = append(entries, e)
		}
	}
	b, err := buildIndex(s.regions, entries)
	if err != nil {
		return false, err
	}
	for k := range b.index {
		if _, mine := c.Old[k]; !mine {
			if _, taken := s.index[k]; taken {
				return false, nil
			}
		}
	}
	c.Index, c.built = b.index, b
	if !s.movedSlots(c, roots, moved) {
		return false, nil
	}
	c.levels = map[indexLevel]int{}
	countLevels(c.levels, c.Old, -1)
	countLevels(c.levels, c.Index, 1)
	return true, nil
}

// movedSlots writes the new slot of each moved rule below a root the change
// does not rebuild into a copy of the node that holds it (one node: same
// key, same order, since the order is by pattern length and id). Moved rules
// below rebuilt roots were rebuilt with them. It returns false if a node is
// not as the index says.
func (s *ServiceIndex) movedSlots(c *IndexChange, roots []IndexKey, moved map[uint32]bool) bool {
	c.moved = map[IndexKey][]Entry{}
	for i, e := range c.add {
		root := roots[i]
		if !moved[e.ID] || c.touched[root] {
			continue
		}
		path := s.path(root, e.Cond)
		if len(path) == 0 {
			return false
		}
		k := path[len(path)-1]
		node, ok := c.Index[k]
		if !ok {
			node = s.index[k]
			node.Slots = slices.Clone(node.Slots)
		}
		at := slices.Index(node.Slots, s.entries[e.ID].Slot)
		if at < 0 {
			return false
		}
		node.Slots[at] = e.Slot
		c.Old[k], c.Index[k] = s.index[k], node
		c.moved[root] = append(c.moved[root], e)
	}
	return true
}

// samePlace: conditions with the same offset and pattern sit at the same
// place in the index (a length range is checked against the rule itself).
func samePlace(a, b rule.Condition) bool {
	return a.Offset == b.Offset && bytes.Equal(a.Pattern, b.Pattern)
}

func (s *ServiceIndex) planFull(c *IndexChange, removing map[uint32]bool) error {
	entries := make([]Entry, 0, len(s.entries)+len(c.add))
	for id, e := range s.entries {
		if !removing[id] {
			entries = append(entries, e)
		}
	}
	entries = append(entries, c.add...)
	b, err := buildIndex(c.Regions, entries)
	if err != nil {
		return err
	}
	c.Full, c.Index, c.Old, c.built = true, b.index, nil, b
	c.touched, c.moved, c.levels = nil, nil, nil
	return nil
}

// countLevels adds n for the level of every node and of every node's
// children to levels.
func countLevels(levels map[indexLevel]int, nodes map[IndexKey]IndexNode, n int) {
	for k, node := range nodes {
		levels[indexLevel{k.Region, k.End}] += n
		if node.NextEnd != 0 {
			levels[indexLevel{k.Region, node.NextEnd}] += n
		}
	}
}

// Walked reports whether, after c, the data plane looks up keys at this
// region and end: a node dropped from such a level must go at once, since
// new packets could still find it.
func (s *ServiceIndex) Walked(c *IndexChange, k IndexKey) bool {
	l := indexLevel{k.Region, k.End}
	if c.Full {
		return false // a new generation: nothing reaches the old one's keys
	}
	return s.levels[l]+c.levels[l] > 0
}

// Apply makes a planned change current. Changes must be applied in the
// order they were planned, each planned against the state before it, and
// each once: the index may take over the change's maps.
func (s *ServiceIndex) Apply(c *IndexChange) {
	for _, id := range c.remove {
		e := s.entries[id]
		delete(s.entries, id)
		s.conds.remove(keyOf(e.Cond), id)
		s.countLen(e.Cond, -1)
	}
	s.entries = maputil.Reserve(s.entries, len(c.add))
	for _, e := range c.add {
		s.entries[e.ID] = e
		s.countLen(e.Cond, 1)
	}
	// Plan keyed the added conditions already (a million string keys take
	// a second to build): a first install adopts its map.
	if len(s.conds.first) == 0 {
		s.conds = c.conds
	} else {
		s.conds.merge(c.conds)
	}
	s.regions = c.Regions
	if c.Full {
		s.index, s.shared, s.byRoot = c.built.index, c.built.shared, c.built.byRoot
		s.levels = map[indexLevel]int{}
		countLevels(s.levels, s.index, 1)
	} else {
		for k := range c.Old {
			delete(s.index, k)
		}
		maps.Copy(s.index, c.Index)
		for k := range c.built.shared {
			s.sharedNode(k)
		}
		for l, n := range c.levels {
			if s.levels[l] += n; s.levels[l] == 0 {
				delete(s.levels, l)
			}
		}
		for root := range c.touched {
			delete(s.byRoot, root)
		}
		maps.Copy(s.byRoot, c.built.byRoot)
		for root, moved := range c.moved {
			below := s.byRoot[root]
			for _, e := range moved {
				below[slices.IndexFunc(below, func(b Entry) bool { return b.ID == e.ID })] = e
			}
		}
	}
}

// path lists the nodes a condition below root passes through, as the data
// plane walks them: every node of a root's subtree is on some entry's path.
func (s *ServiceIndex) path(root IndexKey, c rule.Condition) []IndexKey {
	var keys []IndexKey
	off := int(s.regions[root.Region].Off)
	for key := root; ; {
		n, ok := s.index[key]
		if !ok {
			return keys
		}
		keys = append(keys, key)
		if n.NextEnd == 0 || c.End() < int(n.NextEnd) {
			return keys
		}
		h := FNV1a(key.Hash, c.Pattern[int(key.End)-off:int(n.NextEnd)-off])
		key = IndexKey{Region: key.Region, End: n.NextEnd, Hash: h}
	}
}

func (s *ServiceIndex) sharedNode(k IndexKey) {
	if s.shared == nil {
		s.shared = map[IndexKey]bool{}
	}
	s.shared[k] = true
}

func (s *ServiceIndex) countLen(c rule.Condition, n int) {
	counts := s.lens[c.Offset]
	if counts == nil {
		counts = map[int]int{}
		s.lens[c.Offset] = counts
	}
	if counts[len(c.Pattern)] += n; counts[len(c.Pattern)] == 0 {
		delete(counts, len(c.Pattern))
	}
	if len(counts) == 0 {
		delete(s.lens, c.Offset)
	}
}
