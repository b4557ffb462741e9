package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"syscall"
	"time"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/rule"
)

type topOptions struct {
	interval   time.Duration
	n          int
	iterations int
	sort       string
}

func (o *topOptions) flags(fs *flag.FlagSet) {
	fs.DurationVar(&o.interval, "interval", time.Second, "time between refreshes")
	fs.IntVar(&o.n, "n", 20, "show the `N` rules with the most hits")
	fs.IntVar(&o.iterations, "iterations", 0, "stop after `K` refreshes (0: at an interrupt)")
	fs.StringVar(&o.sort, "sort", "hits", "order by total hits (`hits`) or by hits per second (rate)")
}

// clearScreen moves a terminal's cursor home and clears the screen.
const clearScreen = "\x1b[H\x1b[2J"

func (o *topOptions) run(ctx context.Context, e *env, args []string) error {
	if err := wantArgs(args, 0, 1); err != nil {
		return err
	}
	w := &watcher{all: len(args) == 0, last: map[ruleKey]client.RuleCounters{}, conds: map[ruleKey]rule.Condition{}}
	if !w.all {
		var err error
		if w.service, err = parseID("SERVICE", args[0]); err != nil {
			return err
		}
	}
	switch {
	case o.interval <= 0:
		return usagef("-interval %v is not positive", o.interval)
	case o.n <= 0:
		return usagef("-n %d is not positive", o.n)
	case o.iterations < 0:
		return usagef("-iterations %d is negative", o.iterations)
	case o.sort != "hits" && o.sort != "rate":
		return usagef("-sort %q: want hits or rate", o.sort)
	}
	c, err := e.connect(ctx)
	if err != nil {
		return err
	}
	w.c = c
	for i := 0; o.iterations == 0 || i < o.iterations; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(o.interval):
			}
		}
		f, err := w.frame(e.clock, o)
		if err != nil {
			if ctx.Err() != nil { // an interrupt is how top ends
				return nil
			}
			return err
		}
		switch {
		case e.global.json: // one document per refresh, one after another
		case e.terminal:
			fmt.Fprint(e.stdout, clearScreen)
		case i > 0:
			fmt.Fprintln(e.stdout)
		}
		if err := e.show(f); err != nil {
			return err
		}
	}
	return nil
}

type ruleKey struct{ service, rule uint32 }

// watcher samples the counters top shows. It keeps the last sample, for
// the rates, and the conditions it has read: they are read once per rule.
type watcher struct {
	c        *client.Client
	all      bool   // every service, not only
	service  uint32 // this one
	last     map[ruleKey]client.RuleCounters
	lastTime time.Time
	conds    map[ruleKey]rule.Condition
	protos   map[uint32]proto // of the services, as of the last refresh
}

// services lists the services to sample, and notes their protocols.
func (w *watcher) services() ([]uint32, error) {
	services, err := w.c.Services()
	if err != nil {
		return nil, err
	}
	w.protos = map[uint32]proto{}
	var ids []uint32
	for _, s := range services {
		if w.all || s.ServiceID == w.service {
			ids = append(ids, s.ServiceID)
			w.protos[s.ServiceID] = protoOf(s)
		}
	}
	if !w.all {
		return []uint32{w.service}, nil // not listed: its counters say why
	}
	return ids, nil
}

