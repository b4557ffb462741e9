package rule

import (
	"fmt"

	"github.com/santa-offload/santa/internal/parallel"
)

// BatchError is an error of one rule of a batch: the first one that failed,
// Index being its place in the batch. Err is the rule's own error (often a
// *LimitError), which errors.Is and errors.As find.
type BatchError struct {
	Index int
	Err   error
}

func (e *BatchError) Error() string { return fmt.Sprintf("rule %d of the batch: %v", e.Index, e.Err) }

func (e *BatchError) Unwrap() error { return e.Err }

// CompileAll validates every rule against limits (a service's: LimitsFor)
// and compiles it, on every CPU: a million take half a second on one. An
// error is a *BatchError naming the first rule of the batch that failed,
// whichever CPU saw it. The compiled rules are in the rules' order.
func CompileAll(rs []Rule, limits Limits) ([]Compiled, error) {
	out := make([]Compiled, len(rs))
	errs := parallel.Parts(len(rs), 1024, func(lo, hi int) error {
		for i := lo; i < hi; i++ {
			err := rs[i].Validate(limits)
			if err == nil {
				out[i], err = Compile(rs[i])
			}
			if err != nil {
				return &BatchError{Index: i, Err: err}
			}
		}
		return nil
	})
	for _, err := range errs { // parts are in rule order: the first error is the first rule's
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
