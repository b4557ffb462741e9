package mccheck

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Report is what a run did and found. Times are since the run's start.
type Report struct {
	Ops     int // operations sent: writes, flushes, reads
	Elapsed time.Duration
	// Writes counts write commands by form ("set", "set noreply", "ms q",
	// "udp incr", "flush_all 1", ...); Reads counts reads by how and
	// outcome ("udp get hit", "tcp mg miss", ...).
	Writes, Reads map[string]int
	// UDPTimeouts are UDP requests (gets and writes) that got no reply in
	// time: not violations. Unchecked are reads of a key given up after a
	// UDP write of it went unanswered (it may be applied at any time).
	UDPTimeouts, Unchecked int
	// UDPAnswered are UDP gets that got a reply; KernelAnswered, of
	// those, the ones the kernel answered, if Config.KernelAnswered was
	// given (KernelKnown).
	UDPAnswered    int
	KernelAnswered uint64
	KernelKnown    bool
	Violations     []Violation
}

// KernelShare is the share of answered UDP gets the kernel answered (0 if
// unknown).
func (r Report) KernelShare() float64 {
	if r.UDPAnswered == 0 {
		return 0
	}
	return float64(r.KernelAnswered) / float64(r.UDPAnswered)
}

// Violation is a read that broke the model (check.go).
type Violation struct {
	Key, Why string
	Via      string // "udp get", "tcp get", ...
	Sent     time.Duration
	Received time.Duration
	Outcome  string     // hit, miss
	Value    string     // the value read
	From     *WriteInfo // the newest write that left the value read (a miss: the write that left the key present)
	Newer    *WriteInfo // the write acknowledged before the read that changed or removed it
	Flush    *FlushInfo // the flush_all done before the read that removed it
}

// WriteInfo is one write of a violation's key.
type WriteInfo struct {
	Writer, Seq int
	Command     string
	Sent, Acked time.Duration // Acked < 0: never
	Reply       string
	Value       string // the key's value after it, if Changed
	Changed     bool
}

// FlushInfo is a flush_all.
type FlushInfo struct {
	Writer      int
	Sent, Acked time.Duration
	Delay       time.Duration
}

func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "key %s: %s: %s sent at %v, answered at %v: ", v.Key, v.Why, v.Via, v.Sent, v.Received)
	if v.Outcome == hit {
		fmt.Fprintf(&b, "value %q", v.Value)
	} else {
		b.WriteString("no value")
	}
	if v.From != nil {
		fmt.Fprintf(&b, "\n  left by %s", v.From)
	}
	if v.Newer != nil {
		fmt.Fprintf(&b, "\n  after   %s", v.Newer)
	}
	if v.Flush != nil {
		fmt.Fprintf(&b, "\n  after   flush_all (delay %v) of writer %d sent at %v, acknowledged at %v", v.Flush.Delay, v.Flush.Writer, v.Flush.Sent, v.Flush.Acked)
	}
	return b.String()
}

func (w *WriteInfo) String() string {
	s := fmt.Sprintf("writer %d #%d %q sent at %v, acknowledged at %v (%q)", w.Writer, w.Seq, w.Command, w.Sent, w.Acked, w.Reply)
	if w.Changed {
		s += fmt.Sprintf(", value %q", w.Value)
	}
	return s
}

// shownViolations is how many violations String shows (Violations has
// them all).
const shownViolations = 20

// String summarizes the report: counts, then the first violations.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d operations in %v (%.0f/s); %d violations; %d UDP timeouts; %d reads unchecked\n",
		r.Ops, r.Elapsed.Round(time.Millisecond), float64(r.Ops)/r.Elapsed.Seconds(), len(r.Violations), r.UDPTimeouts, r.Unchecked)
	if r.KernelKnown {
		fmt.Fprintf(&b, "UDP gets answered by the kernel: %d of %d (%.1f %%)\n", r.KernelAnswered, r.UDPAnswered, 100*r.KernelShare())
	}
	counts := func(title string, m map[string]int) {
		fmt.Fprintf(&b, "%s:", title)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			fmt.Fprintf(&b, " %s=%d", k, m[k])
		}
		b.WriteString("\n")
	}
	counts("writes", r.Writes)
	counts("reads", r.Reads)
	for _, v := range r.Violations[:min(len(r.Violations), shownViolations)] {
		b.WriteString(v.String() + "\n")
	}
	if len(r.Violations) > shownViolations {
		fmt.Fprintf(&b, "and %d more violations\n", len(r.Violations)-shownViolations)
	}
	return b.String()
}

// report counts the history and checks it.
func (r *runner) report() Report {
	rep := Report{Elapsed: time.Since(r.start), Writes: map[string]int{}, Reads: map[string]int{}}
	keys := make([]string, r.cfg.Keys)
	for i := range keys {
		keys[i] = r.cfg.Key(i)
	}
	c := newChecker(keys, r.logs)
	var reads []read
	for _, l := range r.logs {
		for f, n := range l.forms {
			rep.Writes[f] += n
			rep.Ops += n
		}
		rep.UDPTimeouts += l.udpTimeouts
		reads = append(reads, l.reads...)
	}
	slices.SortFunc(reads, func(a, b read) int { return int(a.sent - b.sent) })
	for _, rd := range reads {
		rep.Ops++
		rep.Reads[rd.via+" "+rd.outcome]++
		if rd.via == "udp get" && rd.outcome != timeout {
			rep.UDPAnswered++
		}
		v, unchecked := c.check(rd)
		switch {
		case unchecked:
			rep.Unchecked++
		case v != nil:
			rep.Violations = append(rep.Violations, *v)
		case rd.outcome == failed:
			rep.Violations = append(rep.Violations, *c.violation(rd, "a reply that is not one to a get of the key", nil, nil, nil))
		}
	}
	return rep
}
