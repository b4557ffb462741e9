package rule

import (
	"math/rand/v2"
	"testing"
)

func TestSum16LE(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   []byte
		seed uint32
		want uint32
	}{
		{"empty", nil, 0, 0},
		{"one word", []byte{0x01, 0x02}, 0, 0x0201},
		{"odd byte is low", []byte{0x01, 0x02, 0x03}, 0, 0x0204},
		{"seed", []byte{0x01, 0x00}, 7, 8},
		{"no fold below 2^32", []byte{0xff, 0xff, 0xff, 0xff}, 0, 0x1fffe},
		{"carry folds", []byte{0x01, 0x00}, 0xffffffff, 1},
	} {
		if got := Sum16LE(tt.in, tt.seed); got != tt.want {
			t.Errorf("%s: Sum16LE = %#x; want %#x", tt.name, got, tt.want)
		}
	}
	for _, tt := range []struct {
		in   uint32
		want uint16
	}{
		{0, 0}, {0xffff, 0xffff}, {0x1fffe, 0xffff}, {0x12345678, 0x68ac}, {0xffffffff, 0xffff},
	} {
		if got := Fold(tt.in); got != tt.want {
			t.Errorf("Fold(%#x) = %#x; want %#x", tt.in, got, tt.want)
		}
	}
}

// naiveSum is RFC 1071 done one little-endian word at a time with an
// end-around carry after every addition.
func naiveSum(b []byte, seed uint32) uint16 {
	s := uint32(Fold(seed))
	for i := 0; i < len(b); i += 2 {
		w := uint32(b[i])
		if i+1 < len(b) {
			w |= uint32(b[i+1]) << 8
		}
		s += w
		if s > 0xffff {
			s -= 0xffff
		}
	}
	return uint16(s)
}

// bigEndianSum sums network-order words; a ones-complement sum in the other
// byte order is the same sum byte-swapped.
func bigEndianSum(b []byte) uint16 {
	var s uint32
	for i := 0; i < len(b); i += 2 {
		w := uint32(b[i]) << 8
		if i+1 < len(b) {
			w |= uint32(b[i+1])
		}
		s += w
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

func TestSum16LEIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		b := make([]byte, rng.IntN(1500))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		if rng.IntN(4) == 0 { // long runs of 0xff stress the carries
			for i := range b {
				b[i] = 0xff
			}
		}
		seed := rng.Uint32()
		if got, want := Fold(Sum16LE(b, seed)), naiveSum(b, seed); got != want {
			t.Fatalf("len %d seed %#x: Fold(Sum16LE) = %#x; naive sum %#x", len(b), seed, got, want)
		}
		le, be := Fold(Sum16LE(b, 0)), bigEndianSum(b)
		if le != be<<8|be>>8 {
			t.Fatalf("len %d: little-endian sum %#x is not the byte-swapped big-endian sum %#x", len(b), le, be)
		}
	}
}
