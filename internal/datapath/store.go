package datapath

import (
	"errors"
	"sync"

	"github.com/santa-offload/santa/internal/model"
)

// store keeps the services and their rules in the maps the programs read:
// it hands out service and rule ids and rule slots, writes rule bodies
// (rulebody.go, chunks.go) and index entries (indextable.go,
// indexwrite.go), lands batches (ruleset.go) and frees what they replace
// after a grace period (reclaim.go). Its lock guards all of that. It tells
// the TCP plane about TCP services (their listeners), and the learner
// about learning services, with its lock held: the lock order is store,
// then tcpPlane or learner.
type store struct {
	objs  *santaObjects // the maps; loaded by Open, fixed
	tcp   *tcpPlane     // told of TCP listeners as they come and go
	learn *learner      // told of services that start and stop learning

	mu       sync.Mutex
	services map[model.ServiceID]*service
	rules    map[model.RuleID]*installedRule
	svcIDs   idPool
	// endedIDs are ids of ended services not yet back in svcIDs: a
	// memcached domain's, while services are still in it. Reused, the id
	// would put them in the domain its next service may start, another
	// owner's (releaseID).
	endedIDs map[model.ServiceID]bool
	ruleIDs  idPool
	reserved map[model.RuleID]bool // rule ids taken by ReserveRuleIDs, not yet landed
	slots    [ruleClasses]idPool   // slot numbers by size class
	gens     *slotGens             // how many times each slot was freed
	chunks   [hugeRule]chunks      // bodies of the UDP classes
	index    *indexTable           // where each rule_index entry lies
	indexIDs uint32
	mcEpoch  uint32               // the last life a memcached domain started (memcached.go)
	pending  retiredRules         // waiting for a grace period, see reclaim.go
	waiting  []santaSantaIndexKey // index entries of the batch in its grace period

	barrier   *barrier
	kick      chan struct{} // wakes reclaimLoop
	reclaimed chan struct{} // closed when reclaimLoop has finished
}

// newStore starts a store for objs, with room for maxServices services and
// maxRules rules, on the index table and chunks Open sized objs with. Its
// reclaimer runs until close.
func newStore(objs *santaObjects, tcp *tcpPlane, index *indexTable, chunks [hugeRule]chunks,
	maxServices, maxRules uint32) (*store, error) {
	gens, err := newSlotGens(objs.SlotGens)
	if err != nil {
		return nil, err
	}
	b, err := newBarrier()
	if err != nil {
		gens.close()
		return nil, err
	}
	st := &store{
		objs:      objs,
		tcp:       tcp,
		services:  make(map[model.ServiceID]*service),
		rules:     make(map[model.RuleID]*installedRule),
		svcIDs:    newLatePool(0, maxServices),
		endedIDs:  make(map[model.ServiceID]bool),
		ruleIDs:   newIDPool(0, maxRules),
		reserved:  make(map[model.RuleID]bool),
		chunks:    chunks,
		gens:      gens,
		index:     index,
		barrier:   b,
		kick:      make(chan struct{}, 1),
		reclaimed: make(chan struct{}),
	}
	for c := range st.slots {
		// Slot 0 means "no candidate" in index nodes.
		st.slots[c] = newIDPool(1, maxRules+1)
	}
	go st.reclaimLoop(st.kick)
	return st, nil
}

// close stops the reclaimer, once it has reclaimed what is retired, and
// releases this process's handles on the chunks.
func (st *store) close() error {
	close(st.kick)
	<-st.reclaimed
	st.barrier.Close()
	errs := []error{st.gens.close()}
	for c := range st.chunks {
		errs = append(errs, st.chunks[c].Close())
	}
	return errors.Join(errs...)
}
