package maputil

import "testing"

func TestReserve(t *testing.T) {
	small := map[int]string{1: "a", 2: "b"}
	if got := Reserve(small, 1); len(got) != 2 || got[1] != "a" {
		t.Fatalf("Reserve(m, 1) = %v", got)
	}
	got := Reserve(small, 10)
	got[3] = "c"
	if len(small) != 2 || len(got) != 3 || got[2] != "b" {
		t.Fatalf("Reserve(m, 10) = %v (m now %v): want a copy with m's entries", got, small)
	}
}
