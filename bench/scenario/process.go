package scenario

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/santa-offload/santa/bench/rig"
	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/internal/netproc"
	"github.com/santa-offload/santa/internal/santadtest"
)

// OffloadAgent is the product under test, as an operator runs it: santad
// on the rig's server veth and an offload agent (santa-offload dns or
// memcached) beside the server, both in the server namespace and pinned to
// the server CPU (their work is the server machine's, so it counts in the
// server core's µs per reply). Each Start is a fresh santad (new journal,
// new pins) and agent: no rules, no counts. It is an Agent.
type OffloadAgent struct {
	// Sockets is how many services the agent must have attached before
	// Start returns (the server's sockets it offloads, and any listener
	// it watches); set it before Start.
	Sockets int

	rig           rig.Rig
	cpu           int
	santad, agent string // binaries
	command       AgentCommand
	dir           string
	logs          string // where each run's logs are kept ("": nowhere)
	runs          int
	runDir        string // this run's files

	sd   *santadtest.Santad
	cl   *client.Client
	proc *netproc.Proc
}

// AgentCommand is the agent's command line (after the binary) for at most
// maxRules items, talking to santad at socket.
type AgentCommand func(socket string, maxRules int) []string

// NewOffloadAgent builds santad and santa-offload into dir; command is the
// agent's command line. Each run's logs are kept in logs unless it is "".
func NewOffloadAgent(r rig.Rig, cpu int, dir, logs string, command AgentCommand) (*OffloadAgent, error) {
	a := &OffloadAgent{rig: r, cpu: cpu, dir: dir, logs: logs, command: command}
	var err error
	if a.santad, err = santadtest.Build(dir); err != nil {
		return nil, err
	}
	if a.agent, err = santadtest.BuildCommand(dir, "santa-offload"); err != nil {
		return nil, fmt.Errorf("the offload agent (cmd/santa-offload) is needed for -agent: %w", err)
	}
	return a, nil
}

// Start starts santad, attached to the server veth in native XDP mode,
// and the agent with at most n rules, and returns once the agent has
// attached every one of the server's sockets.
func (a *OffloadAgent) Start(ctx context.Context, n int) (err error) {
	a.runs++
	dir := filepath.Join(a.dir, fmt.Sprintf("agent-%d-top%d", a.runs, n))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	a.runDir = dir
	a.sd = santadtest.New(a.santad, &santadtest.Netns{Name: a.rig.ServerNS()}, dir, santadtest.PinPath("agentbench"))
	a.sd.Interfaces = []string{a.rig.ServerDev()}
	defer func() {
		if err != nil {
			err = errors.Join(err, a.Stop())
		}
	}()
	if err := a.sd.Start(); err != nil {
		return err
	}
	if err := netproc.PinThreads(a.sd.PID(), a.cpu); err != nil {
		return err
	}
	if a.cl, err = client.Dial(a.sd.Socket); err != nil {
		return err
	}
	if err := a.checkNative(); err != nil {
		return err
	}
	log := filepath.Join(dir, "agent.log")
	argv := append([]string{a.agent}, a.command(a.sd.Socket, n)...)
	if a.proc, err = netproc.Start(netproc.Spec{Name: "santa-offload", Argv: argv, Netns: a.rig.ServerNS(), LogPath: log,
		Pin: true, CPU: a.cpu, Ready: a.attached, ReadyTimeout: agentReadyTimeout}); err != nil {
		out, _ := os.ReadFile(log)
		return fmt.Errorf("%w\nthe agent's log:\n%s", err, out)
	}
	return nil
}

// agentReadyTimeout bounds the agent's start: finding the server's sockets
// and attaching them.
const agentReadyTimeout = 30 * time.Second

// xdpGoneTimeout bounds the wait for santad's XDP program to leave the
// veth after santad ended.
const xdpGoneTimeout = 10 * time.Second

// checkNative checks that santad's XDP program is native on the server
// veth, as the oracle's is.
func (a *OffloadAgent) checkNative() error {
	st, err := a.cl.Status()
	if err != nil {
		return err
	}
	for _, i := range st.Interfaces {
		if i.Name == a.rig.ServerDev() {
			if i.XDP != string(model.XDPNative) {
				return fmt.Errorf("santad's XDP program is %s on %s, not native", i.XDP, i.Name)
			}
			return nil
		}
	}
	return fmt.Errorf("santad is not attached to %s", a.rig.ServerDev())
}

// attached succeeds once santad has a.Sockets services.
func (a *OffloadAgent) attached() error {
	svcs, err := a.cl.Services()
	if err != nil {
		return err
	}
	if len(svcs) < a.Sockets {
		return fmt.Errorf("the agent has attached %d of the server's %d sockets", len(svcs), a.Sockets)
	}
	return nil
}

// Offloaded sums the requests santad answered on the agent's services;
// the items are the most rules one service has (the agent installs every
// form on each socket of a SO_REUSEPORT group).
func (a *OffloadAgent) Offloaded() (answered uint64, items int, err error) {
	svcs, err := a.cl.Services()
	if err != nil {
		return 0, 0, err
	}
	for _, s := range svcs {
		st, err := a.cl.ServiceStats(s.ServiceID)
		if err != nil {
			return 0, 0, err
		}
		answered += st.Matched
		items = max(items, int(s.Rules))
	}
	return answered, items, nil
}

// Stop stops the agent (which detaches its services), then santad, and
// removes santad's pins, and waits until the veth is free of its XDP
// program.
func (a *OffloadAgent) Stop() error {
	var errs []error
	if a.proc != nil {
		errs = append(errs, a.proc.Stop())
		a.proc = nil
	}
	if a.cl != nil {
		a.cl.Close()
		a.cl = nil
	}
	if a.sd != nil {
		errs = append(errs, a.sd.Stop(), a.sd.Close(), a.rig.WaitServerXDPGone(xdpGoneTimeout), a.keepLogs())
		a.sd = nil
	}
	return errors.Join(errs...)
}

// keepLogs copies the run's agent and santad logs into a.logs, named
// after the run's directory.
func (a *OffloadAgent) keepLogs() error {
	if a.logs == "" {
		return nil
	}
	name := filepath.Join(a.logs, filepath.Base(a.runDir))
	agent, _ := os.ReadFile(filepath.Join(a.runDir, "agent.log"))
	return errors.Join(os.WriteFile(name+"-agent.log", agent, 0o644),
		os.WriteFile(name+"-santad.log", []byte(a.sd.Log()), 0o644))
}
