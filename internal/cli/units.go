package cli

import (
	"fmt"
	"math"
)

// Tables give byte counts and rates in units people read at a glance;
// -json keeps the exact numbers.

// byteSize is n bytes in binary units: "420 B", "4.9 KiB", "2.0 MiB".
func byteSize(n float64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%.0f B", n)
	}
	exp := min(int(math.Log(n)/math.Log(1024)), len(units))
	return fmt.Sprintf("%.1f %ciB", n/math.Pow(1024, float64(exp)), units[exp-1])
}

// bytesCell is a byte count for a table.
func bytesCell(n uint64) string { return byteSize(float64(n)) }

// byteRateCell is bytes per second for a table ("-": no rate yet).
func byteRateCell(r *float64) string {
	if r == nil {
		return "-"
	}
	return byteSize(*r)
}

// countRateCell is events per second for a table: "0.5", "980.0",
// "12.3k", "4.5M" ("-": no rate yet).
func countRateCell(r *float64) string {
	if r == nil {
		return "-"
	}
	x := *r
	for _, u := range []string{"", "k", "M", "G"} {
		if x < 999.95 || u == "G" {
			return fmt.Sprintf("%.1f%s", x, u)
		}
		x /= 1000
	}
	panic("unreachable")
}
