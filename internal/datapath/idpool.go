package datapath

import (
	"errors"
	"fmt"
	"slices"

	"github.com/santa-offload/santa/internal/model"
)

// idPool hands out dense numbers in [first, limit): map indices for rules,
// rule slots and services. Freed numbers are reused, most recently freed first.
type idPool struct {
	next, limit uint32
	free        []uint32
}

func newIDPool(first, limit uint32) idPool { return idPool{next: first, limit: limit} }

func (p *idPool) get() (uint32, error) {
	if n := len(p.free); n > 0 {
		id := p.free[n-1]
		p.free = p.free[:n-1]
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
