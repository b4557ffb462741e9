package cli

import "testing"

func TestUnits(t *testing.T) {
	for _, tc := range []struct {
		n    float64
		want string
	}{{0, "0 B"}, {420, "420 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {5040, "4.9 KiB"}, {64 << 20, "64.0 MiB"},
		{1.5 * (1 << 30), "1.5 GiB"}, {3 << 60, "3.0 EiB"}} {
		if got := byteSize(tc.n); got != tc.want {
			t.Errorf("byteSize(%v) = %q; want %q", tc.n, got, tc.want)
		}
	}
	for _, tc := range []struct {
		r    float64
		want string
	}{{0, "0.0"}, {0.5, "0.5"}, {999.9, "999.9"}, {999.96, "1.0k"}, {12345, "12.3k"}, {4.5e6, "4.5M"}, {7e12, "7000.0G"}} {
		if got := countRateCell(&tc.r); got != tc.want {
			t.Errorf("countRateCell(%v) = %q; want %q", tc.r, got, tc.want)
		}
	}
	if countRateCell(nil) != "-" || byteRateCell(nil) != "-" {
		t.Error("no rate yet is not -")
	}
}
