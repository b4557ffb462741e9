package agent

import (
	"slices"
	"testing"
	"time"
)

func TestSweepDue(t *testing.T) {
	now := time.Unix(1e9, 0)
	const sweep = 30 * time.Second
	// forms checked ages ago, oldest first, as in the sweep's line.
	forms := func(ages ...time.Duration) []*form {
		var fs []*form
		for _, a := range ages {
			fs = append(fs, &form{checked: now.Add(-a)})
		}
		return fs
	}
	spread := func(n int, oldest time.Duration) []*form {
		var ages []time.Duration
		for i := range n {
			ages = append(ages, oldest-time.Duration(i)*oldest/time.Duration(n))
		}
		return forms(ages...)
	}
	burst := func(n int, age time.Duration) []*form {
		var ages []time.Duration
		for range n {
			ages = append(ages, age)
		}
		return forms(ages...)
	}
	for _, tc := range []struct {
		name  string
		forms []*form
		want  int
	}{
		{"none", nil, 0},
		// Checks spread evenly over the last sweep: a sweep's share a second.
		{"steady", spread(3000, sweep-5*time.Millisecond), 100},
		// Learned within the last 15 s: nothing is due yet.
		{"learning", spread(30000, 15*time.Second-time.Millisecond), 0},
		// Learned at 1,000 a second for 20 s: the oldest 5,000 are due,
		// asked at the rate that keeps up with all 20,000.
		{"learned for 20 s", spread(20000, 20*time.Second), 667},
		// 3,000 forms checked at once, 15 s ago: over the next 15 s.
		{"burst due in 15 s", burst(3000, 15*time.Second), 200},
		// ... and 10 s later, the 1,000 left within the last 5 s.
		{"burst due in 5 s", burst(1000, 25*time.Second), 200},
		// Forms a sweep old or older (not reached before): all of them now.
		{"overdue", append(burst(7, 40*time.Second), spread(10, 5*time.Second)...), 7},
	} {
		if got := sweepDue(slices.Values(tc.forms), now, sweep); got != tc.want {
			t.Errorf("%s: %d due; want %d", tc.name, got, tc.want)
		}
	}
}
