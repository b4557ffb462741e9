package rules

// FNV-1a, 32 bit, one byte at a time: the hash the data plane computes over
// payload regions (the paper's choice; cheap in BPF and extendable, so a
// deeper index level continues a parent's hash instead of starting over).
const (
	FNVOffset = 2166136261 // offset basis: the hash of no bytes
	fnvPrime  = 16777619
)

// FNV1a continues hash h over b; FNV1a(FNVOffset, b) is the hash of b.
func FNV1a(h uint32, b []byte) uint32 {
	for _, c := range b {
		h ^= uint32(c)
		h *= fnvPrime
	}
	return h
}
