package procsock

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestParseTable(t *testing.T) {
	// The kernel prints each 32-bit word of an address as a number in the
	// host's byte order.
	word := func(b ...byte) string { return fmt.Sprintf("%08X", binary.NativeEndian.Uint32(b)) }
	table := "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n" +
		"  123: " + word(127, 0, 0, 1) + ":1E61 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 31452 2 0000000000000000 0\n" +
		"  124: " + word(0x20, 0x01, 0x0d, 0xb8) + word(0, 0, 0, 0) + word(0, 0, 0, 0) + word(0, 0, 0, 1) + ":0035 " +
		strings.Repeat("0", 32) + ":0000 07 00000000:0000004B 00:00000000 00000000   101        0 99 2 0000000000000000 0\n"
	got, err := parseTable(strings.NewReader(table))
	want := []Socket{
		{Local: netip.MustParseAddrPort("127.0.0.1:7777"), State: 7, UID: 0, Inode: 31452, RecvQ: 0},
		{Local: netip.MustParseAddrPort("[2001:db8::1]:53"), State: 7, UID: 101, Inode: 99, RecvQ: 75},
	}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("parseTable gives %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"  0: 0100007F:1E61\n", "  0: 0100007F 00000000:0000 07 0:0 0:0 0 0 0 1\n", "  0: 0100007F:1E61 00000000:0000 07 0:0 0:0 0 0 0 x\n", "  0: 0100007F:1E61 00000000:0000 QQ 0:0 0:0 0 0 0 1\n", "  0: 0100007F:1E61 00000000:0000 07 0:QQ 0:0 0 0 0 1\n", "  0: 0100007F:1E61 00000000:0000 07 0:0 0:0 0 x 0 1\n"} {
		if _, err := parseTable(strings.NewReader("header\n" + bad)); err == nil {
			t.Errorf("parseTable accepts %q", bad)
		}
	}
}
