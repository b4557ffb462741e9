package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"syscall"

	"github.com/santa-offload/santa/client"
)

type statsOptions struct {
	top int
}

func (o *statsOptions) flags(fs *flag.FlagSet) {
	fs.IntVar(&o.top, "top", 0, "show only the `N` rules with the most hits (0: all)")
}

func (o *statsOptions) run(ctx context.Context, e *env, args []string) error {
	service, err := serviceArgs(args, 1, 1)
	if err != nil {
		return err
	}
	if o.top < 0 {
		return usagef("-top %d is negative", o.top)
	}
	c, err := e.connect(ctx)
	if err != nil {
		return err
	}
	s, err := c.ServiceStats(service)
	if err != nil {
		return err
	}
	mc, err := memcachedOf(c, service)
	if err != nil {
		return err
	}
	counters, err := ruleCounters(c, service)
	if err != nil {
		return err
	}
	p, err := serviceProto(c, service)
	if err != nil {
		return err
	}
	v := statsView{proto: p,
		ServiceID: service, Matched: s.Matched, Passed: s.Passed, Fallback: s.Fallback,
		TCChecksum: s.TCChecksum, TCTooLong: s.TCTooLong, TCNoXDP: s.TCNoXDP,
		BadCsum: s.BadCsum, Rules: s.Rules, RuleBytes: s.RuleBytes, Memcached: mc,
		RuleCounters: []ruleCountersView{},
	}
	for _, rc := range counters {
		v.RuleCounters = append(v.RuleCounters, newRuleCountersView(rc))
	}
	slices.SortFunc(v.RuleCounters, byHits)
	if o.top > 0 {
		v.RuleCounters = v.RuleCounters[:min(o.top, len(v.RuleCounters))]
	}
	want := make(map[uint32]bool, len(v.RuleCounters))
	for _, rc := range v.RuleCounters {
		want[rc.ID] = true
	}
	conds, err := conditionsOf(c, service, want)
	if err != nil {
		return err
	}
	for i, rc := range v.RuleCounters {
		if cond, ok := conds[rc.ID]; ok {
			v.RuleCounters[i].setCondition(cond)
		}
	}
	// Last: a santad older than PATH_STATS refuses it and closes the
	// connection; then there are no path counters to show.
	paths, err := c.PathStats()
	var old *client.Error
	switch {
	case errors.As(err, &old) && old.Code == syscall.EPROTO:
	case err != nil:
		return err
	default:
		v.Paths = map[string]uint64{}
		for _, p := range paths {
			v.Paths[p.Name] = p.Count
			if p.Count > 0 {
				v.paths = append(v.paths, p)
			}
		}
	}
	return e.show(v)
}

type statsView struct {
	ServiceID  uint32 `json:"service_id"`
	Matched    uint64 `json:"matched"`
	Passed     uint64 `json:"passed"`
	Fallback   uint64 `json:"fallback"` // answered in TC, the sum of the three below
	TCChecksum uint64 `json:"tc_checksum"`
	TCTooLong  uint64 `json:"tc_too_long"`
	TCNoXDP    uint64 `json:"tc_no_xdp"`
	BadCsum    uint64 `json:"bad_csum"`
	Rules      uint32 `json:"rules"`
	RuleBytes  uint64 `json:"rule_bytes"`
	// Memcached are the counters of the service's memcached domain, if
	// it has one.
	Memcached    *memcachedView     `json:"memcached,omitempty"`
	RuleCounters []ruleCountersView `json:"rule_counters"` // most hits first
	// Paths are the host's path counters, every service's (none from a
	// santad older than PATH_STATS).
	Paths map[string]uint64 `json:"paths,omitempty"`

	proto proto              // how the table shows patterns
	paths []client.PathCount // those not 0, by name, for the table
}

func (v statsView) table(w io.Writer) error {
	t := newTable(w)
	t.row("service", v.ServiceID)
	t.row("matched", v.Matched)
	t.row("passed", v.Passed)
	t.row("fallback", v.Fallback)
	t.row("  checksum", v.TCChecksum)
	t.row("  too long", v.TCTooLong)
	t.row("  no xdp", v.TCNoXDP)
	t.row("bad checksum", v.BadCsum)
	t.row("rules", v.Rules)
	t.row("rule bytes", bytesCell(v.RuleBytes))
	if v.Memcached != nil {
		v.Memcached.rows(t)
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	t = newTable(w, "RULE", "HITS", "BYTES", "OFFSET", "PATTERN", "LENGTH")
	for _, rc := range v.RuleCounters {
		off, pattern, length := rc.conditionCells(v.proto)
		t.row(rc.ID, rc.Hits, bytesCell(rc.Bytes), off, pattern, length)
	}
	if err := t.flush(); err != nil || len(v.paths) == 0 {
		return err
	}
	fmt.Fprintln(w)
	t = newTable(w, "PATH (HOST)", "PACKETS")
	for _, p := range v.paths {
		t.row(p.Name, p.Count)
	}
	return t.flush()
}
