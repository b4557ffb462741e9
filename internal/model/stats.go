package model

// ServiceStats are a service's packet counters, summed over CPUs.
type ServiceStats struct {
	Matched  uint64 // answered by the data plane
	Passed   uint64 // reached the stack (the application)
	Fallback uint64 // matched in XDP, left to TC: checksum not verifiable in XDP, or reply too big for its frame
	BadCsum  uint64 // matched, but the request's checksum was wrong: passed
}

// RuleStats are a rule's counters, summed over CPUs.
type RuleStats struct {
	Hits  uint64
	Bytes uint64 // reply payload bytes
}

// PathStats counts, per program exit, why packets left as they did.
type PathStats map[string]uint64
