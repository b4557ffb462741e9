package datapath

import (
	"encoding/binary"
	"fmt"

	"github.com/cilium/ebpf"
)

// slots are learn_passes's: a watched key's count lives at the slot
// learn_watch gives its hash, and user space reads them all with one copy
// of the mapped array. A slot given up waits a whole window before another
// key takes it: the data plane may have looked the old key's slot up just
// before its hash left learn_watch, and add its pass after.
type slots struct {
	mem     *ebpf.Memory
	buf     []byte   // the last read, 8 bytes a slot
	free    []uint32 // taken last first
	waiting []uint32 // given up before the last step: free at the next
	given   []uint32 // given up since the last step
}

func newSlots(m *ebpf.Map) (slots, error) {
	mem, err := m.Memory()
	if err != nil {
		return slots{}, fmt.Errorf("mapping the learning counts: %w", err)
	}
	n := m.MaxEntries()
	s := slots{mem: mem, buf: make([]byte, 8*int(n)), free: make([]uint32, n)}
	for i := range s.free {
		s.free[i] = n - 1 - uint32(i)
	}
	return s, nil
}

// take takes a free slot; false if none is.
func (s *slots) take() (uint32, bool) {
	if len(s.free) == 0 {
		return 0, false
	}
	slot := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	return slot, true
}

// start sets a slot's count where its key's starts, before the key is
// watched.
func (s *slots) start(slot uint32, passes uint64) error {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], passes)
	if _, err := s.mem.WriteAt(b[:], 8*int64(slot)); err != nil {
		return fmt.Errorf("starting the count of learning slot %d: %w", slot, err)
	}
	return nil
}

// give gives a slot up: its key is no longer in learn_watch.
func (s *slots) give(slot uint32) { s.given = append(s.given, slot) }

// step starts a window: slots given up before the last step are free.
func (s *slots) step() {
	s.free = append(s.free, s.waiting...)
	s.waiting, s.given = s.given, s.waiting[:0]
}

// read copies every slot's count. A count is an aligned 8-byte word the
// data plane adds to atomically, and the copy (Go's memmove) promises
// nothing per word: a count read while it changes could mix its halves,
// which only a key past 2^32 passes since it was watched could see.
func (s *slots) read() error {
	if _, err := s.mem.ReadAt(s.buf, 0); err != nil {
		return fmt.Errorf("reading the learning counts: %w", err)
	}
	return nil
}

// passes is slot's count at the last read.
func (s *slots) passes(slot uint32) uint64 { return binary.NativeEndian.Uint64(s.buf[8*slot:]) }
