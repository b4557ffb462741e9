// Package version says which build a binary is, for --version and for
// santad's STATUS: the module's version and the commit it was built from
// as the Go toolchain recorded them, or the version a package build sets
// with
//
//	go build -ldflags "-X github.com/santa-offload/santa/internal/version.Version=1.2.3"
//
// (a build from a source tarball has no VCS to record).
package version

import (
	"fmt"
	"os"
	"runtime/debug"
	"strings"
)

// Version, if set by -ldflags -X, is the version; else the module's.
var Version string

// String is program's version line: its version, and the commit, commit
// time and whether the tree had uncommitted changes where the toolchain
// recorded them, and the Go version:
//
//	santad v0.0.0-20261126173951-5e7dcfb0a1b2 commit 5e7dcfb0a1b2 (2026-11-26T17:39:51Z, modified) go1.26.8
func String(program string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = &debug.BuildInfo{Main: debug.Module{Version: "(unknown)"}}
	}
	return line(program, Version, bi)
}

// line is String of build information bi, with version set by ldflags.
func line(program, version string, bi *debug.BuildInfo) string {
	if version == "" {
		version = bi.Main.Version
	}
	if version == "" {
		version = "(devel)"
	}
	var rev, at, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value[:min(12, len(s.Value))]
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "modified"
			}
		}
	}
	out := []string{program, version}
	if rev != "" {
		details := strings.Join(nonEmpty(at, modified), ", ")
		out = append(out, "commit", rev)
		if details != "" {
			out = append(out, "("+details+")")
		}
	}
	if bi.GoVersion != "" {
		out = append(out, bi.GoVersion)
	}
	return strings.Join(out, " ")
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Handle prints program's version line and exits, if args (the command
// line without the program name) asks for it: "--version" or "-version"
// as its first argument.
func Handle(program string, args []string) {
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		fmt.Println(String(program))
		os.Exit(0)
	}
}
