// Package workers runs the agents' many asks on few goroutines.
package workers

import "sync"

// Each calls f(0), ..., f(n-1) on at most workers goroutines (at least
// one) and returns when all calls have. The agents ask thousands of keys
// a window with a few dozen asks in flight: a goroutine per key would
// make thousands runnable at once, and every other goroutine of the agent
// (a zone's serial poll, whose reply has 2 × probe_timeout to come) would
// wait behind them on a busy server core.
func Each(n, workers int, f func(i int)) {
	workers = max(1, min(workers, n))
	var next sync.Mutex
	i := 0
	take := func() (int, bool) {
		next.Lock()
		defer next.Unlock()
		if i >= n {
			return 0, false
		}
		i++
		return i - 1, true
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j, ok := take(); ok; j, ok = take() {
				f(j)
			}
		}()
	}
	wg.Wait()
}
