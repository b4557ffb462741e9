package main

import (
	"strings"
	"testing"
	"time"

	"github.com/santa-offload/santa/bench/scenario"
)

// TestConfig: out-of-range flags are refused with the flag's name; a set
// share turns the mix writer on; -set-popularity needs the mix, names a
// popularity, and then draws the SETs' keys.
func TestConfig(t *testing.T) {
	f := scenario.RegisterFlags(scenario.Defaults{Rig: "t", Popularity: "zipf:1", Offload: "0,all", Rates: "0"})
	af := scenario.RegisterAgentFlags()
	for _, tc := range []struct {
		keys    int
		share   float64
		setCost time.Duration
		want    string
	}{
		{0, 0, 0, "-keys 0"},
		{1<<20 + 1, 0, 0, "-keys 1048577"},
		{100, -0.1, 0, "-set-share -0.1"},
		{100, 1, 0, "-set-share 1"},
		{100, 0, -time.Second, "-set-cost -1s"},
	} {
		_, err := config(f, af, tc.keys, tc.share, tc.setCost)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("keys %d, share %v, set cost %v: %v, want an error starting %q", tc.keys, tc.share, tc.setCost, err, tc.want)
		}
	}
	c, err := config(f, af, 100, 0.05, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c.mix == nil || c.Beside == nil || c.mix.share != 0.05 || c.mix.items != 100 {
		t.Errorf("-set-share 0.05: mix %+v, Beside set %v", c.mix, c.Beside != nil)
	}
	if c, _ := config(f, af, 100, 0, 0); c.mix != nil || c.Beside != nil {
		t.Errorf("-set-share 0: a mix writer")
	}

	gets, _ := config(f, af, 100, 0, 0)
	if err := gets.setKeys("uniform"); err == nil || !strings.Contains(err.Error(), "needs -set-share") {
		t.Errorf("without -set-share: %v, want it named", err)
	}
	c, err = config(f, af, 100, 0.05, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.setKeys("often"); err == nil || !strings.HasPrefix(err.Error(), "-set-popularity") {
		t.Errorf("-set-popularity often: %v, want an error naming the flag", err)
	}
	if err := c.setKeys("uniform"); err != nil || c.mix.keys == nil || c.mix.keys.String() != "uniform" {
		t.Errorf("-set-popularity uniform: %v, keys %v", err, c.mix.keys)
	}
}
