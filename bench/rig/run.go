package rig

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Run brings the rig up (and idle), runs body with a context that SIGINT
// and SIGTERM cancel and a temporary directory, and removes both
// afterwards. The idle check's figure is the RESULT line
// prefix/idle_server_cpu_busy.
func (r Rig) Run(prefix string, serverCPU, clientCPU int, body func(ctx context.Context, tmp string) error) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tmp, err := os.MkdirTemp("", "santa-"+prefix+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	idle, err := r.Start(serverCPU, clientCPU)
	if err != nil {
		return err
	}
	defer r.Stop(&err)
	fmt.Printf("RESULT name=%s/idle_server_cpu_busy value=%.3f unit=%%\n", prefix, idle)
	return body(ctx, tmp)
}
