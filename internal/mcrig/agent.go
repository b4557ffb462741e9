package mcrig

import (
	"context"
	"fmt"
	"log/slog"
	"syscall"
	"time"

	"github.com/santa-offload/santa/internal/netns"
	"github.com/santa-offload/santa/internal/offload/config"
	"github.com/santa-offload/santa/internal/offload/mcagent"
)

// agentAttachTimeout bounds the agent's start: finding memcached's sockets
// and attaching them.
const agentAttachTimeout = 10 * time.Second

// Agent runs the memcached agent (santa-offload memcached, mcagent.Run in
// this process) on a rig started without attach, until ctx ends: it
// attaches memcached's sockets and offloads what the readers make hot,
// reading the hot set every 250 ms. Agent returns once the agent manages
// memcached's UDP socket; wait waits for the agent's end (after ctx's) and
// returns its error.
func (r *Rig) Agent(ctx context.Context, log *slog.Logger) (wait func() error, err error) {
	acfg := mcagent.DefaultConfig()
	acfg.Port, acfg.Netns, acfg.Socket = Addr.Port(), netns.Named(r.NS.Name), r.Santad.Socket
	acfg.Window, acfg.Scan = config.Duration(250*time.Millisecond), config.Duration(50*time.Millisecond)
	acfg.Log = log
	ctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mcagent.Run(ctx, acfg) }()
	wait = func() error {
		err := <-done
		stop()
		return err
	}
	if err := r.waitAgent(agentAttachTimeout, done); err != nil {
		stop()
		<-done
		return nil, err
	}
	return wait, nil
}

// waitAgent waits until the agent manages memcached's UDP socket, or ends.
func (r *Rig) waitAgent(within time.Duration, done chan error) error {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case err := <-done:
			done <- err // for wait
			return fmt.Errorf("the agent ended before attaching memcached: %v", err)
		default:
		}
		svcs, err := r.Client.Services()
		if err != nil {
			return err
		}
		for _, s := range svcs {
			if s.Protocol == syscall.IPPROTO_UDP && s.Port == Addr.Port() && s.Manager == mcagent.ClientName {
				return nil
			}
		}
	}
	return fmt.Errorf("the agent did not attach memcached's UDP socket within %v", within)
}
