package datapath

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/cilium/ebpf"
)

// chunks are the rule bodies of one UDP size class: an array of maps whose
// inner arrays (chunks) each hold the bodies of 1<<shift consecutive slot
// numbers. A chunk is made the first time one of its slots is written and
// stays for the life of the data plane; slot numbers are handed out densely
// (idPool), so a class takes the chunks its rule count needs, plus at most
// one partly used. Array lookups are inlined by the verifier and reach a
// body in one memory access, where a hash map first reads a bucket.
type chunks struct {
	outer *ebpf.Map
	spec  *ebpf.MapSpec // one chunk
	shift int
	made  []*ebpf.Map // by chunk number; nil until made
}

// sizeChunks gives the class map named outer room for the chunks of slot
// numbers up to maxSlot.
func sizeChunks(spec *ebpf.CollectionSpec, outer string, maxSlot uint32) {
	m := spec.Maps[outer]
	m.MaxEntries = maxSlot>>chunkShift(m.InnerMap) + 1
}

// chunkShift: a chunk holds 1<<shift bodies (a power of two, santa_abi.h).
func chunkShift(inner *ebpf.MapSpec) int { return bits.TrailingZeros32(inner.MaxEntries) }

func newChunks(outer *ebpf.Map, spec *ebpf.MapSpec) chunks {
	return chunks{outer: outer, spec: spec.InnerMap.Copy(), shift: chunkShift(spec.InnerMap)}
}

// at is the chunk that holds slot number n, made if need be, and n's key in
// it. Called with the store's lock held.
func (c *chunks) at(n uint32) (*ebpf.Map, uint32, error) {
	i := int(n >> c.shift)
	if i >= len(c.made) {
		c.made = append(c.made, make([]*ebpf.Map, i+1-len(c.made))...)
	}
	if c.made[i] == nil {
		m, err := ebpf.NewMap(c.spec)
		if err != nil {
			return nil, 0, fmt.Errorf("making rule chunk %d of %s: %w", i, c.spec.Name, err)
		}
		// The kernel waits for running programs after an update of a map
		// of maps: once per chunk, a few hundred times at a million rules.
		if err := c.outer.Put(uint32(i), m); err != nil {
			m.Close()
			return nil, 0, fmt.Errorf("adding rule chunk %d of %s: %w", i, c.spec.Name, err)
		}
		c.made[i] = m
	}
	return c.made[i], n & (1<<c.shift - 1), nil
}

// Close releases this process's handles; the class map keeps the chunks.
func (c *chunks) Close() error {
	var errs []error
	for _, m := range c.made {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	return errors.Join(errs...)
}
