package dataplane

import (
	"strconv"
	"strings"
)

// ParseInts reads a comma-separated list of integers, as the benchmark
// commands take rule counts and reply sizes.
func ParseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}
