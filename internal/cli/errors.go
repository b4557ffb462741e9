package cli

import (
	"errors"
	"fmt"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/protocol"
)

// refusal is a refusal of santad told for people: the item of the batch it
// names, the daemon's message and the errno's name, as in
// "rule 3: condition pattern is 300 bytes; the limit is 256 (EINVAL)".
type refusal struct {
	item string // "" when the error names no item
	err  *client.Error
}

func (r *refusal) Error() string {
	s := r.err.Message
	if s == "" {
		s = r.err.Code.Error()
	}
	s += " (" + protocol.ErrnoName(r.err.Code) + ")"
	if r.item != "" {
		s = r.item + ": " + s
	}
	return s
}

func (r *refusal) Unwrap() error { return r.err }

// refused tells a refusal of santad in err as a *refusal whose item is
// name(Index). Any other error comes back as it is.
func refused(err error, name func(index int) string) error {
	var e *client.Error
	if !errors.As(err, &e) {
		return err
	}
	r := &refusal{err: e}
	if e.Index != client.NoIndex {
		r.item = name(int(e.Index))
	}
	return r
}

// explain tells a refusal the command did not tell itself; the client's
// context ("list services: ") says nothing the command name does not.
func explain(err error) error {
	var r *refusal
	if errors.As(err, &r) {
		return err
	}
	return refused(err, func(i int) string { return fmt.Sprintf("item %d", i) })
}

// ExitCode is the exit status for an error of Run: 0 for none, 2 for a
// usage error, 1 for any other.
func ExitCode(err error) int {
	var u *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u):
		return 2
	}
	return 1
}
