// Package workers runs the agents' many asks on few goroutines.
package workers

import (
	"sync"
	"sync/atomic"
)

// Each calls f(0), ..., f(n-1) on at most workers goroutines (at least
// one) and returns when all calls have. The agents ask thousands of keys
// a window with a few dozen asks in flight: a goroutine per key would
// make thousands runnable at once, and every other goroutine of the agent
// (a zone's serial poll, whose reply has 2 × probe_timeout to come) would
// wait behind them on a busy server core.
func Each(n, workers int, f func(i int)) {
	var next atomic.Int64 // the next index to take
	var wg sync.WaitGroup
	for range max(1, min(workers, n)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		}()
	}
	wg.Wait()
}
