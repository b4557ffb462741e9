package main

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/santa-offload/santa/bench/mcitems"
	"github.com/santa-offload/santa/bench/rig"
	"github.com/santa-offload/santa/bench/scenario"
	"github.com/santa-offload/santa/internal/dnsload"
	"github.com/santa-offload/santa/internal/popularity"
)

// socketClient is the agent sweep's second client, beside the XDP
// generator: a closed-loop socket client (internal/dnsload: a window of
// dnsload.DefaultWindow GETs outstanding, sent with sendmmsg and read with
// recvmmsg in batches of up to as many) from the client namespace, for d
// a run. Its UDP checksums are full (the rig's client veth computes them
// in software, as a NIC would deliver them: checked first), and every
// reply is checked against memcached's own, captured now, before Santa is
// involved.
func socketClient(c setup, d time.Duration) (*scenario.Client, error) {
	if err := c.Rig.CheckClientTxChecksums(); err != nil {
		return nil, err
	}
	forms := mcitems.Forms(c.Items)
	conn, err := c.Rig.Dial("udp", port)
	if err != nil {
		return nil, err
	}
	expect, err := dnsload.Capture(conn, forms, 2)
	conn.Close()
	if err != nil {
		return nil, err
	}
	for i, e := range expect {
		if err := mcitems.CheckReply(i, e.Reply); err != nil {
			return nil, fmt.Errorf("socket client: %w", err)
		}
	}
	server := netip.AddrPortFrom(netip.MustParseAddr(rig.ServerIPv4), port)
	run := func(ctx context.Context, pop popularity.Popularity) (scenario.ClientSample, error) {
		var res dnsload.Result
		use, err := rig.Around(c.ClientCPU, c.ServerCPU, func() error {
			var err error
			res, err = dnsload.Run(ctx, dnsload.Config{Netns: c.Rig.ClientNS(), Server: server, Forms: forms, Expect: expect,
				Popularity: pop, Seed: 1, Count: 1 << 30, Duration: d, Window: dnsload.DefaultWindow, Batch: dnsload.DefaultWindow})
			return err
		})
		switch {
		case err != nil:
			return scenario.ClientSample{}, err
		case res.Mismatches > 0:
			return scenario.ClientSample{}, fmt.Errorf("socket client: %d replies were not memcached's:\n%s",
				res.Mismatches, res.Report(forms))
		}
		return scenario.ClientSample{Replies: float64(res.Replies) / res.Elapsed.Seconds(),
			ServerUSPer: use.ServerUSPer(uint64(res.Replies)), ServerBusy: use.ServerBusyPct()}, nil
	}
	return &scenario.Client{Name: "socket", Run: run}, nil
}
