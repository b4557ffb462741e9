// Package parallel runs work over a range of indexes on every CPU.
package parallel

import (
	"runtime"
	"sync"
)

// Parts splits [0, n) into contiguous parts, one per CPU but none smaller
// than minPart (one part for less), runs f on them side by side and
// returns each part's error, in part order. Installing a million rules has
// work enough for every CPU.
func Parts(n, minPart int, f func(lo, hi int) error) []error {
	parts := max(1, min(runtime.GOMAXPROCS(0), n/minPart))
	per := (n + parts - 1) / parts
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() { errs[p] = f(min(n, p*per), min(n, (p+1)*per)) })
	}
	wg.Wait()
	return errs
}
