package cli

import (
	"bytes"
	"context"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

func TestUsage(t *testing.T) {
	_, path := newFake(t)
	tests := []struct {
		args           []string
		stdout, stderr string // prefixes
		code           int
	}{
		{[]string{"help"}, "usage: santactl [-socket PATH] [-json] COMMAND [options] [arguments]\n\nsantactl manages santad", "", 0},
		{[]string{"-h"}, "usage: santactl [-socket PATH] [-json] COMMAND", "", 0},
		{[]string{"help", "top"}, "usage: santactl [-socket PATH] [-json] top [-interval D] [-n N] [-iterations K] [-sort hits|rate] [SERVICE]\n\ntop: a live view of the rules with the most hits.\n\noptions:\n  -interval duration", "", 0},
		{[]string{"stats", "-h"}, "usage: santactl [-socket PATH] [-json] stats [-top N] SERVICE\n\nstats: a service's counters and its rules' hits.\n\noptions:\n", "", 0},
		{nil, "", "santactl: no command; try santactl help\nusage: santactl [-socket PATH] [-json] COMMAND [options] [arguments]\n", 2},
		{[]string{"frobnicate"}, "", "santactl: unknown command \"frobnicate\"; try santactl help\n", 2},
		{[]string{"help", "frobnicate"}, "", "santactl: help: unknown command \"frobnicate\"\nusage: santactl help [COMMAND]\n", 2},
		{[]string{"-x", "status"}, "", "santactl: flag provided but not defined: -x\n", 2},
		{[]string{"status", "now"}, "", "santactl: status: too many arguments: [\"now\"]\n", 2},
		{[]string{"rules"}, "", "santactl: rules: too few arguments\nusage: santactl [-socket PATH] [-json] rules SERVICE [RULE_ID] | show SERVICE RULE_ID\n", 2},
		{[]string{"rules", "show", "7"}, "", "santactl: rules: too few arguments\n", 2},
		{[]string{"rules", "list", "7", "1"}, "", "santactl: rules: too many arguments: [\"1\"]\n", 2},
		{[]string{"stats", "-top", "-1", "7"}, "", "santactl: stats: -top -1 is negative\n", 2},
		{[]string{"top", "-sort", "bytes"}, "", "santactl: top: -sort \"bytes\": want hits or rate\n", 2},
		{[]string{"top", "-interval", "0s"}, "", "santactl: top: -interval 0s is not positive\n", 2},
		{[]string{"detach", "7", "-nope"}, "", "santactl: detach: flag provided but not defined: -nope\n", 2},
	}
	for _, tt := range tests {
		stdout, stderr, code := santactl(t, path, tt.args...)
		if !strings.HasPrefix(stdout, tt.stdout) || !strings.HasPrefix(stderr, tt.stderr) || (tt.stdout == "") != (stdout == "") || (tt.stderr == "") != (stderr == "") || code != tt.code {
			t.Errorf("%q: stdout %q, stderr %q, exit status %d; want them to begin %q, %q, status %d", tt.args, stdout, stderr, code, tt.stdout, tt.stderr, tt.code)
		}
	}
}

// TestHelpListsEveryCommand keeps the usage text and the table together.
func TestHelpListsEveryCommand(t *testing.T) {
	stdout, _, _ := santactl(t, "", "help")
	for _, c := range commands {
		if !strings.Contains(stdout, "\n  "+c.name+" ") {
			t.Errorf("help does not list %s:\n%s", c.name, stdout)
		}
	}
}

func TestParseArgs(t *testing.T) {
	tests := []struct {
		args []string
		pos  []string
		f    string
	}{
		{[]string{"7", "-f", "x.json"}, []string{"7"}, "x.json"},
		{[]string{"-f", "x.json", "7", "8"}, []string{"7", "8"}, "x.json"},
		{[]string{"7", "-", "8"}, []string{"7", "-", "8"}, ""},
		{[]string{"7", "--", "-f", "x"}, []string{"7", "-f", "x"}, ""},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("", flag.ContinueOnError)
		f := fs.String("f", "", "")
		pos, err := parseArgs(fs, tt.args)
		if err != nil || !slices.Equal(pos, tt.pos) || *f != tt.f {
			t.Errorf("parseArgs(%q) gives %q, -f %q, %v; want %q, -f %q", tt.args, pos, *f, err, tt.pos, tt.f)
		}
	}
}

// TestTopInterrupted checks that an interrupt ends top quietly.
func TestTopInterrupted(t *testing.T) {
	path, _ := topFake(t)
	ctx, cancel := context.WithCancel(context.Background())
	e := testEnv(path, "", nil)
	var out bytes.Buffer
	e.stdout = interrupter{&out, cancel} // interrupted as the first refresh is printed
	err := run(ctx, []string{"-socket", path, "top", "-interval", "1h", "7"}, e)
	if err != nil || strings.Count(out.String(), "SERVICE") != 1 {
		t.Errorf("interrupted top returns %v after printing\n%s\nwant one refresh and no error", err, out.String())
	}
}

// interrupter is a writer that interrupts as it writes.
type interrupter struct {
	io.Writer
	interrupt func()
}

func (i interrupter) Write(p []byte) (int, error) {
	i.interrupt()
	return i.Writer.Write(p)
}

// TestRun checks the entry point main and integration tests use.
func TestRun(t *testing.T) {
	_, path := withService(t)
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), []string{"-socket", path, "services"}, &stdout, &stderr)
	if err != nil || !strings.HasPrefix(stdout.String(), "ID  PROTO") || stderr.Len() != 0 {
		t.Errorf("Run gives %v, stdout %q, stderr %q", err, stdout.String(), stderr.String())
	}
	err = Run(context.Background(), []string{"-socket", path, "rules", "9"}, &stdout, &stderr)
	if ExitCode(err) != 1 || stderr.String() != "santactl: rules: no service 9 (ENOENT)\n" {
		t.Errorf("Run gives %v (exit status %d), stderr %q", err, ExitCode(err), stderr.String())
	}
}
