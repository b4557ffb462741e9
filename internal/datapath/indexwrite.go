package datapath

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/santa-offload/santa/internal/parallel"
	"github.com/santa-offload/santa/internal/rules"
)

// Writing services' indexes into rule_index, whose positions indexTable
// (indextable.go) places.

// updateIndex turns a service's index from old into next: new entries first
// (nothing refers to them yet), then changed ones, so a reader always finds
// either node version of a key. A removed entry that new packets could still
// reach (walked: its level is one the new index walks) goes at once: its
// rules are gone. One reachable only through an old node is retired
// instead, deleted after a grace period, so readers that hold that old node
// still find it.
func (st *store) updateIndex(indexID uint32, old, next map[rules.IndexKey]rules.IndexNode,
	walked func(rules.IndexKey) bool) error {
	var added, changed []rules.IndexKey
	for k, n := range next {
		o, ok := old[k]
		switch {
		case !ok:
			added = append(added, k)
		case !nodesEqual(o, n):
			changed = append(changed, k)
		}
	}
	var reachable, unreachable []rules.IndexKey
	for k := range old {
		if _, ok := next[k]; ok {
			continue
		}
		if walked(k) {
			reachable = append(reachable, k)
		} else {
			unreachable = append(unreachable, k)
		}
	}
	for _, keys := range [][]rules.IndexKey{added, changed} {
		if err := st.putIndex(indexID, keys, next); err != nil {
			// Put back what was changed; drop what was added.
			st.putIndex(indexID, changed, old)
			st.deleteIndex(indexID, pick(added, next))
			return err
		}
	}
	st.retireIndex(indexID, unreachable)
	return st.deleteIndex(indexID, pick(reachable, old))
}

// putIndex writes the nodes at keys: in place for a key the table holds,
// else at a position placed for it. The batches are independent, so they
// go on every CPU: a million nodes take most of a second on one.
func (st *store) putIndex(indexID uint32, keys []rules.IndexKey, nodes map[rules.IndexKey]rules.IndexNode) error {
	positions := make([]uint32, len(keys))
	for i, k := range keys {
		key := indexKey(indexID, k)
		pos, ok := st.index.find(key)
		if !ok {
			var err error
			if pos, err = st.index.place(key); err != nil {
				return fmt.Errorf("writing index: %w", err)
			}
		}
		positions[i] = pos
	}
	return st.writeIndex(positions, func(i int) santaSantaIndexNode { return indexNode(nodes[keys[i]]) })
}

// deleteIndex removes a service's entries, ignoring keys already gone.
func (st *store) deleteIndex(indexID uint32, index map[rules.IndexKey]rules.IndexNode) error {
	keys := make([]santaSantaIndexKey, 0, len(index))
	for k := range index {
		keys = append(keys, indexKey(indexID, k))
	}
	return st.removeIndex(keys)
}

// removeIndex removes the entries of keys, ignoring keys already gone, and
// writes every position that changed as the table has it now (tombstone or
// free): a position freed after it was made a tombstone is written once.
func (st *store) removeIndex(keys []santaSantaIndexKey) error {
	changed := make(map[uint32]bool)
	for _, k := range keys {
		if pos, ok := st.index.find(k); ok {
			for _, p := range st.index.remove(pos) {
				changed[p] = true
			}
		}
	}
	positions := slices.Collect(maps.Keys(changed))
	return st.writeIndex(positions, func(int) santaSantaIndexNode { return santaSantaIndexNode{} })
}

// writeIndex writes the entry at each position: the key the table has
// there and node(i), i being the position's place in positions.
func (st *store) writeIndex(positions []uint32, node func(i int) santaSantaIndexNode) error {
	return errors.Join(parallel.Parts(len(positions), batchSize, func(lo, hi int) error {
		vs := make([]santaSantaIndexEntry, 0, batchSize)
		for start := lo; start < hi; start += batchSize {
			end := min(start+batchSize, hi)
			vs = vs[:0]
			for i := start; i < end; i++ {
				vs = append(vs, st.index.entry(positions[i], node(i)))
			}
			if _, err := st.objs.RuleIndex.BatchUpdate(positions[start:end], vs, nil); err != nil {
				return fmt.Errorf("writing index: %w", err)
			}
		}
		return nil
	})...)
}

func pick(keys []rules.IndexKey, from map[rules.IndexKey]rules.IndexNode) map[rules.IndexKey]rules.IndexNode {
	out := make(map[rules.IndexKey]rules.IndexNode, len(keys))
	for _, k := range keys {
		out[k] = from[k]
	}
	return out
}

func indexKey(indexID uint32, k rules.IndexKey) santaSantaIndexKey {
	return santaSantaIndexKey{IndexId: indexID, Hash: k.Hash, End: k.End, Region: k.Region}
}

func indexNode(n rules.IndexNode) santaSantaIndexNode {
	v := santaSantaIndexNode{NextEnd: n.NextEnd, HeadId: n.HeadID}
	copy(v.Slots[:], n.Slots)
	return v
}

func nodesEqual(a, b rules.IndexNode) bool {
	return indexNode(a) == indexNode(b)
}
