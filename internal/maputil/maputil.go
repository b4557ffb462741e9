// Package maputil holds what Santa needs of maps beyond the standard
// library: room for a million entries at once.
package maputil

import "maps"

// Reserve returns m, or a copy of it with room for n more entries if they
// would make it grow more than twice. A Go map grows by splitting one table
// at a time; for a million new entries that costs more than one copy.
func Reserve[K comparable, V any](m map[K]V, n int) map[K]V {
	if n <= len(m) {
		return m
	}
	out := make(map[K]V, len(m)+n)
	maps.Copy(out, m)
	return out
}
