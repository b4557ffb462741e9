package cli

import (
	"testing"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/rule"
)

// topFake is the fake of withService with a second service, 8, and a tick
// for the tests' clock: between two refreshes of top, rule 1 gets 10 hits,
// rule 3 gets 50 and rule 4 (service 8's) 5.
func topFake(t *testing.T) (string, func()) {
	f, path := withService(t)
	f.setCounters(7, client.RuleCounters{RuleID: 1, Hits: 120, Bytes: 5040})
	f.setCounters(7, client.RuleCounters{RuleID: 3, Hits: 30, Bytes: 1260})
	other := f.addService(client.ServiceInfo{Protocol: 17, Family: 6, Port: 53}, client.ServiceStats{},
		rule.Rule{Condition: rule.Condition{Pattern: []byte("ping")}, Processors: []rule.Processor{rule.Put(0, []byte("pong"))}, ReplyLen: 4})
	f.setCounters(other, client.RuleCounters{RuleID: 4, Hits: 40, Bytes: 160})
	return path, func() {
		f.bump(7, 1, 10, 420)
		f.bump(7, 3, 50, 2100)
		f.bump(other, 4, 5, 20)
	}
}

func TestTop(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		terminal bool
		want     string
	}{
		{"one service, plain blocks", []string{"top", "-iterations", "2", "-interval", "1ms", "-n", "2", "7"}, false,
			`12:00:00  services 1, rules 3, by hits
SERVICE  RULE  HITS  HITS/S  BYTES    BYTES/S  OFFSET  PATTERN  LENGTH
7        1     120   -       4.9 KiB  -        0       "Hello"  any
7        3     30    -       1.2 KiB  -        0       "Hi"     any

12:00:01  services 1, rules 3, by hits
SERVICE  RULE  HITS  HITS/S  BYTES    BYTES/S  OFFSET  PATTERN  LENGTH
7        1     130   10.0    5.3 KiB  420 B    0       "Hello"  any
7        3     80    50.0    3.3 KiB  2.1 KiB  0       "Hi"     any
`},
		{"every service by rate, on a terminal", []string{"top", "-iterations", "2", "-interval", "1ms", "-sort", "rate"}, true,
			clearScreen + `12:00:00  services 2, rules 4, by rate
SERVICE  RULE  HITS  HITS/S  BYTES    BYTES/S  OFFSET  PATTERN                                                   LENGTH
7        1     120   -       4.9 KiB  -        0       "Hello"                                                   any
8        4     40    -       160 B    -        0       "ping"                                                    any
7        3     30    -       1.2 KiB  -        0       "Hi"                                                      any
7        2     0     -       0 B      -        2       "\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"... (27 bytes)  29
` + clearScreen + `12:00:01  services 2, rules 4, by rate
SERVICE  RULE  HITS  HITS/S  BYTES    BYTES/S  OFFSET  PATTERN                                                   LENGTH
7        3     80    50.0    3.3 KiB  2.1 KiB  0       "Hi"                                                      any
7        1     130   10.0    5.3 KiB  420 B    0       "Hello"                                                   any
8        4     45    5.0     180 B    20 B     0       "ping"                                                    any
7        2     0     0.0     0 B      0 B      2       "\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"... (27 bytes)  29
`},
		{"JSON, one document per refresh", []string{"-json", "top", "-iterations", "2", "-interval", "1ms", "-n", "1", "7"}, true,
			`{
  "time": "2025-03-14T12:00:00Z",
  "services": 1,
  "rules": 3,
  "top": [
    {
      "service_id": 7,
      "id": 1,
      "hits": 120,
      "bytes": 5040,
      "condition": {
        "offset": 0,
        "text": "Hello",
        "hex": "48656c6c6f"
      }
    }
  ]
}
{
  "time": "2025-03-14T12:00:01Z",
  "services": 1,
  "rules": 3,
  "top": [
    {
      "service_id": 7,
      "id": 1,
      "hits": 130,
      "bytes": 5460,
      "condition": {
        "offset": 0,
        "text": "Hello",
        "hex": "48656c6c6f"
      },
      "hits_per_s": 10,
      "bytes_per_s": 420
    }
  ]
}
`},
	}
	for _, tt := range tests {
		path, tick := topFake(t)
		e := testEnv(path, "", tick)
		e.terminal = tt.terminal
		stdout, stderr, code := runEnv(t, e, tt.args...)
		if stderr != "" || code != 0 {
			t.Errorf("%s: stderr %q, exit status %d", tt.name, stderr, code)
		}
		check(t, tt.name, stdout, tt.want)
	}
}
