package datapath

import (
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

// retire queues rules that the index no longer reaches. Called with d.mu held.
func (d *Datapath) retire(old []*installedRule, releaseIDs bool) {
	for _, r := range old {
		d.pending.slots = append(d.pending.slots, r.slot)
		if releaseIDs {
			delete(d.rules, r.id)
			d.pending.ids = append(d.pending.ids, r.id)
		}
	}
	d.wakeReclaimer()
}

// retireIndex queues index entries for deletion after a grace period.
// Called with d.mu held.
func (d *Datapath) retireIndex(indexID uint32, keys []rules.IndexKey) {
	for _, k := range keys {
		d.pending.index = append(d.pending.index, indexKey(indexID, k))
	}
	d.wakeReclaimer()
}

func (d *Datapath) wakeReclaimer() {
	if len(d.pending.slots)+len(d.pending.index) > 0 {
		select {
		case d.kick <- struct{}{}:
		default: // a wake-up is already queued
		}
	}
}

// reclaimLoop runs until kick is closed, then reclaims what is left.
func (d *Datapath) reclaimLoop() {
	defer close(d.reclaimed)
	for range d.kick {
		d.reclaim()
	}
	d.reclaim()
}

// reclaim waits for a grace period, then frees what was retired before it.
func (d *Datapath) reclaim() {
	d.mu.Lock()
	batch := d.pending
	d.pending = retiredRules{}
	d.mu.Unlock()
	if len(batch.slots)+len(batch.index) == 0 {
		return
	}
	if err := d.barrier.Wait(); err != nil {
		// Without a grace period nothing can be freed safely: keep it queued.
		d.mu.Lock()
		d.pending.slots = append(d.pending.slots, batch.slots...)
		d.pending.index = append(d.pending.index, batch.index...)
		d.pending.ids = append(d.pending.ids, batch.ids...)
		d.mu.Unlock()
		return
	}
	d.deleteBodies(batch.slots)

	d.mu.Lock()
	defer d.mu.Unlock()
	d.removeIndex(d.unusedIndexKeys(batch.index))
	for _, s := range batch.slots {
		d.freeSlot(s)
	}
	for _, id := range batch.ids {
		// Zeroed here, once no program can bump them, so that adding a
		// rule never waits for it. An id whose counters stay is not reused.
		if d.resetRuleStats(id) == nil {
			d.ruleIDs.put(uint32(id))
		}
	}
}

// unusedIndexKeys drops the keys that a live index has written again since
// they were retired. Called with d.mu held.
func (d *Datapath) unusedIndexKeys(keys []santaSantaIndexKey) []santaSantaIndexKey {
	live := make(map[uint32]*service, len(d.services))
	for _, s := range d.services {
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
