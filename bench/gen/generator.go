package gen

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/santa-offload/santa/internal/popularity"
	"github.com/santa-offload/santa/internal/rules"
)

// MaxFrame is the longest request frame (GEN_MAX_FRAME).
const MaxFrame = len(genGenFrame{}.Data)

// Config is what a Generator sends and expects.
type Config struct {
	// Ifindex is the client end of the veth, in the caller's network
	// namespace: requests leave through it, replies arrive on it.
	Ifindex int
	// Requests are whole Ethernet frames, checksums included, each at most
	// MaxFrame bytes, all from UDP port ReplyPort.
	Requests  [][]byte
	ReplyPort uint16
	// Expected, if set, are the reply payloads that count as right; any
	// other reply counts as bad. Without it replies are only counted.
	Expected [][]byte
	// Popularity draws the order requests are sent in: a sequence of
	// SequenceLen draws (a power of two; default 1<<20), cycled.
	Popularity  popularity.Popularity
	SequenceLen int
	Seed        uint64
}

// Generator sends requests from the calling thread's CPU and counts replies.
type Generator struct {
	objs    genObjects
	count   link.Link
	held    *holder
	ifindex int
	first   []byte
}

// Counters are a generator's totals since Open.
type Counters struct {
	Sent, SendErrors    uint64
	Replies, ReplyBytes uint64
	ReplyOK, ReplyBad   uint64
}

// Open loads the generator, fills its request table and attaches the reply
// counter to the interface (native XDP; veth supports it).
func Open(c Config) (*Generator, error) {
	if err := check(&c); err != nil {
		return nil, err
	}
	spec, err := loadGen()
	if err != nil {
		return nil, fmt.Errorf("loading generator spec: %w", err)
	}
	spec.Maps["requests"].MaxEntries = uint32(len(c.Requests))
	spec.Maps["sequence"].MaxEntries = uint32(c.SequenceLen)
	spec.Maps["expected"].MaxEntries = uint32(max(1, len(c.Expected)))
	port := make([]byte, 2)
	binary.BigEndian.PutUint16(port, c.ReplyPort)
	for name, v := range map[string]any{
		"gen_seq_mask":   uint32(c.SequenceLen - 1),
		"gen_reply_port": binary.NativeEndian.Uint16(port),
		"gen_check":      boolByte(c.Expected != nil),
	} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("setting %s: %w", name, err)
		}
	}
	g := &Generator{ifindex: c.Ifindex, first: c.Requests[0]}
	if err := spec.LoadAndAssign(&g.objs, nil); err != nil {
		return nil, fmt.Errorf("loading generator: %w", err)
	}
	if err := g.fill(c); err != nil {
		g.objs.Close()
		return nil, err
	}
	g.count, err = link.AttachXDP(link.XDPOptions{Program: g.objs.GenCount, Interface: c.Ifindex, Flags: link.XDPDriverMode})
	if err != nil {
		g.objs.Close()
		return nil, fmt.Errorf("attaching the reply counter: %w", err)
	}
	if g.held, err = hold(g.objs.GenSend); err != nil {
		return nil, errors.Join(err, g.count.Close(), g.objs.Close())
	}
	return g, nil
}

func check(c *Config) error {
	if len(c.Requests) == 0 {
		return errors.New("no requests")
	}
	for i, f := range c.Requests {
		if len(f) < 14 || len(f) > MaxFrame {
			return fmt.Errorf("request %d: a %d-byte frame; frames are 14 to %d bytes", i, len(f), MaxFrame)
		}
	}
	if c.SequenceLen == 0 {
		c.SequenceLen = 1 << 20
	}
	if c.SequenceLen&(c.SequenceLen-1) != 0 {
		return fmt.Errorf("sequence length %d is not a power of two", c.SequenceLen)
	}
	if c.ReplyPort == 0 {
		return errors.New("no reply port")
	}
	return nil
}

