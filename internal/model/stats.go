package model

// ServiceStats are a service's packet counters, summed over CPUs.
type ServiceStats struct {
	Matched uint64 // answered by the data plane, in XDP or in TC
	Passed  uint64 // reached the stack (the application)
	BadCsum uint64 // matched, but the request's checksum was wrong: passed
	// Answered in TC rather than in XDP (part of Matched), by why XDP could
	// not: TCChecksum, the request's checksum was not verifiable in XDP (a
	// partial one, without veth's skb to vouch for it); TCTooLong, the
	// reply did not fit the XDP frame; TCNoXDP, no XDP program saw the
	// request, or the reply could not leave by XDP (a veth whose peer has
	// neither XDP nor GRO).
	TCChecksum, TCTooLong, TCNoXDP uint64
}

// Fallback is how many requests TC answered rather than XDP, for every
// reason: protocol version 1's fallback counter.
func (s ServiceStats) Fallback() uint64 { return s.TCChecksum + s.TCTooLong + s.TCNoXDP }

// RuleStats are a rule's counters, summed over CPUs.
type RuleStats struct {
	Hits  uint64
	Bytes uint64 // reply payload bytes
}

// PathStats counts, per program exit, why packets left as they did.
type PathStats map[string]uint64
