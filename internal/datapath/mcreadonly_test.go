package datapath

import (
	"testing"
	"time"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/rule"
)

// TestReadOnlyDatagram: a condition is read-only when it is the whole
// datagram from byte 2 on and its requests write nothing, by memcached's
// reference parser.
func TestReadOnlyDatagram(t *testing.T) {
	exact := func(cmd string) rule.Condition {
		p := mcFrame(0, cmd)[2:]
		return rule.ExactLength(rule.Condition{Offset: 2, Pattern: p}, uint16(2+len(p)))
	}
	for cmd, want := range map[string]bool{
		"get k\r\n":                 true,
		"gets k other\r\n":          true,
		"get a\r\nget b\r\n":        true,
		"mg k v f t\r\n":            true,
		"version\r\n":               true,
		"mg k v T30\r\n":            false, // touches
		"gat 10 k\r\n":              false,
		"set k 0 0 1\r\nB\r\n":      false,
		"get k\r\ndelete k\r\n":     false,
		"get k\r\nset k 0 0 1\r\nB": false, // ends inside a command
		"get k":                     false, // not a whole line
		"bogus k\r\n":               false,
		"flush_all\r\n":             false,
	} {
		if got := readOnlyDatagram(exact(cmd)); got != want {
			t.Errorf("%q: read-only %v, want %v", cmd, got, want)
		}
	}
	get := mcGetRule("k", "v").Condition
	prefix := get
	prefix.MinLen, prefix.MaxLen = 0, 0 // "get k\r\n" and anything after it
	longer := get
	longer.MaxLen++
	shifted := rule.ExactLength(rule.Condition{Offset: 8, Pattern: []byte("get k\r\n")}, 15)
	for name, c := range map[string]rule.Condition{"prefix": prefix, "a length range": longer, "from byte 8": shifted} {
		if readOnlyDatagram(c) {
			t.Errorf("%s: read-only, but it may match a datagram with more in it", name)
		}
	}
	if !readOnlyDatagram(get) {
		t.Error("the agent's GET rule is not read-only")
	}
}

// A guarded GET rule whose condition is a prefix matches a datagram with
// a write after the GET: the write is still found, before the rule could
// answer, and ends it.
func TestMemcachedUDPPrefixRuleStillParses(t *testing.T) {
	m := newMcUDP(t)
	prefix := mcGetRule("k", "A")
	prefix.Condition.MinLen, prefix.Condition.MaxLen = 0, 0
	g, err := m.d.Generation(m.svc, []byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	m.add(t, prefix, &model.Guard{Key: []byte("k"), At: g, Expires: time.Time{}})
	m.expectGet(t, "k", "A")
	if answered, reply := m.send(t, mcFrame(1, "get k\r\nset k 0 0 1\r\nB\r\n")); answered {
		t.Fatalf("a datagram with a write was answered %q", reply)
	}
	m.expectGet(t, "k", "")
	if s := m.stats(t); s.Writes != 1 {
		t.Fatalf("counters %+v: want the write counted", s)
	}
}