func (g *Generator) fill(c Config) error {
	keys := make([]uint32, len(c.Requests))
	frames := make([]genGenFrame, len(c.Requests))
	for i, f := range c.Requests {
		keys[i] = uint32(i)
		frames[i].Len = uint32(len(f))
		copy(frames[i].Data[:], f)
	}
	if _, err := g.objs.Requests.BatchUpdate(keys, frames, nil); err != nil {
		return fmt.Errorf("writing requests: %w", err)
	}
	seq := c.Popularity.Sequence(len(c.Requests), c.SequenceLen, c.Seed)
	at := make([]uint32, len(seq))
	for i := range at {
		at[i] = uint32(i)
	}
	if _, err := g.objs.Sequence.BatchUpdate(at, seq, nil); err != nil {
		return fmt.Errorf("writing the request sequence: %w", err)
	}
	if len(c.Expected) == 0 {
		return nil
	}
	hashes := make([]uint32, len(c.Expected))
	for i, p := range c.Expected {
		hashes[i] = rules.FNV1a(rules.FNVOffset, p)
	}
	if _, err := g.objs.Expected.BatchUpdate(hashes, make([]uint8, len(hashes)), nil); err != nil {
		return fmt.Errorf("writing expected replies: %w", err)
	}
	return nil
}

// xdpMd is struct xdp_md, the context of a test run.
type xdpMd struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

// run runs the sender n times on the calling thread's CPU: n requests,
// unless sending is paced.
func (g *Generator) run(n uint32) error {
	_, err := g.objs.GenSend.Run(&ebpf.RunOptions{
		Data:      g.first,
		Repeat:    n,
		Flags:     unix.BPF_F_TEST_XDP_LIVE_FRAMES,
		Context:   xdpMd{DataEnd: uint32(len(g.first)), IngressIfindex: uint32(g.ifindex)},
		BatchSize: 256,
	})
	if err != nil {
		return fmt.Errorf("running the sender: %w", err)
	}
	return nil
}

// Run sends from the calling thread's CPU for d: open loop (as fast as the
// CPU goes) if rate is 0, else rate requests per second, paced by the
// sender program itself. It stops early if ctx ends. It returns the time it
// took. One Run at a time: the sender keeps one cursor for all CPUs.
func (g *Generator) Run(ctx context.Context, d time.Duration, rate float64) (time.Duration, error) {
	var p genGenPace
	if rate > 0 {
		p.IntervalNs = uint64(max(1, math.Round(1e9/rate)))
	}
	if err := g.objs.Pace.Update(uint32(0), p, ebpf.UpdateAny); err != nil {
		return 0, fmt.Errorf("setting the pace: %w", err)
	}
	start := time.Now()
	for {
		elapsed := time.Since(start)
		if elapsed >= d || ctx.Err() != nil {
			return elapsed, ctx.Err()
		}
		// A few ms per test run: each run costs the kernel a page pool.
		if err := g.run(1 << 16); err != nil {
			return time.Since(start), err
		}
	}
}

// RateName names an offered load in results: requests/s, or "open" for 0.
func RateName(rate float64) string {
	if rate == 0 {
		return "open"
	}
	return strconv.FormatFloat(rate, 'f', 0, 64)
}

// Counters sums the per-CPU counters.
func (g *Generator) Counters() (Counters, error) {
	var per []genGenCounters
	if err := g.objs.Counters.Lookup(uint32(0), &per); err != nil {
		return Counters{}, fmt.Errorf("reading counters: %w", err)
	}
	var n [genGenCounterGEN_NCOUNTERS]uint64
	for _, c := range per {
		for i := range n {
			n[i] += c.N[i]
		}
	}
	return Counters{
		Sent: n[genGenCounterGEN_SENT], SendErrors: n[genGenCounterGEN_SEND_ERROR],
		Replies: n[genGenCounterGEN_REPLIES], ReplyBytes: n[genGenCounterGEN_REPLY_BYTES],
		ReplyOK: n[genGenCounterGEN_REPLY_OK], ReplyBad: n[genGenCounterGEN_REPLY_BAD],
	}, nil
}

// Close detaches the reply counter and releases the programs and maps.
func (g *Generator) Close() error {
	return errors.Join(g.held.release(), g.count.Close(), g.objs.Close())
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