// frame samples the counters and makes the rows of one refresh.
func (w *watcher) frame(clock func() time.Time, o *topOptions) (topFrame, error) {
	services, err := w.services()
	if err != nil {
		return topFrame{}, err
	}
	sample := map[ruleKey]client.RuleCounters{}
	for _, s := range services {
		counters, err := ruleCounters(w.c, s)
		if w.all && errors.Is(err, syscall.ENOENT) { // detached since it was listed
			continue
		}
		if err != nil {
			return topFrame{}, err
		}
		for _, rc := range counters {
			sample[ruleKey{s, rc.RuleID}] = rc
		}
	}
	now := clock()
	seconds := now.Sub(w.lastTime).Seconds()
	rows := make([]topRow, 0, len(sample))
	for key, rc := range sample {
		row := topRow{ServiceID: key.service, ruleCountersView: newRuleCountersView(rc)}
		if prev, ok := w.last[key]; ok && seconds > 0 {
			if rc.Hits < prev.Hits || rc.Bytes < prev.Bytes {
				// Counters do not go down: the id is another rule's now.
				delete(w.conds, key)
				prev = client.RuleCounters{}
			}
			hits, bytes := float64(rc.Hits-prev.Hits)/seconds, float64(rc.Bytes-prev.Bytes)/seconds
			row.HitsPerS, row.BytesPerS = &hits, &bytes
		}
		rows = append(rows, row)
	}
	w.last, w.lastTime = sample, now
	for key := range w.conds { // of rules gone, whose ids may be reused
		if _, ok := sample[key]; !ok {
			delete(w.conds, key)
		}
	}
	slices.SortFunc(rows, func(a, b topRow) int {
		if o.sort == "rate" {
			if c := cmp.Compare(rateOf(b.HitsPerS), rateOf(a.HitsPerS)); c != 0 {
				return c
			}
		}
		return cmp.Or(cmp.Compare(b.Hits, a.Hits), cmp.Compare(a.ServiceID, b.ServiceID), cmp.Compare(a.ID, b.ID))
	})
	rows = rows[:min(o.n, len(rows))]
	if err := w.readConditions(rows); err != nil {
		return topFrame{}, err
	}
	for i, r := range rows {
		if cond, ok := w.conds[ruleKey{r.ServiceID, r.ID}]; ok {
			rows[i].setCondition(cond)
		}
	}
	return topFrame{Time: now, Services: len(services), Rules: len(sample), Top: rows, sortedBy: o.sort, protos: w.protos}, nil
}

// readConditions reads the conditions of the rows' rules that it has not
// read yet, walking each service's rules once.
func (w *watcher) readConditions(rows []topRow) error {
	want := map[uint32]map[uint32]bool{}
	for _, r := range rows {
		key := ruleKey{r.ServiceID, r.ID}
		if _, ok := w.conds[key]; !ok {
			if want[key.service] == nil {
				want[key.service] = map[uint32]bool{}
			}
			want[key.service][key.rule] = true
		}
	}
	for service, ids := range want {
		conds, err := conditionsOf(w.c, service, ids)
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			return err
		}
		for id, cond := range conds {
			w.conds[ruleKey{service, id}] = cond
		}
	}
	return nil
}

// rateOf orders rates, none (the first refresh) below any.
func rateOf(r *float64) float64 {
	if r == nil {
		return -1
	}
	return *r
}

// topFrame is one refresh of top.
type topFrame struct {
	Time     time.Time `json:"time"`
	Services int       `json:"services"`
	Rules    int       `json:"rules"` // with counters, shown or not
	Top      []topRow  `json:"top"`

	sortedBy string
	protos   map[uint32]proto // how the table shows patterns, by service
}

// topRow is a rule's counters and their rates since the last refresh
// (none on the first).
type topRow struct {
	ServiceID uint32 `json:"service_id"`
	ruleCountersView
	HitsPerS  *float64 `json:"hits_per_s,omitempty"`
	BytesPerS *float64 `json:"bytes_per_s,omitempty"`
}

func (f topFrame) table(w io.Writer) error {
	fmt.Fprintf(w, "%s  services %d, rules %d, by %s\n", f.Time.Format(time.TimeOnly), f.Services, f.Rules, f.sortedBy)
	t := newTable(w, "SERVICE", "RULE", "HITS", "HITS/S", "BYTES", "BYTES/S", "OFFSET", "PATTERN", "LENGTH")
	for _, r := range f.Top {
		off, pattern, length := r.conditionCells(f.protos[r.ServiceID])
		t.row(r.ServiceID, r.ID, r.Hits, countRateCell(r.HitsPerS), bytesCell(r.Bytes), byteRateCell(r.BytesPerS), off, pattern, length)
	}
	return t.flush()
}
