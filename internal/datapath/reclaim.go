package datapath

import (
	"slices"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/rules"
)

// Reclaiming rule slots. A slot that no index node refers to any more may
// still be read by a program that found it just before: it is reused only
// after a barrier (an RCU grace period). Index entries likewise: a program
// may have read the node or service that led to them. The wait happens in the background,
// so an update returns as soon as the data plane sees it.

// retiredRules are what the data plane no longer reaches but an in-flight
// program may still read: rule slots, index entries (of an old generation,
// or dropped from a live one), and ids of deleted rules, whose counters such
// a program may still bump.
type retiredRules struct {
	slots []uint32
	index []santaSantaIndexKey
	ids   []model.RuleID
}

// retire queues rules that the index no longer reaches. Called with st.mu held.
func (st *store) retire(old []*installedRule, releaseIDs bool) {
	for _, r := range old {
		st.pending.slots = append(st.pending.slots, r.slot)
		if releaseIDs {
			delete(st.rules, r.id)
			st.pending.ids = append(st.pending.ids, r.id)
		}
	}
	st.wakeReclaimer()
}

// retireIndex queues index entries for deletion after a grace period.
// Called with st.mu held.
func (st *store) retireIndex(indexID uint32, keys []rules.IndexKey) {
	for _, k := range keys {
		st.pending.index = append(st.pending.index, indexKey(indexID, k))
	}
	st.wakeReclaimer()
}

func (st *store) wakeReclaimer() {
	if len(st.pending.slots)+len(st.pending.index) > 0 {
		select {
		case st.kick <- struct{}{}:
		default: // a wake-up is already queued
		}
	}
}

// reclaimLoop runs until kick (st.kick when it started) is closed, then
// reclaims what is left.
func (st *store) reclaimLoop(kick <-chan struct{}) {
	defer close(st.reclaimed)
	for range kick {
		st.reclaim()
	}
	st.reclaim()
}

// reclaim waits for a grace period, then frees what was retired before it.
func (st *store) reclaim() {
	st.mu.Lock()
	batch := st.pending
	st.pending, st.waiting = retiredRules{}, batch.index
	st.mu.Unlock()
	if len(batch.slots)+len(batch.index) == 0 {
		return
	}
	if err := st.barrier.Wait(); err != nil {
		// Without a grace period nothing can be freed safely: keep it queued.
		st.mu.Lock()
		st.waiting = nil
		st.pending.slots = append(st.pending.slots, batch.slots...)
		st.pending.index = append(st.pending.index, batch.index...)
		st.pending.ids = append(st.pending.ids, batch.ids...)
		st.mu.Unlock()
		return
	}
	st.deleteBodies(batch.slots)

	st.mu.Lock()
	defer st.mu.Unlock()
	st.waiting = nil
	st.removeIndex(st.unusedIndexKeys(batch.index))
	for _, s := range batch.slots {
		st.gens.freed(s)
		st.freeSlot(s)
	}
	for _, id := range batch.ids {
		// Zeroed here, once no program can bump them, so that adding a
		// rule never waits for it. An id whose counters stay is not reused.
		if st.resetRuleStats(id) == nil {
			st.ruleIDs.put(uint32(id))
		}
	}
}

// deleteRetiredReached deletes at once the retired index entries of svc
// that change would let new packets reach: those at a level the changed
// index walks again (a node put back above them), which the change does not
// write itself. Found, such an entry would answer with the rules it held
// when it was retired: old versions of replaced rules, deleted ones.
// Called with st.mu held, before the change is written.
func (st *store) deleteRetiredReached(svc *service, change *rules.IndexChange) error {
	var reached []santaSantaIndexKey
	for _, k := range slices.Concat(st.pending.index, st.waiting) {
		ik := rules.IndexKey{Region: k.Region, End: k.End, Hash: k.Hash}
		if k.IndexId != svc.indexID || svc.index.Has(ik) {
			continue // another index's, or written again since
		}
		if _, written := change.Index[ik]; !written && svc.index.Walked(change, ik) {
			reached = append(reached, k)
		}
	}
	return st.removeIndex(reached)
}

// unusedIndexKeys drops the keys that a live index has written again since
// they were retired. Called with st.mu held.
func (st *store) unusedIndexKeys(keys []santaSantaIndexKey) []santaSantaIndexKey {
	live := make(map[uint32]*service, len(st.services))
	for _, s := range st.services {
		live[s.indexID] = s
	}
	out := keys[:0]
	for _, k := range keys {
		if s, ok := live[k.IndexId]; ok {
			if s.index.Has(rules.IndexKey{Region: k.Region, End: k.End, Hash: k.Hash}) {
				continue
			}
		}
		out = append(out, k)
	}
	return out
}
