package workers

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestEach: every index once, never more than workers at a time.
func TestEach(t *testing.T) {
	for _, c := range []struct{ n, workers, most int }{{0, 4, 0}, {1, 4, 1}, {100, 4, 4}, {100, 0, 1}, {3, 100, 3}} {
		var mu sync.Mutex
		seen := map[int]int{}
		var running, most atomic.Int32
		Each(c.n, c.workers, func(i int) {
			now := running.Add(1)
			for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
			}
			time.Sleep(100 * time.Microsecond)
			running.Add(-1)
			mu.Lock()
			seen[i]++
			mu.Unlock()
		})
		for i := range c.n {
			if seen[i] != 1 {
				t.Fatalf("n %d, workers %d: f(%d) called %d times", c.n, c.workers, i, seen[i])
			}
		}
		if len(seen) != c.n || int(most.Load()) > max(c.most, 1) {
			t.Fatalf("n %d, workers %d: %d indexes, %d at once; want %d, at most %d", c.n, c.workers, len(seen), most.Load(), c.n, c.most)
		}
	}
}
