package rule

import (
	"fmt"
	"strconv"
)

// LimitError reports a rule value outside a limit, so that callers (and the
// socket API above them) can tell which field broke which bound with
// errors.As instead of parsing text.
type LimitError struct {
	Field     string // the value checked, e.g. "condition pattern"
	Value     int    // what the rule asks for
	Limit     int    // the bound it breaks
	Min       bool   // Limit is a lower bound (Value < Limit), not an upper one
	Unit      string // unit of Value, e.g. "bytes"; empty for plain numbers
	LimitName string // what Limit is when it comes from the rule itself, e.g. "the reply length"
	// Never marks a value that would make the rule unable to ever answer
	// (a length range no request can be in), said so in the message.
	Never bool
}

func (e *LimitError) Error() string {
	value := strconv.Itoa(e.Value)
	if e.Unit != "" {
		value += " " + e.Unit
	}
	limit := strconv.Itoa(e.Limit)
	if e.LimitName != "" {
		limit += " (" + e.LimitName + ")"
	}
	msg := fmt.Sprintf("%s is %s; the limit is %s", e.Field, value, limit)
	if e.Min {
		msg = fmt.Sprintf("%s is %s; it must be at least %s", e.Field, value, limit)
	}
	if e.Never {
		msg += ": the rule could never answer a request"
	}
	return msg
}

// tooBig and tooSmall keep the checks in Validate to one line each.
func tooBig(field, unit string, value, limit int) *LimitError {
	return &LimitError{Field: field, Value: value, Limit: limit, Unit: unit}
}

func tooSmall(field, unit string, value, limit int) *LimitError {
	return &LimitError{Field: field, Value: value, Limit: limit, Min: true, Unit: unit}
}

// never marks e as a value that leaves the rule unable to answer, against
// a limit the rule itself sets (limitName).
func never(e *LimitError, limitName string) *LimitError {
	e.LimitName, e.Never = limitName, true
	return e
}
