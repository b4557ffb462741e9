package cli

import (
	"context"
	"flag"

	"github.com/santa-offload/santa/client"
)

// learnOptions: santactl learn turns a UDP service's learning on or off
// (protocol version 2). An agent does this itself; the command is for
// looking at a service's traffic by hand.
type learnOptions struct {
	keyOffset uint
	probePort uint
	counts    uint
	off       bool
}

func (o *learnOptions) flags(fs *flag.FlagSet) {
	fs.UintVar(&o.keyOffset, "key-offset", 0, "count requests by their payload from `BYTE` on (DNS: 2, after the transaction id)")
	fs.UintVar(&o.probePort, "probe-port", 0, "UDP source `PORT` whose requests are never answered by a rule nor counted")
	fs.UintVar(&o.counts, "counts", 0, "count at most `N` passed requests a CPU and window (protocol version 6; 0: santad's most, 100000)")
	fs.BoolVar(&o.off, "off", false, "turn learning off")
}

func (o *learnOptions) run(ctx context.Context, e *env, args []string) error {
	service, err := serviceArgs(args, 1, 1)
	if err != nil {
		return err
	}
	switch {
	case o.keyOffset > 0xffff:
		return usagef("-key-offset %d is beyond any payload", o.keyOffset)
	case o.probePort > 0xffff:
		return usagef("-probe-port %d is not a port", o.probePort)
	case o.counts > 0xffffffff:
		return usagef("-counts %d is beyond any count", o.counts)
	}
	c, err := e.connect(ctx)
	if err != nil {
		return err
	}
	return c.SetLearning(service, client.Learning{KeyOffset: uint16(o.keyOffset), ProbePort: uint16(o.probePort),
		Counts: uint32(o.counts), Enabled: !o.off})
}
