package journal

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/santa-offload/santa/internal/model"
)

// historyFile is history's journal as bytes, with where each record starts
// and what replay must give.
func historyFile(t *testing.T) ([]byte, []int64, map[model.ServiceID]*Service) {
	t.Helper()
	dir := t.TempDir()
	j, _ := reopen(t, dir)
	want, starts := history(t, j)
	j.Close()
	data, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	return data, starts, want
}

// writeJournal writes data as the journal of a new state directory.
func writeJournal(t *testing.T, data []byte) (dir, path string) {
	t.Helper()
	dir = t.TempDir()
	path = filepath.Join(dir, FileName)
	must(t, os.WriteFile(path, data, 0o600))
	return dir, path
}

// Damage no crash leaves: Open refuses it with a CorruptError that says
// where it starts, and leaves the file as it is, byte for byte, and alone in
// its directory.
func TestDamage(t *testing.T) {
	orig, starts, _ := historyFile(t)
	end := int64(len(orig))
	flip := func(at int64) func([]byte) []byte {
		return func(b []byte) []byte { b[at] ^= 0x10; return b }
	}
	// setLen writes n as record i's length, its payload as it is.
	setLen := func(i int, n func(uint32) uint32) func([]byte) []byte {
		return func(b []byte) []byte {
			le.PutUint32(b[starts[i]:], n(le.Uint32(b[starts[i]:])))
			return b
		}
	}
	// rewrite replaces record i by a record of its payload changed by
	// change, under a matching CRC: a bug's record, not a disk's.
	rewrite := func(i int, change func([]byte) []byte) func([]byte) []byte {
		return func(b []byte) []byte {
			payload := change(bytes.Clone(b[starts[i]+frameLen : starts[i+1]]))
			frame := le.AppendUint32(le.AppendUint32(nil, uint32(len(payload))), crc32.Checksum(payload, castagnoli))
			return slices.Concat(b[:starts[i]], frame, payload, b[starts[i+1]:])
		}
	}
	payload := func(i int) int64 { return starts[i] + frameLen }
	crcFails := "its CRC-32C does not match"
	for _, c := range []struct {
		name    string
		damage  func([]byte) []byte
		at      int64 // where the damaged header or record starts
		records int   // the good records before it
		reason  string
	}{
		{"a byte of the first record's payload", flip(payload(0) + 5), starts[0], 0, crcFails},
		{"a byte of a middle record's payload", flip(payload(3) + 10), starts[3], 3, crcFails},
		{"a byte of the third-from-last record's payload", flip(payload(4) + 1), starts[4], 4, crcFails},
		{"a byte of the last record's payload", flip(payload(6) + 2), starts[6], 6, crcFails},
		{"the file's last byte", flip(end - 1), starts[6], 6, crcFails},
		{"a byte of a frame's CRC", flip(starts[2] + 5), starts[2], 2, crcFails},
		{"a frame's length, one more", setLen(3, func(n uint32) uint32 { return n + 1 }), starts[3], 3, crcFails},
		{"a frame's length, one less", setLen(3, func(n uint32) uint32 { return n - 1 }), starts[3], 3, crcFails},
		{"a frame's length, past the end of the file", setLen(3, func(n uint32) uint32 { return n + 1<<20 }), starts[3], 3,
			"more than the 228 left in the file, and they are not the start of one record"},
		{"the last frame's length, past the end of the file", setLen(6, func(n uint32) uint32 { return n + 1 }), starts[6], 6,
			"its frame says 80 bytes, more than the 79 left in the file, and they are not the start of one record"},
		{"a frame's length, zero", setLen(1, func(uint32) uint32 { return 0 }), starts[1], 1, "a record length of 0 (1 to 1073741824)"},
		{"a frame of zeros", func(b []byte) []byte { clear(b[starts[2] : starts[2]+frameLen]); return b }, starts[2], 2,
			"a frame of zeros, and bytes other than zeros after it"},
		{"a frame's length, past the limit", setLen(5, func(uint32) uint32 { return maxLen + 1 }), starts[5], 5,
			"a record length of 1073741825 (1 to 1073741824)"},
		{"a record of no known kind, its CRC right", rewrite(2, func(p []byte) []byte { p[0] = 9; return p }), starts[2], 2,
			"its CRC-32C matches but it does not decode: record kind 9"},
		{"a record with a byte too many, its CRC right", rewrite(4, func(p []byte) []byte { return append(p, 0) }), starts[4], 4,
			"its CRC-32C matches but it does not decode: 1 bytes left over"},
		{"a record a byte short, its CRC right", rewrite(3, func(p []byte) []byte { return p[:len(p)-1] }), starts[3], 3,
			"its CRC-32C matches but it does not decode: record ends inside a field"},
		{"bytes after the last record", func(b []byte) []byte { return append(b, "not a record, just bytes"...) }, end, 7,
			"its frame says 544501614 bytes, more than the 16 left in the file, and they are not the start of one record"},
		// A host crash with the state directory on a disk can leave a page
		// written only up to a point inside a record, zeros after it.
		{"the last record cut short, then zeros to the end of the page", func(b []byte) []byte {
			return append(b[:payload(6)+10], make([]byte, 4096-(payload(6)+10))...)
		}, starts[6], 6, crcFails},
		{"an empty file", func(b []byte) []byte { return b[:0] }, 0, 0, "the file ends inside the header, after 0 of its 8 bytes"},
		{"a header cut short", func(b []byte) []byte { return b[:5] }, 0, 0, "the file ends inside the header, after 5 of its 8 bytes"},
		{"another file's header", flip(1), 0, 0, `not a santad journal: it starts "S^TJ", not "SNTJ"`},
		{"another version", func(b []byte) []byte { b[4] = 3; return b }, 0, 0, "version 3 of the journal; this santad reads versions 1 and 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			damaged := c.damage(bytes.Clone(orig))
			dir, path := writeJournal(t, damaged)
			j, rep, err := Open(dir)
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("Open gives %v and restores %d services; want a CorruptError", err, len(rep.Services))
			}
			want := CorruptError{Path: path, Offset: c.at, Size: int64(len(damaged)), Records: c.records, Reason: ce.Reason}
			if *ce != want || !strings.Contains(ce.Reason, c.reason) {
				t.Errorf("Open says %+v\nwant %+v with the reason %q", *ce, want, c.reason)
			}
			if j != nil || rep.Services != nil || rep.Existed {
				t.Errorf("Open refuses and still gives a journal %v, %+v", j, rep)
			}
			// What to do: cut it before the damage, or move it aside.
			advice := fmt.Sprintf("cp -p %s %[1]s.corrupt && truncate -s %d %[1]s;", path, c.at)
			if c.records == 0 {
				advice = fmt.Sprintf("start from nothing, keeping it: mv %s %[1]s.corrupt (", path)
			}
			for _, s := range []string{fmt.Sprintf("journal %s is damaged at byte %d of ", path, c.at), advice} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("the error does not say %q: %v", s, err)
				}
			}
			keptAsItIs(t, dir, damaged)
		})
	}
}

