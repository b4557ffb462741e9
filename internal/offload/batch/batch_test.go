package batch

import (
	"errors"
	"slices"
	"syscall"
	"testing"

	"github.com/santa-offload/santa/internal/protocol"
)

// TestDelete: ids beyond one message go in several batches, each within a
// message; one santad refuses as missing is left out and the rest deleted;
// any other refusal ends it.
func TestDelete(t *testing.T) {
	ids := make([]uint32, 3*room/4+10)
	for i := range ids {
		ids[i] = uint32(i + 1)
	}
	var deleted []uint32
	var batches int
	missingID := ids[room/4+5] // in the second batch
	var missing []uint32
	err := Delete(ids, func(b []uint32) error {
		if protocol.HeaderLen+3*4+4*len(b) > protocol.MaxMessage {
			t.Fatalf("a batch of %d ids is over a message", len(b))
		}
		if i := slices.Index(b, missingID); i >= 0 {
			return protocol.ErrorAt(syscall.ENOENT, uint32(i), "no such rule")
		}
		batches++
		deleted = append(deleted, b...)
		return nil
	}, func(id uint32) { missing = append(missing, id) })
	if err != nil {
		t.Fatal(err)
	}
	want := slices.DeleteFunc(slices.Clone(ids), func(id uint32) bool { return id == missingID })
	if !slices.Equal(deleted, want) || !slices.Equal(missing, []uint32{missingID}) || batches != 4 {
		t.Fatalf("deleted %d ids in %d batches, missing %v; want %d in 4, missing [%d]", len(deleted), batches, missing, len(want), missingID)
	}

	refused := errors.New("refused")
	calls := 0
	err = Delete(ids, func([]uint32) error { calls++; return refused }, nil)
	if !errors.Is(err, refused) || calls != 1 {
		t.Fatalf("a refusal gave %v after %d calls; want it after 1", err, calls)
	}
}
