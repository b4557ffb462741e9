package scenario

import (
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/santa-offload/santa/bench/gen"
	"github.com/santa-offload/santa/internal/popularity"
)

// learnConfigs are what LearnCost compares: the server alone; Santa
// attached with no rule (every request is matched against nothing and
// passed); the same with the service learning, i.e. every passed request
// counted by its key in the kernel's sketch.
var learnConfigs = []string{"alone", "attached", "learning"}

// LearnCost measures what the kernel's counting of passed requests costs
// the server when nothing is offloaded (issue 22's target: at most 5 % of
// the server's own throughput), for requests whose key starts at keyOff:
// the three learnConfigs interleaved within each round (order reversed
// every other round), at every offered load, items asked for with pop.
// RESULT lines are named id/learn=CONFIG/rate=R/..., and
// id/learning_vs_alone/rate=R is the ratio of the medians of replies/s.
func (b *Bench) LearnCost(ctx context.Context, id string, pop popularity.Popularity, keyOff uint16) error {
	if err := b.o.set(0); err != nil {
		return err
	}
	defer b.o.learn(keyOff, false)
	g, err := b.openGenerator(b.c.Items, pop)
	if err != nil {
		return err
	}
	defer g.Close()
	for _, rate := range b.c.Rates {
		got := map[string][]sample{}
		for round := range b.c.Rounds {
			order := slices.Clone(learnConfigs)
			if round%2 == 1 {
				slices.Reverse(order)
			}
			for _, cfg := range order {
				if err := b.o.attach(cfg != "alone"); err != nil {
					return err
				}
				if err := b.o.learn(keyOff, cfg == "learning"); err != nil {
					return err
				}
				s, err := b.measure(ctx, g, b.c.Duration, rate, b.o.answered)
				if err != nil {
					return err
				}
				got[cfg] = append(got[cfg], s)
				fmt.Fprintf(os.Stderr, "  %s learn=%s rate=%s round %d: %s\n", id, cfg, gen.RateName(rate), round, s)
			}
		}
		med := map[string]float64{}
		for _, cfg := range learnConfigs {
			med[cfg] = summary(fmt.Sprintf("%s/learn=%s/rate=%s", id, cfg, gen.RateName(rate)), got[cfg])
		}
		if med["alone"] > 0 {
			fmt.Printf("RESULT name=%s/learning_vs_alone/rate=%s value=%.4f unit=ratio\n", id, gen.RateName(rate),
				med["learning"]/med["alone"])
		}
	}
	return b.o.attach(false)
}
