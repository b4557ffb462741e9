package mcagent

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"github.com/santa-offload/santa/rule"
)

func TestGetKey(t *testing.T) {
	one := string(oneDatagram)
	long := strings.Repeat("k", maxKey+1)
	for _, tt := range []struct {
		hot, key, reason string
	}{
		{one + "get k1\r\n", "k1", ""},
		{one + "get " + strings.Repeat("k", maxKey) + "\r\n", strings.Repeat("k", maxKey), ""},
		{one + "get " + long + "\r\n", "", skipLongKey},
		{one + "get a b\r\n", "", skipForm},          // several keys
		{one + "gets k1\r\n", "", skipForm},          // gets: a cas unique too
		{one + "get  k1\r\n", "", skipForm},          // memcached reads it; the rule's pattern would not be exact
		{one + "get k1\n", "", skipForm},             // LF alone
		{one + "get k1\r\nget k2\r\n", "", skipForm}, // two commands
		{one + "mg k1 v\r\n", "", skipForm},
		{one + "get \r\n", "", skipForm},
		{one + "get k\x01\r\n", "", skipForm},
		{"\x00\x01\x00\x02\x00\x00get k1\r\n", "", skipForm}, // datagram 1 of 2
		{"\x00\x00\x00\x01\x00\x07get k1\r\n", "", skipForm}, // reserved bytes
		{"\x00\x00", "", skipForm},
	} {
		key, err := getKey([]byte(tt.hot))
		if string(key) != tt.key || (tt.reason == "") != (err == nil) || err != nil && skipReason(err) != tt.reason {
			t.Errorf("getKey(%q) = %q, %v; want %q, reason %q", tt.hot, key, err, tt.key, tt.reason)
		}
	}
}

func TestCheckUDPReply(t *testing.T) {
	hdr := "\x12\x34" + string(oneDatagram)
	for _, tt := range []struct {
		reply, reason, data, flags string
	}{
		{hdr + "VALUE k1 5 3\r\nabc\r\nEND\r\n", "", "abc", "5"},
		{hdr + "VALUE k1 0 0\r\n\r\nEND\r\n", "", "", "0"},
		{hdr + "VALUE k1 0 4\r\na\r\nb\r\nEND\r\n", "", "a\r\nb", "0"}, // CRLF inside the data
		{hdr + "END\r\n", skipMiss, "", ""},
		{"\x12\x34\x00\x00\x00\x02\x00\x00VALUE k1 0 2000\r\naaa", skipTooLarge, "", ""},
		{hdr + "VALUE k2 0 3\r\nabc\r\nEND\r\n", skipMalformed, "", ""}, // another key
		{hdr + "VALUE k1 0 4\r\nabc\r\nEND\r\n", skipMalformed, "", ""}, // short
		{hdr + "VALUE k1 0 3\r\nabc\r\nEND\r\nX", skipMalformed, "", ""},
		{hdr + "VALUE k1 0 3 99\r\nabc\r\nEND\r\n", skipMalformed, "", ""}, // a cas unique: gets
		{hdr + "SERVER_ERROR out of memory\r\n", skipMalformed, "", ""},
		{"\x12\x34\x00", skipMalformed, "", ""},
		{"\x12\x34\x00\x00\x00\x01\x00\x01END\r\n", skipMalformed, "", ""},
	} {
		it, err := checkUDPReply([]byte("k1"), []byte(tt.reply))
		if (tt.reason == "") != (err == nil) || err != nil && skipReason(err) != tt.reason ||
			err == nil && (string(it.data) != tt.data || it.flags != tt.flags) {
			t.Errorf("checkUDPReply(%q) = %+v, %v; want %q %q, reason %q", tt.reply, it, err, tt.flags, tt.data, tt.reason)
		}
	}
}