// keptAsItIs checks that the journal in dir holds data and is alone there.
func keptAsItIs(t *testing.T, dir string, data []byte) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("the journal was changed (%v): %d bytes, were %d", err, len(got), len(data))
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the state directory holds %v; want the journal alone", entries)
	}
}

// What a crash can leave: the last record cut short (santad killed inside
// its write), or zeros after the last record (a host crash, the file's
// size written and not its data). Open replays everything before, cuts
// the rest off and says so; a record appended later replays too.
func TestTornEnd(t *testing.T) {
	orig, starts, _ := historyFile(t)
	end, last := int64(len(orig)), starts[6]
	type tornEnd struct {
		name   string
		data   []byte
		at     int64
		torn   string
		before bool // only the six records before the last replay
	}
	var cases []tornEnd
	for cut := int64(1); cut < end-last; cut++ {
		cases = append(cases, tornEnd{fmt.Sprintf("the last record cut %d bytes in", cut), orig[:last+cut], last, "a record cut short", true})
	}
	for _, n := range []int{1, 7, 8, 4096} {
		cases = append(cases, tornEnd{fmt.Sprintf("%d zero bytes after the last record", n), append(bytes.Clone(orig), make([]byte, n)...),
			end, "zero bytes after the last record", false})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, _ := writeJournal(t, c.data)
			j, rep := reopen(t, dir)
			_, _, want := historyFile(t)
			if c.before {
				want = beforeLast()
			}
			if !reflect.DeepEqual(rep.Services, want) {
				t.Errorf("replay gives\n%+v\nwant\n%+v", rep.Services, want)
			}
			if got := (Replayed{Services: rep.Services, Existed: true, Torn: c.torn, TornAt: c.at, Ignored: int64(len(c.data)) - c.at}); !reflect.DeepEqual(rep, got) {
				t.Errorf("Open reports %+v\nwant %+v", rep, got)
			}
			keptAsItIs(t, dir, orig[:c.at])
			must(t, j.Remove(1))
			j.Close()
			_, rep = reopen(t, dir)
			if delete(want, 1); !reflect.DeepEqual(rep.Services, want) || rep.Ignored != 0 {
				t.Errorf("after a record appended to the cut journal, replay gives %+v, ignoring %d bytes", rep.Services, rep.Ignored)
			}
		})
	}
}
