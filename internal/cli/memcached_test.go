package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/rule"
)

// parser marks services, generation reads a key's, stats shows the
// domain's counters, rules shows guards.
func TestMemcachedCommands(t *testing.T) {
	f, path := newFake(t)
	get := rule.Rule{Condition: rule.Condition{Offset: 8, Pattern: []byte("get k1\r\n")}, Processors: []rule.Processor{rule.Put(8, []byte("V"))}, ReplyLen: 9}
	udp := f.addService(client.ServiceInfo{Protocol: 17, Family: 4, Port: 11211}, client.ServiceStats{Matched: 5}, get, hello)
	tcp := f.addService(client.ServiceInfo{Protocol: 6, Family: 4, Port: 11211}, client.ServiceStats{})
	f.mu.Lock()
	f.services[udp].rules[0].Guard = &protocol.Guard{Key: []byte("k1"), Gen: 5, DomainGen: 2, Epoch: 1, ExpiresInMS: 1500}
	f.mu.Unlock()

	_, stderr, code := santactl(t, path, "generation", fmt.Sprint(udp), "k1")
	if code != 1 || stderr != "santactl: generation: service 7 is not a memcached service: PARSER marks it one (EINVAL)\n" {
		t.Errorf("generation before parser: stderr %q, status %d", stderr, code)
	}
	for _, args := range [][]string{{"parser", fmt.Sprint(udp), "memcached"}, {"parser", "-domain", fmt.Sprint(udp), fmt.Sprint(tcp), "memcached"}} {
		if _, stderr, code := santactl(t, path, args...); code != 0 {
			t.Fatalf("%q: %s", args, stderr)
		}
	}
	f.mu.Lock()
	got := []protocol.Parser{*f.services[udp].parser, *f.services[tcp].parser}
	f.mu.Unlock()
	if want := []protocol.Parser{{ServiceID: udp, Kind: 1, Domain: udp}, {ServiceID: tcp, Kind: 1, Domain: udp}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("PARSER sent %+v, want %+v", got, want)
	}

	tests := []output{
		{[]string{"generation", fmt.Sprint(tcp), "key:1"}, `service            8
key                "key:1"
generation         5
domain generation  2
domain life        1
write in flight    true
fresh              false
`},
		{[]string{"-json", "generation", fmt.Sprint(tcp), "k1"}, `{
  "service_id": 8,
  "key": {
    "text": "k1",
    "hex": "6b31"
  },
  "gen": 2,
  "domain_gen": 2,
  "epoch": 1,
  "in_flight": true,
  "fresh": false
}
`},
		{[]string{"rules", fmt.Sprint(udp)}, `ID  OFFSET  PATTERN  LENGTH  REPLY  PROCESSORS         GUARD
1   8       get k1   any     9      put "V" at 8       key "k1" gen 5, domain gen 2, life 1, 1.500 s left
2   0       "Hello"  any     6      put "COMSYS" at 0  -
`},
	}
	checkOutputs(t, path, tests)
	stdout, _, _ := santactl(t, path, "stats", fmt.Sprint(tcp))
	if !strings.Contains(stdout, "memcached domain   7\n  writes           40\n") || !strings.Contains(stdout, "  guard stale      3\n") {
		t.Errorf("stats of a memcached service:\n%s", stdout)
	}
	stdout, _, _ = santactl(t, path, "-json", "stats", fmt.Sprint(tcp))
	if !strings.Contains(stdout, `"memcached": {
    "domain": 7,
    "writes": 40,`) {
		t.Errorf("stats -json of a memcached service:\n%s", stdout)
	}

	// What rules -json prints of a guarded rule cannot be added back:
	// installed without its guard, it would answer stale values.
	listed, _, _ := santactl(t, path, "-json", "rules", fmt.Sprint(udp))
	file := filepath.Join(t.TempDir(), "rules.json")
	if err := os.WriteFile(file, []byte(listed), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = santactl(t, path, "add", fmt.Sprint(tcp), file)
	if code != 1 || !strings.Contains(stderr, "rule 0: guard: a rule file cannot hold a guarded rule") {
		t.Errorf("add of a listed guarded rule: stderr %q, status %d", stderr, code)
	}
}

func TestParserUsage(t *testing.T) {
	_, path := newFake(t)
	for _, tt := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"parser", "7", "redis"}, "santactl: parser: parser \"redis\": memcached or none\n"},
		{[]string{"parser", "-domain", "3", "7", "none"}, "santactl: parser: -domain is for memcached; a service without a parser has no domain\n"},
		{[]string{"parser", "-domain", "x", "7", "memcached"}, "santactl: parser: -domain"},
		{[]string{"generation", "7"}, "santactl: generation: too few arguments\n"},
	} {
		_, stderr, code := santactl(t, path, tt.args...)
		if code != 2 || !strings.HasPrefix(stderr, tt.stderr) {
			t.Errorf("%q: stderr %q, status %d; want %q, 2", tt.args, stderr, code, tt.stderr)
		}
	}
}