func TestReadMG(t *testing.T) {
	for _, tt := range []struct {
		in    string
		want  item
		miss  bool
		fails bool
	}{
		{in: "VA 3 f5 t-1\r\nabc\r\n", want: item{flags: "5", data: []byte("abc"), ttl: -1}},
		{in: "VA 2 t100 f0\r\nxy\r\n", want: item{flags: "0", data: []byte("xy"), ttl: 100}},
		{in: "VA 0 f0 t0\r\n\r\n", want: item{flags: "0", data: []byte{}, ttl: 0}},
		{in: "EN\r\n", miss: true},
		{in: "VA 3 f5\r\nabc\r\n", fails: true},      // no t
		{in: "VA 3 f5 t-2\r\nabc\r\n", fails: true},  // a ttl memcached does not give
		{in: "VA 3 f5 t1\r\nabcd\r\n", fails: true},  // data longer than its size
		{in: "VA x f5 t1\r\nabc\r\n", fails: true},   // size
		{in: "CLIENT_ERROR bad\r\n", fails: true},    // an error
		{in: "VA 3 f5 t1\nabc\r\n", fails: true},     // LF alone
		{in: "VA 3 f5 t1\r\nab", fails: true},        // cut
		{in: "VA 3 f5 t1 x\r\nabc\r\n", fails: true}, // a flag not asked
	} {
		it, err := readMG(bufio.NewReader(strings.NewReader(tt.in)))
		switch {
		case tt.miss:
			if skipReason(err) != skipMiss {
				t.Errorf("readMG(%q) = %v; want a miss", tt.in, err)
			}
		case tt.fails:
			if err == nil || skipReason(err) != "error" {
				t.Errorf("readMG(%q) = %+v, %v; want an error", tt.in, it, err)
			}
		case err != nil || it.flags != tt.want.flags || it.ttl != tt.want.ttl || !bytes.Equal(it.data, tt.want.data):
			t.Errorf("readMG(%q) = %+v, %v; want %+v", tt.in, it, err, tt.want)
		}
	}
}

// getRule answers the get of its key, with the request's id and
// memcached's bytes, and nothing else.
func TestGetRule(t *testing.T) {
	reply := []byte("\x00\x00" + string(oneDatagram) + "VALUE k1 0 3\r\nabc\r\nEND\r\n")
	r := getRule(hotForm([]byte("k1")), reply)
	if err := r.Validate(rule.DefaultUDPLimits); err != nil {
		t.Fatal(err)
	}
	req := append([]byte{0xab, 0xcd}, hotForm([]byte("k1"))...)
	if !r.Condition.Matches(req) {
		t.Fatalf("the rule does not match %q", req)
	}
	c, err := rule.Compile(r)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := c.Reply(req); !ok || !bytes.Equal(got, append([]byte{0xab, 0xcd}, reply[2:]...)) {
		t.Fatalf("the rule replies %q, %v; want memcached's reply with the request's id", got, ok)
	}
	for _, other := range [][]byte{append(req, 'x'), append([]byte{0, 0}, hotForm([]byte("k10"))...), append([]byte{0, 0}, hotForm([]byte("k"))...)} {
		if r.Condition.Matches(other) {
			t.Errorf("the rule matches %q", other)
		}
	}
	if !bytes.Equal(udpGet([]byte("k1")), append([]byte{0, 0}, hotForm([]byte("k1"))...)) {
		t.Errorf("udpGet %q", udpGet([]byte("k1")))
	}
}

// TestReadEvictions: memcached 1.6's stats reply, its eviction counters
// summed; a reply without them, or cut short, is an error.
func TestReadEvictions(t *testing.T) {
	reply := "STAT pid 7\r\nSTAT evictions 12\r\nSTAT curr_items 3\r\nSTAT slab_reassign_evictions_nomem 2\r\nEND\r\n"
	n, err := readEvictions(bufio.NewReader(strings.NewReader(reply)))
	if err != nil || n != 14 {
		t.Fatalf("evictions %d, %v; want 14", n, err)
	}
	for _, bad := range []string{"STAT evictions 12\r\nEND\r\n", "STAT evictions 1\r\nSTAT slab_reassign_evictions_nomem x\r\nEND\r\n",
		"STAT evictions 1\r\n", "ERROR\r\n"} {
		if n, err := readEvictions(bufio.NewReader(strings.NewReader(bad))); err == nil {
			t.Errorf("%q: %d evictions, no error", bad, n)
		}
	}
}
