package datapath

import (
	"errors"
	"fmt"
	"slices"

	"github.com/santa-offload/santa/internal/model"
)

// idPool hands out dense numbers in [first, limit): map indices for rules,
// rule slots and services. Freed numbers are reused, most recently freed
// first (the hot end of the maps), unless the pool is late.
type idPool struct {
	next, limit uint32
	free        []uint32
	late        bool
}

func newIDPool(first, limit uint32) idPool { return idPool{next: first, limit: limit} }

// newLatePool is a pool that hands a number out again as late as it can:
// numbers never used first, then the one freed longest ago. Service ids
// are: a client names a service by its id, and may still do so for a
// moment after the service ended with its socket (an agent acts on the
// ids it knows until its next scan); an id handed out again at once would
// send those calls to another socket's service.
func newLatePool(first, limit uint32) idPool {
	return idPool{next: first, limit: limit, late: true}
}

func (p *idPool) get() (uint32, error) {
	if n := len(p.free); n > 0 && (!p.late || p.next >= p.limit) {
		i := n - 1
		if p.late {
			i = 0
		}
		id := p.free[i]
		p.free = slices.Delete(p.free, i, i+1)
		return id, nil
	}
	if p.next >= p.limit {
		return 0, model.ErrCapacity
	}
	p.next++
	return p.next - 1, nil
}

func (p *idPool) put(id uint32) { p.free = append(p.free, id) }

// inUse is how many numbers are handed out.
func (p *idPool) inUse(first uint32) int { return int(p.next-first) - len(p.free) }

// claim takes a given id out of the pool: restoring saved rules keeps their
// ids.
func (p *idPool) claim(id uint32) error {
	if id >= p.limit {
		return fmt.Errorf("beyond the capacity of %d", p.limit)
	}
	if id >= p.next {
		for free := p.next; free < id; free++ {
			p.free = append(p.free, free)
		}
		p.next = id + 1
		return nil
	}
	i := slices.Index(p.free, id)
	if i < 0 {
		return errors.New("already in use")
	}
	p.free = slices.Delete(p.free, i, i+1)
	return nil
}
