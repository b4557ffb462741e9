package mccheck

import (
	"strings"
	"testing"
	"time"
)

const ms = time.Millisecond

// set is an acknowledged write leaving value, sent at sent ms, acked at
// acked ms.
func set(seq int, value string, sent, acked time.Duration) write {
	return write{key: 0, seq: seq, command: "set", sent: sent * ms, acked: acked * ms, changed: true, value: value, present: true}
}

func del(seq int, sent, acked time.Duration) write {
	return write{key: 0, seq: seq, command: "delete", sent: sent * ms, acked: acked * ms, absent: true}
}

func get(value string, sent, recvd time.Duration) read {
	if value == "" {
		return read{key: 0, via: "udp get", sent: sent * ms, recvd: recvd * ms, outcome: miss}
	}
	return read{key: 0, via: "udp get", sent: sent * ms, recvd: recvd * ms, outcome: hit, value: value}
}

// The model's rules, one history each: which reads are violations (by
// what they say), which are not, which are unchecked.
func TestCheckModel(t *testing.T) {
	for _, c := range []struct {
		name    string
		writes  []write
		flushes []flush
		read    read
		want    string // part of the violation's Why; "" none; "unchecked"
	}{
		{"newest value", []write{set(1, "a", 0, 1), set(2, "b", 2, 3)}, nil, get("b", 4, 5), ""},
		{"older value after the newer's ack", []write{set(1, "a", 0, 1), set(2, "b", 2, 3)}, nil, get("a", 4, 5), "older than a write"},
		{"older value, read sent before the newer's ack", []write{set(1, "a", 0, 1), set(2, "b", 2, 3)}, nil, get("a", 2, 5), ""},
		{"a repeated counter: the newest of its writes counts", []write{set(1, "7", 0, 1), set(2, "8", 2, 3), set(3, "7", 4, 5)}, nil, get("7", 6, 7), ""},
		{"a decremented counter padded with spaces", []write{set(1, "10", 0, 1), set(2, "9", 2, 3)}, nil, get("9 ", 4, 5), ""},
		{"a value never written", []write{set(1, "a", 0, 1)}, nil, get("z", 4, 5), "no write of this run"},
		{"a value after a delete acked", []write{set(1, "a", 0, 1), del(2, 2, 3)}, nil, get("a", 4, 5), "older than a write"},
		{"a failure that changes nothing", []write{set(1, "a", 0, 1), {seq: 2, sent: 2 * ms, acked: 3 * ms, present: true}}, nil, get("a", 4, 5), ""},
		{"a miss after a write acked", []write{set(1, "a", 0, 1)}, nil, get("", 2, 3), "no value"},
		{"a miss, read sent before the ack", []write{set(1, "a", 0, 2)}, nil, get("", 1, 3), ""},
		{"a miss after a delete sent before the reply", []write{set(1, "a", 0, 1), del(2, 3, 9)}, nil, get("", 2, 4), ""},
		{"a miss after a delete sent after the reply", []write{set(1, "a", 0, 1), del(2, 5, 9)}, nil, get("", 2, 4), "no value"},
		{"a miss, flush_all concurrent", []write{set(1, "a", 0, 1)}, []flush{{sent: 1 * ms, acked: 3 * ms}}, get("", 2, 4), ""},
		{"a miss, flush_all before the write", []write{set(1, "a", 2, 3)}, []flush{{sent: 0, acked: 1 * ms}}, get("", 4, 5), "no value"},
		{"a miss, delayed flush_all not done before the write", []write{set(1, "a", 2, 3)}, []flush{{sent: 0, acked: 1 * ms, delay: time.Second}}, get("", 4, 5), ""},
		{"a value after flush_all", []write{set(1, "a", 0, 1)}, []flush{{sent: 2 * ms, acked: 3 * ms}}, get("a", 4, 5), "flushed"},
		{"a value, flush_all concurrent with its write", []write{set(1, "a", 0, 3)}, []flush{{sent: 2 * ms, acked: 3 * ms}}, get("a", 4, 5), ""},
		{"a value, read sent before flush_all's ack", []write{set(1, "a", 0, 1)}, []flush{{sent: 2 * ms, acked: 5 * ms}}, get("a", 4, 6), ""},
		{"a value, delayed flush_all not due", []write{set(1, "a", 0, 1)}, []flush{{sent: 2 * ms, acked: 3 * ms, delay: time.Second}}, get("a", 900, 901), ""},
		{"a value, delayed flush_all due", []write{set(1, "a", 0, 1)}, []flush{{sent: 2 * ms, acked: 3 * ms, delay: time.Second}}, get("a", 4004, 4005), "flushed"},
		{"a value written long before a delayed flush_all", []write{set(1, "a", 0, 1)}, []flush{{sent: 40_000 * ms, acked: 40_001 * ms, delay: time.Second}}, get("a", 44_000, 44_001), ""},
		{"a key given up before the reply", []write{set(1, "a", 0, 1), {seq: 2, command: "udp set", sent: 2 * ms, acked: -1}}, nil, get("", 1, 3), "unchecked"},
		{"a key given up after the reply", []write{set(1, "a", 0, 1), {seq: 2, command: "udp set", sent: 4 * ms, acked: -1}}, nil, get("", 2, 3), "no value"},
		{"a value, flush_all never acknowledged", []write{set(1, "a", 0, 1)}, []flush{{sent: 2 * ms, acked: -1}}, get("a", 4000, 4001), ""},
		{"a miss, flush_all never acknowledged", []write{set(1, "a", 0, 1)}, []flush{{sent: 2 * ms, acked: -1}}, get("", 4000, 4001), ""},
		{"a miss, flush_all never acknowledged, sent after the reply", []write{set(1, "a", 0, 1)}, []flush{{sent: 5 * ms, acked: -1}}, get("", 2, 4), "no value"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ck := newChecker([]string{"k"}, []*log{{writes: c.writes, flushes: c.flushes}})
			v, unchecked := ck.check(c.read)
			switch {
			case c.want == "unchecked":
				if !unchecked || v != nil {
					t.Errorf("got %v, unchecked %t; want unchecked", v, unchecked)
				}
			case c.want == "":
				if v != nil || unchecked {
					t.Errorf("got %v, unchecked %t; want no violation", v, unchecked)
				}
			case v == nil || !strings.Contains(v.Why, c.want):
				t.Errorf("got %v, unchecked %t; want a violation %q", v, unchecked, c.want)
			}
		})
	}
}
