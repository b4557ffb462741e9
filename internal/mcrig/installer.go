package mcrig

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/mccheck"
	"github.com/santa-offload/santa/internal/netns"
	"github.com/santa-offload/santa/internal/offload/probe"
	"github.com/santa-offload/santa/rule"
)

// Order is the order an installer reads a key's generation and its value
// in.
type Order int

const (
	// GenerationFirst is the agent's protocol: the generation, then the
	// value. A rule built so is never stale.
	GenerationFirst Order = iota
	// ValueFirst is wrong: a write between the two reads leaves a rule
	// with the old value and the new generation. The checker must catch
	// it.
	ValueFirst
)

// InstallStats is what installers did.
type InstallStats struct {
	Installed, Replaced, Deleted int64
	Misses                       int64 // rules answering a miss (END)
	InFlight                     int64 // installs skipped: a write in flight, or a dead domain
	Timeouts                     int64 // probes memcached did not answer in time
}

func (s InstallStats) String() string {
	return fmt.Sprintf("installed %d (replacing %d, answering a miss %d), deleted %d, skipped in flight %d, probe timeouts %d",
		s.Installed, s.Replaced, s.Misses, s.Deleted, s.InFlight, s.Timeouts)
}

// probeTimeout bounds a probe's wait for memcached; installBatch is the
// most keys an installer handles at once.
const (
	probeTimeout = time.Second
	installBatch = 8
)

// Installers runs n installers until ctx is done, each over its share of
// cfg's keys, each with its own connection to santad, all asking
// memcached from one probe port (santad's: no rule answers it). In a
// loop, each takes up to installBatch keys of its share: one in eight
// loses its rule, the others get a guarded rule that answers a UDP get
// of the key with memcached's reply (a value or a miss), added or
// replaced in one batch each. The function returned waits for them and
// returns what they did and their errors.
func (r *Rig) Installers(ctx context.Context, cfg mccheck.Config, n int, order Order) (func() (InstallStats, error), error) {
	prb, err := probe.Open(netns.Named(r.NS.Name), n*installBatch)
	if err != nil {
		return nil, err
	}
	if err := r.Client.SetLearning(r.UDP, client.Learning{KeyOffset: 8, ProbePort: prb.Port(), Enabled: true}); err != nil {
		prb.Close()
		return nil, err
	}
	var (
		wg    sync.WaitGroup
		stats installCounts
		mu    sync.Mutex
		errs  []error
	)
	for i := range n {
		c, err := client.Dial(r.Santad.Socket)
		if err != nil {
			cancelAndWait(&wg, prb)
			return nil, err
		}
		in := &installer{r: r, c: c, probe: prb, rng: rand.New(rand.NewPCG(uint64(i), 7)), order: order,
			ids: map[string]uint32{}, counts: &stats}
		for k := i; k < cfg.Keys; k += n {
			in.keys = append(in.keys, cfg.Key(k))
		}
		wg.Go(func() {
			defer c.Close()
			if err := in.run(ctx); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("installer %d: %w", i, err))
				mu.Unlock()
			}
		})
	}
	return func() (InstallStats, error) {
		wg.Wait()
		prb.Close()
		return stats.load(), errors.Join(errs...)
	}, nil
}

// cancelAndWait ends installers started already, after a failure to start
// the others: closing the probe socket fails their asks.
func cancelAndWait(wg *sync.WaitGroup, prb *probe.Socket) {
	prb.Close()
	wg.Wait()
}

type installCounts struct {
	installed, replaced, deleted, misses, inFlight, timeouts atomic.Int64
}

func (c *installCounts) load() InstallStats {
	return InstallStats{Installed: c.installed.Load(), Replaced: c.replaced.Load(), Deleted: c.deleted.Load(),
		Misses: c.misses.Load(), InFlight: c.inFlight.Load(), Timeouts: c.timeouts.Load()}
}

// installer is one of them.
type installer struct {
	r      *Rig
	c      *client.Client
	probe  *probe.Socket
	rng    *rand.Rand
	order  Order
	keys   []string
	ids    map[string]uint32 // its rule of each key
	counts *installCounts
}

