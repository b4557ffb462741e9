package datapath

import (
	"fmt"

	"github.com/cilium/ebpf"
)

// barrier waits until every BPF program that was running when it was called
// has finished. The kernel calls synchronize_rcu() after each update of a
// map-in-map (maybe_wait_bpf_programs), so rewriting the one slot of an
// array of maps is that wait. A rule slot unlinked from the index is freed
// for reuse only after a barrier: no reader can still be looking at it.
type barrier struct {
	outer, inner *ebpf.Map
}

func newBarrier() (*barrier, error) {
	innerSpec := &ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1}
	inner, err := ebpf.NewMap(innerSpec)
	if err != nil {
		return nil, fmt.Errorf("creating barrier map: %w", err)
	}
	outer, err := ebpf.NewMap(&ebpf.MapSpec{
		Type: ebpf.ArrayOfMaps, KeySize: 4, ValueSize: 4, MaxEntries: 1, InnerMap: innerSpec,
	})
	if err != nil {
		inner.Close()
		return nil, fmt.Errorf("creating barrier map: %w", err)
	}
	return &barrier{outer: outer, inner: inner}, nil
}

func (b *barrier) Wait() error {
	if err := b.outer.Put(uint32(0), b.inner); err != nil {
		return fmt.Errorf("waiting for running programs: %w", err)
	}
	return nil
}

func (b *barrier) Close() {
	b.outer.Close()
	b.inner.Close()
}
