package datapath

import (
	"errors"
	"slices"
	"testing"

	"github.com/santa-offload/santa/internal/model"
)

func TestIDPoolReusesMostRecentFirst(t *testing.T) {
	p := newIDPool(1, 4)
	a, _ := p.get()
	b, _ := p.get()
	p.put(a)
	p.put(b)
	if got, _ := p.get(); got != b {
		t.Fatalf("got %d; want %d, the most recently freed", got, b)
	}
}

// A service id is handed out again as late as the pool allows: fresh
// numbers first, then the one freed longest ago.
func TestLatePoolReusesLate(t *testing.T) {
	p := newLatePool(0, 3)
	var got []uint32
	take := func() uint32 {
		t.Helper()
		id, err := p.get()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
		return id
	}
	a := take()
	p.put(a) // ended: 1 and 2 come first
	b, c := take(), take()
	p.put(c)
	p.put(b) // the pool is used up: the oldest freed, a, then c, then b
	take()
	take()
	take()
	if want := []uint32{0, 1, 2, 0, 2, 1}; !slices.Equal(got, want) {
		t.Fatalf("ids %v; want %v", got, want)
	}
	if _, err := p.get(); !errors.Is(err, model.ErrCapacity) {
		t.Fatalf("a full pool: %v; want ErrCapacity", err)
	}
	if n := p.inUse(0); n != 3 {
		t.Fatalf("inUse %d; want 3", n)
	}
}
