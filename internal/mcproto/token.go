package mcproto

// token is the token being read, laid out as struct mc_token (24 bytes).
type token struct {
	Word  uint64 // the token as a name, 5 bits a letter, or wordBad
	Hash  uint32 // FNV-1a of its bytes
	Num   uint32 // the value of its first maxDigits digits
	Len   uint16
	Bits  uint8 // tokDigits, tokNeg
	First uint8 // its first byte
	_     uint32
}

const (
	wordBad   = ^uint64(0)
	tokDigits = 1 // nothing but digits after an optional leading '-'
	tokNeg    = 2 // a leading '-'
	fnvOffset = 2166136261
	fnvPrime  = 16777619
)

// word packs a name as token.Word does: 5 bits a letter, a-z (or A-Z)
// 1-26, '_' 27.
func word(name string) uint64 {
	var w uint64
	for _, c := range []byte(name) {
		if c == '_' {
			w = w<<5 | 27
		} else {
			w = w<<5 | uint64(c|0x20-'a'+1)
		}
	}
	return w
}

func (t *token) start() {
	*t = token{Hash: fnvOffset, Bits: tokDigits}
}

// add adds byte b; a name is lowercase in requests, uppercase in replies.
func (t *token) add(b byte, upper bool) {
	lo := byte('a')
	if upper {
		lo = 'A'
	}
	if t.Len == 0 {
		t.First = b
	}
	t.Hash = (t.Hash ^ uint32(b)) * fnvPrime
	if t.Word != wordBad {
		switch {
		case t.Len >= 12:
			t.Word = wordBad
		case b >= lo && b <= lo+25:
			t.Word = t.Word<<5 | uint64(b-lo+1)
		case b == '_':
			t.Word = t.Word<<5 | 27
		default:
			t.Word = wordBad
		}
	}
	switch {
	case b >= '0' && b <= '9':
		if t.Len < maxDigits+1 {
			t.Num = t.Num*10 + uint32(b-'0')
		}
	case b == '-' && t.Len == 0:
		t.Bits |= tokNeg
	default:
		t.Bits &^= tokDigits
	}
	if t.Len < 0xffff {
		t.Len++
	}
}

// number reports whether the token is a decimal number of 1 to max digits
// (signed if signedOK): what memcached's safe_strto* read the same way.
func (t *token) number(signedOK bool, max uint16) bool {
	var neg uint16
	if t.Bits&tokNeg != 0 {
		neg = 1
	}
	if t.Bits&tokDigits == 0 || (neg == 1 && !signedOK) {
		return false
	}
	return t.Len > neg && t.Len-neg <= max
}

// value is the token's number, its sign applied.
func (t *token) value() int32 {
	if t.Bits&tokNeg != 0 {
		return -int32(t.Num)
	}
	return int32(t.Num)
}
