package cli

import (
	"flag"
	"fmt"
	"io"
	"strconv"
)

// usageError is a command line santactl cannot make sense of. It exits
// with status 2, and its synopsis is printed after it.
type usageError struct {
	cmd      string // "" before the command is known
	msg      string
	synopsis string
}

func (u *usageError) Error() string {
	if u.cmd == "" {
		return u.msg
	}
	return u.cmd + ": " + u.msg
}

// usagef is a usage error of the running command; dispatch names it.
func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// newFlagSet makes a flag set that reports to its caller instead of
// printing: errors are reported once, by run.
func newFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("santactl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseArgs parses options that may come before, between or after the
// positional arguments ("delete 7 -f rules.json"), which it returns. After
// "--" everything is positional.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// parseID reads a SERVICE or RULE_ID argument.
func parseID(what, s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, usagef("%s %q is not a number from 0 to 4294967295", what, s)
	}
	return uint32(n), nil
}

// serviceArgs checks the number of positional arguments (min >= 1) and
// parses the first, the SERVICE most commands start with.
func serviceArgs(args []string, min, max int) (uint32, error) {
	if err := wantArgs(args, min, max); err != nil {
		return 0, err
	}
	return parseID("SERVICE", args[0])
}

// wantArgs checks the number of positional arguments.
func wantArgs(args []string, min, max int) error {
	switch {
	case len(args) < min:
		return usagef("too few arguments")
	case len(args) > max:
		return usagef("too many arguments: %q", args[max:])
	}
	return nil
}