func (in *installer) run(ctx context.Context) error {
	for ctx.Err() == nil {
		var batch []string
		var gone []uint32
		for _, i := range in.rng.Perm(len(in.keys))[:min(installBatch, len(in.keys))] {
			key := in.keys[i]
			if id, ok := in.ids[key]; ok && in.rng.IntN(8) == 0 {
				gone = append(gone, id)
				delete(in.ids, key)
				continue
			}
			batch = append(batch, key)
		}
		if len(gone) > 0 {
			if err := in.c.DeleteRules(in.r.UDP, gone); err != nil {
				return err
			}
			in.counts.deleted.Add(int64(len(gone)))
		}
		if err := in.install(ctx, batch); err != nil {
			return err
		}
	}
	return nil
}

// install reads each key's generation and its value from memcached (in
// the installer's order), then installs or replaces the rules answering a
// get of each with its value, guarded at its generation.
func (in *installer) install(ctx context.Context, keys []string) error {
	gens := make([]client.Generation, len(keys))
	generations := func() error {
		for i, key := range keys {
			var err error
			if gens[i], err = in.c.Generation(in.r.UDP, []byte(key)); err != nil {
				return err
			}
		}
		return nil
	}
	if in.order == GenerationFirst {
		if err := generations(); err != nil {
			return err
		}
	}
	values, err := in.ask(ctx, keys)
	if err != nil {
		return err
	}
	if in.order == ValueFirst {
		if err := generations(); err != nil {
			return err
		}
	}
	var adds []client.GuardedRule
	var added []string
	var replaced []client.RuleEntry
	for i, key := range keys {
		g := gens[i]
		switch {
		case values[i] == nil:
			continue // no reply in time
		case g.InFlight || g.Epoch == 0:
			in.counts.inFlight.Add(1)
			continue
		case string(values[i]) == "END\r\n":
			in.counts.misses.Add(1)
		}
		rl, guard := getRule(key, values[i]), g.Guard([]byte(key), 0)
		if id, ok := in.ids[key]; ok {
			replaced = append(replaced, client.RuleEntry{RuleID: id, Rule: rl, Guard: guard})
		} else {
			adds = append(adds, client.GuardedRule{Rule: rl, Guard: guard})
			added = append(added, key)
		}
	}
	if len(replaced) > 0 {
		if err := in.c.ReplaceRules(in.r.UDP, replaced); err != nil {
			return err
		}
	}
	if len(adds) > 0 {
		ids, err := in.c.AddGuardedRules(in.r.UDP, adds)
		if err != nil {
			return err
		}
		for i, key := range added {
			in.ids[key] = ids[i]
		}
	}
	in.counts.replaced.Add(int64(len(replaced)))
	in.counts.installed.Add(int64(len(replaced) + len(adds)))
	return nil
}

// ask asks memcached for each key at once from the probe port and returns
// the replies after the frame header (nil: none in time).
func (in *installer) ask(ctx context.Context, keys []string) ([][]byte, error) {
	values := make([][]byte, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, key := range keys {
		wg.Go(func() {
			// The probe socket sets the request id (bytes 0-1).
			got, err := in.probe.Ask(ctx, Addr, append([]byte{0, 0, 0, 0, 0, 1, 0, 0}, "get "+key+"\r\n"...), probeTimeout)
			switch {
			case errors.Is(err, probe.ErrTimeout):
				in.counts.timeouts.Add(1)
			case err != nil:
				errs[i] = err
			case len(got) < 8 || string(got[2:8]) != "\x00\x00\x00\x01\x00\x00":
				errs[i] = fmt.Errorf("get %s: a reply that is not one datagram: %q", key, got)
			case !bytes.HasPrefix(got[8:], []byte("VALUE "+key+" ")) && string(got[8:]) != "END\r\n":
				errs[i] = fmt.Errorf("get %s: memcached answers %q", key, got[8:])
			default:
				values[i] = got[8:]
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return values, nil // the installer stops: no error of its own
	}
	return values, errors.Join(errs...)
}

// getRule answers a UDP get of key with reply, the request's id copied.
// Its condition is the whole datagram after the request id, as the
// agent's: so a rule whose reply is a value may answer with a set's value
// or a get's reply (docs/memcached.md), which the check then races too.
func getRule(key string, reply []byte) rule.Rule {
	request := "\x00\x00\x00\x01\x00\x00get " + key + "\r\n"
	return rule.Rule{
		Condition:  rule.ExactLength(rule.Condition{Offset: 2, Pattern: []byte(request)}, uint16(2+len(request))),
		Processors: []rule.Processor{rule.Copy(0, 2, 0), rule.Put(2, []byte{0, 0, 0, 1, 0, 0}), rule.Put(8, reply)},
		ReplyLen:   uint16(8 + len(reply)),
	}
}
