package rig

import "testing"

func TestCPUTicks(t *testing.T) {
	busy, total, err := CPUTicks(0)
	if err != nil {
		t.Fatal(err)
	}
	if total == 0 || busy > total {
		t.Errorf("CPU 0: busy %d of %d ticks", busy, total)
	}
	if _, _, err := CPUTicks(1 << 20); err == nil {
		t.Error("a CPU that does not exist has ticks")
	}
}

// SoftirqNS is /proc/stat's softirq column in ns: never more than the
// CPU's busy time, and never for a CPU that does not exist.
func TestSoftirqNS(t *testing.T) {
	busy, _, err := CPUTicks(0)
	if err != nil {
		t.Fatal(err)
	}
	softirq, err := SoftirqNS(0)
	if err != nil {
		t.Fatal(err)
	}
	if softirq > busy*1e9/UserHZ {
		t.Errorf("CPU 0: %d ns in softirqs, more than its %d busy ticks", softirq, busy)
	}
	if _, err := SoftirqNS(1 << 20); err == nil {
		t.Error("a CPU that does not exist has softirq time")
	}
}

func TestSampleRates(t *testing.T) {
	s := Sample{Took: 2e9, CPUUse: CPUUse{ServerBusy: 50, ServerTotal: 200}}
	if got := s.PerSec(1000); got != 500 {
		t.Errorf("PerSec(1000) over 2 s = %v, want 500", got)
	}
	if got := s.ServerBusyPct(); got != 25 {
		t.Errorf("ServerBusyPct = %v, want 25", got)
	}
	// 50 ticks at 100 Hz = 0.5 s of the server CPU for 1000 replies.
	if got := s.ServerUSPer(1000); got != 500 {
		t.Errorf("ServerUSPer(1000) = %v µs, want 500", got)
	}
}
