package rules

import "testing"

func TestFNV1a(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want uint32
	}{
		{"", 0x811c9dc5},
		{"a", 0xe40c292c},
		{"foobar", 0xbf9cf968},
	} {
		if got := FNV1a(FNVOffset, []byte(tt.in)); got != tt.want {
			t.Errorf("FNV1a(%q) = %#x; want %#x", tt.in, got, tt.want)
		}
	}
	if got, want := FNV1a(FNV1a(FNVOffset, []byte("foo")), []byte("bar")), uint32(0xbf9cf968); got != want {
		t.Errorf("continued hash of foo+bar = %#x; want %#x", got, want)
	}
}

// collideA and collideB are a known FNV-1a 32-bit collision of equal length;
// the index tests use them to force different bytes into one node.
const collideA, collideB = "declinate", "macallums"

func TestFNV1aKnownCollision(t *testing.T) {
	a, b := FNV1a(FNVOffset, []byte(collideA)), FNV1a(FNVOffset, []byte(collideB))
	if a != b {
		t.Fatalf("%q and %q hash to %#x and %#x; the collision tests need equal hashes", collideA, collideB, a, b)
	}
}
