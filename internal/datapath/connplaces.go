package datapath

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/santa-offload/santa/internal/model"
)

// Connection places (docs/tcp.md, "Connection places"). Every connection
// under Santa takes a place of its listener's uid (model.ConnOwner) in
// conn_owners, and a memcached connection's stream state another: the
// programs take one where a connection is added (santa_conn_new, the
// handover) and give it back where its state is deleted, and so does
// AdoptConnection here. A uid beyond its limit has its new connections
// served by the application alone (tcp_conn_quota), so that no uid can
// take every one of the host's MaxConnections places.

// connOwners gives each uid with TCP listeners a slot of conn_owners, and
// reads and writes the slots through the map's memory, mapped, with the
// same atomic operations as the programs. Slot 0 is no uid's: listeners
// registered without an owner (tests, benchmarks), without limit. A uid
// keeps its slot while it has listeners, and after, until the slot is
// wanted for another uid and holds no place: a connection that outlives
// its listener gives its place back there.
type connOwners struct {
	mem []byte // conn_owners, mapped

	mu        sync.Mutex
	slots     map[uint32]uint32 // uid -> slot
	uids      []uint32          // slot -> uid, for slots in slots
	listeners map[uint32]int    // uid -> listeners registered
}

const ownerSize = uint32(unsafe.Sizeof(santaTcpSantaConnOwner{}))

func newConnOwners(m *ebpf.Map) (*connOwners, error) {
	mem, err := mapMemory(m)
	if err != nil {
		return nil, err
	}
	return &connOwners{mem: mem, slots: map[uint32]uint32{}, uids: make([]uint32, m.MaxEntries()),
		listeners: map[uint32]int{}}, nil
}

func (o *connOwners) close() error { return unmapMemory(&o.mem) }

// slot is the counters of slot s, in the mapped memory.
func (o *connOwners) slot(s uint32) *santaTcpSantaConnOwner {
	return (*santaTcpSantaConnOwner)(unsafe.Pointer(&o.mem[s*ownerSize]))
}

// n is how many slots there are.
func (o *connOwners) n() uint32 { return uint32(len(o.mem)) / ownerSize }

// take takes a connection's place in slot s, as santa_place_take does:
// false if it holds every one its limit allows.
func (o *connOwners) take(s uint32) bool {
	c := o.slot(s)
	limit := atomic.LoadUint32(&c.Limit)
	if atomic.AddUint32(&c.Conns, 1)-1 < limit || limit == 0 {
		return true
	}
	atomic.AddUint32(&c.Conns, ^uint32(0))
	return false
}

// give gives back a place take took.
func (o *connOwners) give(s uint32) { atomic.AddUint32(&o.slot(s).Conns, ^uint32(0)) }

// acquire is the slot of owner's uid for one more listener, with owner's
// limit from now on; nil is slot 0.
func (o *connOwners) acquire(owner *model.ConnOwner) (uint32, error) {
	if owner == nil {
		return 0, nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	s, ok := o.slots[owner.UID]
	if !ok {
		if s, ok = o.free(); !ok {
			return 0, fmt.Errorf("registering a TCP listener of uid %d: every uid's slot of connection places is taken: %w",
				owner.UID, model.ErrCapacity)
		}
		o.slots[owner.UID] = s
		o.uids[s] = owner.UID
	}
	o.listeners[owner.UID]++
	atomic.StoreUint32(&o.slot(s).Limit, owner.Limit)
	return s, nil
}

// release forgets one listener of owner's uid (acquire's).
func (o *connOwners) release(owner *model.ConnOwner) {
	if owner == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.listeners[owner.UID]--; o.listeners[owner.UID] <= 0 {
		delete(o.listeners, owner.UID)
	}
}

// free is a slot for a new uid: one no uid has, or one whose uid has no
// listener and holds no place any more. Called with o.mu held.
func (o *connOwners) free() (uint32, bool) {
	for s := uint32(1); s < o.n(); s++ {
		uid := o.uids[s]
		if got, ok := o.slots[uid]; !ok || got != s {
			return s, true
		}
		c := o.slot(s)
		if o.listeners[uid] == 0 && atomic.LoadUint32(&c.Conns) == 0 && atomic.LoadUint32(&c.Mc) == 0 {
			delete(o.slots, uid)
			return s, true
		}
	}
	return 0, false
}

// setLimit sets uid's limit, if it has a slot.
func (o *connOwners) setLimit(uid, limit uint32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if s, ok := o.slots[uid]; ok {
		atomic.StoreUint32(&o.slot(s).Limit, limit)
	}
}

// places are the places uid holds; ok is false if it has no slot.
func (o *connOwners) places(uid uint32) (p model.ConnPlaces, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s, ok := o.slots[uid]
	if !ok {
		return p, false
	}
	c := o.slot(s)
	return model.ConnPlaces{Conns: atomic.LoadUint32(&c.Conns), Memcached: atomic.LoadUint32(&c.Mc),
		Limit: atomic.LoadUint32(&c.Limit)}, true
}

// SetConnectionLimit sets the most connection places uid holds at once
// from now on (0: no limit but MaxConnections), if it has TCP listeners
// (or places still): a uid's next listener sets it anyway. Connections it
// holds beyond a lowered limit stay under Santa; new ones are the
// application's until it holds fewer.
func (d *Datapath) SetConnectionLimit(uid, limit uint32) { d.tcp.owners.setLimit(uid, limit) }

// ConnectionPlaces are the connection places uid holds (docs/tcp.md,
// "Connection places"); ok is false if it has no TCP listener, nor any
// place left from one.
func (d *Datapath) ConnectionPlaces(uid uint32) (model.ConnPlaces, bool) {
	return d.tcp.owners.places(uid)
}
