package daemon

import (
	"bytes"
	"errors"
	"syscall"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/internal/rules"
	"github.com/santa-offload/santa/rule"
)

// dataplaneError is the ERROR reply for an error of the data plane.
func dataplaneError(err error) *protocol.Error {
	var limit *rule.LimitError
	var dup *rules.DuplicateError
	var errno syscall.Errno
	code := syscall.EINVAL // a rule or batch the data plane refuses
	switch {
	case errors.Is(err, model.ErrUnknownService), errors.Is(err, model.ErrUnknownRule):
		code = syscall.ENOENT
	case errors.Is(err, model.ErrExists), errors.As(err, &dup):
		code = syscall.EEXIST
	case errors.Is(err, model.ErrCapacity):
		code = syscall.ENOSPC
	case errors.Is(err, model.ErrNotSupported):
		code = syscall.EOPNOTSUPP
	case errors.Is(err, model.ErrStaleGuard):
		code = syscall.ESTALE
	case errors.As(err, &limit):
	case errors.As(err, &errno):
		code = errno // the kernel's own refusal
	}
	return protocol.Errorf(code, "%v", err)
}

// batchError is dataplaneError for a batch whose items are the request's
// rules: a duplicate condition then names the offending item, which the
// data plane cannot (the ids it names were never handed out).
func batchError(err error, sv *service, items []rule.Rule) *protocol.Error {
	var dup *rules.DuplicateError
	if !errors.As(err, &dup) || items == nil {
		return dataplaneError(err)
	}
	// The items with either condition, in order: the second is an item,
	// and the first one too, or an installed rule.
	var same []int
	for i, r := range items {
		if condEqual(r.Condition, dup.SecondCond) || condEqual(r.Condition, dup.Cond) {
			same = append(same, i)
		}
	}
	shared := rules.DescribeOverlap(dup.Cond, dup.SecondCond)
	if len(same) >= 2 {
		return protocol.ErrorAt(syscall.EEXIST, uint32(same[1]), "rule %d of the batch has the same condition as rule %d of the batch (%s)",
			same[1], same[0], shared)
	}
	if len(same) == 1 {
		return protocol.ErrorAt(syscall.EEXIST, uint32(same[0]), "rule %d of the batch has the same condition as installed rule %d of service %d (%s)",
			same[0], dup.First, sv.ID, shared)
	}
	return dataplaneError(err)
}

// notSaved answers a change the data plane and the state hold but the
// journal could not take.
func notSaved(err error) *protocol.Error {
	return protocol.Errorf(syscall.EIO, "the change is made, but santad could not save it and would lose it if restarted: %v", err)
}

// condEqual reports whether two conditions are the same in every field.
func condEqual(a, b rule.Condition) bool {
	return a.Offset == b.Offset && a.MinLen == b.MinLen && a.MaxLen == b.MaxLen && bytes.Equal(a.Pattern, b.Pattern)
}
