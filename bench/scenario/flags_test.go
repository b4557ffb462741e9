package scenario

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseCounts(t *testing.T) {
	for _, c := range []struct {
		list string
		want []int
	}{
		{"0,100,all", []int{0, 100, 1000}},
		{"all,1000,100,100", []int{1000, 100}}, // the given order, each count once
	} {
		got, err := parseCounts("-offload", c.list, 0, 1000)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("parseCounts(%q) = %v, %v; want %v", c.list, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "1001", "-1", "x", "100,,all"} {
		if _, err := parseCounts("-offload", bad, 0, 1000); err == nil || !strings.Contains(err.Error(), "-offload") {
			t.Errorf("parseCounts(%q): %v, want an error naming the flag", bad, err)
		}
	}
}

func TestAgentConfig(t *testing.T) {
	ok := AgentFlags{levels: "100,all", c: AgentConfig{Converge: 20 * time.Second, Target: 0.9}}
	c, err := ok.Config(1000)
	if err != nil || !slices.Equal(c.Levels, []int{100, 1000}) {
		t.Fatalf("Config = %+v, %v", c, err)
	}
	if c, err := (&AgentFlags{}).Config(1000); err != nil || c.Levels != nil {
		t.Errorf("no -agent: %+v, %v; want no levels", c, err)
	}
	for name, f := range map[string]AgentFlags{
		"-agent":          {levels: "0", c: ok.c},
		"-agent-converge": {levels: "100", c: AgentConfig{Converge: 500 * time.Millisecond, Target: 0.9}},
		"-agent-rate":     {levels: "100", c: AgentConfig{Converge: time.Second, Rate: -1, Target: 0.9}},
		"-agent-target":   {levels: "100", c: AgentConfig{Converge: time.Second, Target: 1.5}},
	} {
		if _, err := f.Config(1000); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want an error naming it", name, err)
		}
	}
}
