package datapath

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/santa-offload/santa/test/indexhome"
)

// User space places index entries where the data plane's probe starts:
// indexHome and santa_index_home are one function written twice, so this
// runs the data plane's own on random keys and on keys at the edges.
func TestIndexHomeMatchesTheDataPlane(t *testing.T) {
	h, err := indexhome.Load()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	rng := rand.New(rand.NewPCG(5, 6))
	keys := []santaSantaIndexKey{
		{}, {IndexId: 1}, {Hash: ^uint32(0)}, {IndexId: ^uint32(0), Hash: ^uint32(0), End: ^uint16(0), Region: ^uint8(0)},
	}
	for range 2000 {
		keys = append(keys, santaSantaIndexKey{IndexId: rng.Uint32(), Hash: rng.Uint32(),
			End: uint16(rng.Uint32()), Region: uint8(rng.Uint32())})
	}
	for _, k := range keys {
		b, err := binary.Append(nil, binary.LittleEndian, k)
		if err != nil {
			t.Fatal(err)
		}
		got, err := h.Home(b)
		if err != nil {
			t.Fatal(err)
		}
		if want := indexHome(k); got != want {
			t.Fatalf("key %+v: the data plane's probe starts at %#x, user space's at %#x", k, got, want)
		}
	}
}
