// Command santactl manages santad, the daemon that answers frequent UDP
// requests in the kernel: its status, services and rules, and their
// counters. docs/santactl.md describes every command.
//
//	santactl [-socket PATH] [-json] COMMAND [options] [arguments]
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/santa-offload/santa/internal/cli"
	"github.com/santa-offload/santa/internal/version"
)

func main() {
	version.Handle("santactl", os.Args[1:])
	// An interrupt ends top, and a wait for the daemon, through ctx.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(cli.ExitCode(err))
}
