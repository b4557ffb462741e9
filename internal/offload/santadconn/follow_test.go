package santadconn

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/santa-offload/santa/client"
)

// A window for each newly numbered set, a Window at least after the last;
// without numbers, one a Window; with a number that stays, one every Stale
// Windows all the same; the number asked only when a window may be due.
func TestFollowerDue(t *testing.T) {
	f := NewFollower(2 * time.Second)
	now := time.Unix(1e9, 0)
	number, numbered, asked := uint32(5), true, 0
	ask := func() (uint32, bool) {
		asked++
		return number, numbered
	}
	// poll asks Due each Poll over d, the clock moving: the windows due.
	poll := func(d time.Duration) int {
		windows := 0
		for range d / f.Poll() {
			now = now.Add(f.Poll())
			if f.Due(now, ask) {
				windows++
			}
		}
		return windows
	}
	if n := poll(f.Poll()); n != 1 {
		t.Fatalf("%d windows for the first set, want 1", n)
	}
	if n := poll(3 * time.Second); n != 0 {
		t.Errorf("%d windows for a set read already, want 0", n)
	}
	// A new set: read at once, a Window after the last; the next not
	// before a Window since, nor asked for.
	number = 6
	if n := poll(f.Poll()); n != 1 {
		t.Errorf("%d windows for the next set, want 1", n)
	}
	number, asked = 7, 0
	if n := poll(time.Second); n != 0 || asked != 0 {
		t.Errorf("%d windows within a Window of the last, %d asks; want 0 and 0", n, asked)
	}
	if n := poll(time.Second); n != 1 {
		t.Errorf("%d windows a Window after the last, want 1", n)
	}
	// A number that stays: a window every Stale Windows all the same.
	if n := poll(Stale * 2 * time.Second); n != 1 {
		t.Errorf("%d windows in %d Windows of one number, want 1", n, Stale)
	}
	// No number: a window every Window.
	numbered = false
	if n := poll(4 * time.Second); n != 2 {
		t.Errorf("%d windows in 2 Windows without numbers, want 2", n)
	}
}

// HotNumber takes the first number a service tells, asking at most
// hotAsks services.
func TestHotNumber(t *testing.T) {
	sets := map[uint32]client.HotSet{2: {}, 3: {Number: 9}, 4: {Number: 9}}
	var asked []uint32
	hot := func(id uint32, max int) (client.HotSet, error) {
		asked = append(asked, id)
		if max != 1 {
			t.Errorf("read %d forms of the set; want 1", max)
		}
		if s, ok := sets[id]; ok {
			return s, nil
		}
		return client.HotSet{}, errors.New("no such service")
	}
	if n, ok := HotNumber(hot, slices.Values([]uint32{1, 2, 5, 3})); ok || n != 0 {
		t.Errorf("HotNumber = %d, %v; want none from the first %d services", n, ok, hotAsks)
	}
	if !slices.Equal(asked, []uint32{1, 2, 5}) {
		t.Errorf("asked services %v; want 1, 2, 5", asked)
	}
	asked = nil
	if n, ok := HotNumber(hot, slices.Values([]uint32{2, 3, 4})); !ok || n != 9 {
		t.Errorf("HotNumber = %d, %v; want 9", n, ok)
	}
	if !slices.Equal(asked, []uint32{2, 3}) {
		t.Errorf("asked services %v; want 2, 3", asked)
	}
}
