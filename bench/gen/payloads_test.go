package gen

import (
	"bytes"
	"strings"
	"testing"
)

func TestReadPayloads(t *testing.T) {
	got, err := ReadPayloads(strings.NewReader("# a DNS query and a memcached GET\n\n00 01 01 00\n  000000010000676574206b0d0a  \n"))
	if err != nil {
		t.Fatal(err)
	}
	want := [][]byte{{0, 1, 1, 0}, append([]byte{0, 0, 0, 1, 0, 0}, "get k\r\n"...)}
	if len(got) != len(want) || !bytes.Equal(got[0], want[0]) || !bytes.Equal(got[1], want[1]) {
		t.Fatalf("got %x, want %x", got, want)
	}
	for _, bad := range []struct{ in, err string }{
		{"", "no requests"},
		{"# only a comment\n", "no requests"},
		{"00\nzz\n", "line 2: not hex"},
		{"0\n", "line 1: not hex"},
		{strings.Repeat("00", MaxFrame-41) + "\n", "line 1: a payload of 215 bytes; want 1 to 214"},
	} {
		if _, err := ReadPayloads(strings.NewReader(bad.in)); err == nil || !strings.Contains(err.Error(), bad.err) {
			t.Errorf("%q: error %v, want one with %q", bad.in, err, bad.err)
		}
	}
}
