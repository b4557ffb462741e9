package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/santa-offload/santa/client"
)

// env is what a command runs with: the global options, the streams and
// the connection to santad.
type env struct {
	global   globalOptions
	stdin    io.Reader
	stdout   io.Writer
	stderr   io.Writer
	terminal bool // stdout is a terminal: top redraws in place
	// errTerminal: stderr is a terminal, where long batches show progress.
	errTerminal bool
	clock       func() time.Time // when top samples, so tests can fix the rates

	conn    *client.Client // dialed by the first command that needs it
	unwatch func() bool    // stops closing conn at an interrupt
}

// globalOptions come before the command, or among its own options.
type globalOptions struct {
	socket string
	json   bool
}

func (g *globalOptions) flags(fs *flag.FlagSet) {
	// The defaults are the values so far, so that an option given before
	// the command survives the command's own flag set.
	fs.StringVar(&g.socket, "socket", g.socket, "santad's `PATH` ($SANTA_SOCKET sets the default)")
	fs.BoolVar(&g.json, "json", g.json, "print one JSON document instead of tables")
}

// Run runs santactl with args, the command line without the program name.
// It writes its output to stdout and reports a failure on stderr, as
// "santactl: COMMAND: what went wrong", before returning it; ExitCode
// gives the exit status for the error.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return run(ctx, args, &env{
		global:      globalOptions{socket: client.DefaultPath()},
		stdin:       os.Stdin,
		stdout:      stdout,
		stderr:      stderr,
		terminal:    isTerminal(stdout),
		errTerminal: isTerminal(stderr),
		clock:       time.Now,
	})
}

func run(ctx context.Context, args []string, e *env) error {
	err := dispatch(ctx, args, e)
	e.disconnect()
	if err != nil {
		fmt.Fprintf(e.stderr, "santactl: %v\n", err)
		var u *usageError
		if errors.As(err, &u) {
			fmt.Fprintf(e.stderr, "usage: %s\n", u.synopsis)
		}
	}
	return err
}

// connect dials santad once per run. An interrupt closes the connection,
// which ends a wait for a reply that would otherwise never end.
func (e *env) connect(ctx context.Context) (*client.Client, error) {
	if e.conn == nil {
		c, err := client.Dial(e.global.socket)
		if err != nil {
			return nil, err
		}
		e.conn, e.unwatch = c, context.AfterFunc(ctx, func() { c.Close() })
	}
	return e.conn, nil
}

// disconnect closes the connection to santad, if there is one.
func (e *env) disconnect() {
	if e.conn != nil {
		e.unwatch()
		e.conn.Close()
		e.conn = nil
	}
}

// dispatch parses the global options, then runs the command.
func dispatch(ctx context.Context, args []string, e *env) error {
	fs := newFlagSet()
	e.global.flags(fs)
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		return writeUsage(e.stdout)
	case err != nil:
		return &usageError{msg: err.Error(), synopsis: globalSynopsis}
	case fs.NArg() == 0:
		return &usageError{msg: "no command; try santactl help", synopsis: globalSynopsis}
	}
	name, args := fs.Arg(0), fs.Args()[1:]
	if name == "help" {
		return help(e.stdout, args)
	}
	cmd, ok := lookup(name)
	if !ok {
		return &usageError{msg: fmt.Sprintf("unknown command %q; try santactl help", name), synopsis: globalSynopsis}
	}
	opts := cmd.options()
	fs = cmd.flagSet(&e.global, opts)
	pos, err := parseArgs(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return cmd.writeHelp(e.stdout, fs)
	case err != nil:
		return &usageError{cmd: name, msg: err.Error(), synopsis: cmd.synopsis()}
	}
	err = opts.run(ctx, e, pos)
	var u *usageError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &u):
		u.cmd, u.synopsis = name, cmd.synopsis()
		return u
	case ctx.Err() != nil:
		return fmt.Errorf("%s: interrupted", name)
	}
	return fmt.Errorf("%s: %w", name, explain(err))
}
