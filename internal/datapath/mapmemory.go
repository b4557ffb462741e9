package datapath

import (
	"fmt"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// mapMemory maps the whole of m, an array map made with BPF_F_MMAPABLE,
// for reading and writing: the programs see every write at once. Such an
// array's elements lie 8-byte aligned: a value of 4 bytes takes 8.
func mapMemory(m *ebpf.Map) ([]byte, error) {
	elem := (m.ValueSize() + 7) &^ 7
	mem, err := unix.Mmap(m.FD(), 0, int(m.MaxEntries()*elem), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping %s: %w", m, err)
	}
	return mem, nil
}

// unmapMemory unmaps what mapMemory mapped into *mem, once: later calls do
// nothing.
func unmapMemory(mem *[]byte) error {
	if *mem == nil {
		return nil
	}
	err := unix.Munmap(*mem)
	*mem = nil
	return err
}
