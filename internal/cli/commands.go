package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/santa-offload/santa/client"
)

// command is an entry of the command table.
type command struct {
	name    string
	args    string // what follows the command's name on the usage line
	summary string
	options func() options // a fresh options struct of the command
}

// options is a command's options struct: it declares the command's flags
// and runs it with the positional arguments left over.
type options interface {
	flags(fs *flag.FlagSet)
	run(ctx context.Context, e *env, args []string) error
}

var commands = []command{
	{"status", "", "the daemon's version, interfaces, rules and capacity",
		func() options { return &statusOptions{} }},
	{"services", "", "the attached sockets",
		func() options { return &servicesOptions{} }},
	{"rules", "SERVICE [RULE_ID] | show SERVICE RULE_ID", "a service's rules, or one rule in full",
		func() options { return &rulesOptions{} }},
	{"attach", "-pid PID -fd FD | -port PORT [-tcp] [-addr ADDR] [-netns PATH]", "attach a running server's UDP socket or TCP listener",
		func() options { return &attachOptions{} }},
	{"detach", "SERVICE", "remove a service and all its rules",
		func() options { return &detachOptions{} }},
	{"add", "SERVICE FILE", "install the rules of a rule file (- for stdin), all or nothing",
		func() options { return &addOptions{} }},
	{"delete", "SERVICE RULE_ID... | SERVICE -f FILE", "delete rules by id, or the rules with the conditions of a rule file",
		func() options { return &deleteOptions{} }},
	{"stats", "[-top N] SERVICE", "a service's counters and its rules' hits",
		func() options { return &statsOptions{} }},
	{"top", "[-interval D] [-n N] [-iterations K] [-sort hits|rate] [SERVICE]", "a live view of the rules with the most hits",
		func() options { return &topOptions{} }},
	{"learn", "[-key-offset BYTE] [-probe-port PORT] [-counts N] [-off] SERVICE", "count a UDP service's passed requests, for hot",
		func() options { return &learnOptions{} }},
	{"hot", "[-n N] SERVICE", "the requests a learning service passed most in the last window",
		func() options { return &hotOptions{} }},
	{"parser", "[-domain ID] SERVICE memcached | SERVICE none", "mark a service as memcached's, so that its writes invalidate guarded rules",
		func() options { return &parserOptions{} }},
	{"generation", "SERVICE KEY", "what a guard of a memcached key is built at now",
		func() options { return &generationOptions{} }},
}

const globalSynopsis = "santactl [-socket PATH] [-json] COMMAND [options] [arguments]"

func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func (c command) synopsis() string {
	return "santactl [-socket PATH] [-json] " + c.name + " " + c.args
}

// flagSet holds the command's flags, the global ones among them.
func (c command) flagSet(g *globalOptions, opts options) *flag.FlagSet {
	fs := newFlagSet()
	g.flags(fs)
	opts.flags(fs)
	return fs
}

func (c command) writeHelp(w io.Writer, fs *flag.FlagSet) error {
	fmt.Fprintf(w, "usage: %s\n\n%s: %s.\n\noptions:\n", c.synopsis(), c.name, c.summary)
	fs.SetOutput(w)
	fs.PrintDefaults()
	return nil
}

func writeUsage(w io.Writer) error {
	fmt.Fprintf(w, "usage: %s\n\nsantactl manages santad, which answers frequent UDP requests in the kernel.\n\ncommands:\n", globalSynopsis)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	fmt.Fprintf(tw, "  help [COMMAND]\tthis text, or a command's\n")
	tw.Flush()
	fmt.Fprintf(w, "\nglobal options, before the command or among its own:\n")
	fs := newFlagSet()
	(&globalOptions{socket: client.DefaultPath()}).flags(fs)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprintf(w, "\n\"santactl COMMAND -h\" describes a command; docs/santactl.md, all of them.\n"+
		"Exit status: 0 on success, 1 on a failure, 2 on a usage error.\n")
	return nil
}

// help is "santactl help [COMMAND]".
func help(w io.Writer, args []string) error {
	switch len(args) {
	case 0:
		return writeUsage(w)
	case 1:
		if c, ok := lookup(args[0]); ok {
			return c.writeHelp(w, c.flagSet(&globalOptions{socket: client.DefaultPath()}, c.options()))
		}
		return &usageError{cmd: "help", msg: fmt.Sprintf("unknown command %q", args[0]), synopsis: "santactl help [COMMAND]"}
	}
	return &usageError{cmd: "help", msg: "want at most one COMMAND", synopsis: "santactl help [COMMAND]"}
}
