package rule

// The data plane runs little-endian and loads 16-bit words in that native
// order, as bpf_csum_diff does, so reply checksums are kept as partial sums
// of little-endian words. A ones-complement sum is byte-order independent up
// to a final byte swap: storing ^Fold(sum) little-endian into a checksum
// field yields the right bytes on the wire.

// Sum16LE adds b to the partial sum seed: the ones-complement sum of b's
// little-endian 16-bit words (word k is b[2k] | b[2k+1]<<8; an odd last byte
// is the low byte of a final word), with carries folded back until the
// result fits 32 bits.
//
// Partial sums are equal only up to folding: Linux csum_partial may return a
// different 32-bit value for the same bytes (it adds 64-bit words), but
// Fold of both is the same. Compare partial sums with Fold, never raw.
func Sum16LE(b []byte, seed uint32) uint32 {
	s := uint64(seed)
	for len(b) >= 2 {
		s += uint64(b[0]) | uint64(b[1])<<8
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0])
	}
	for s>>32 != 0 {
		s = s&0xffffffff + s>>32
	}
	return uint32(s)
}

// Fold folds a partial sum to 16 bits with end-around carry (csum_fold
// without the final complement): the checksum field is ^Fold(sum), stored
// little-endian, with 0 sent as 0xffff for UDP.
func Fold(sum uint32) uint16 {
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return uint16(sum)
}
