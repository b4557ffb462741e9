package main

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santa-offload/santa/internal/dnstest"
	"github.com/santa-offload/santa/internal/pkttest"
)

// A dump's names are read from their query patterns, each name once, other
// names left out; the report compares them with the most sent names and
// the first by index.
func TestReport(t *testing.T) {
	pattern := func(name string) string {
		return hex.EncodeToString(pkttest.DNSQuery(0, name)[2:])
	}
	dump := `{"rules": [
		{"condition": {"offset": 2, "hex": "` + pattern(dnstest.Name(3)) + `"}},
		{"condition": {"offset": 2, "hex": "` + pattern(dnstest.Name(1)) + `"}},
		{"condition": {"offset": 2, "hex": "` + pattern(dnstest.Name(3)) + `"}},
		{"condition": {"offset": 2, "hex": "` + pattern("www.example") + `"}},
		{"condition": {"offset": 2, "hex": "` + pattern("n07.example") + `"}},
		{"condition": {"offset": 0, "hex": "` + pattern(dnstest.Name(0)) + `"}}]}`
	path := filepath.Join(t.TempDir(), "dump.json")
	if err := os.WriteFile(path, []byte(dump), 0o644); err != nil {
		t.Fatal(err)
	}
	picked, err := readDump(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(picked) != 2 || picked[0] != 3 || picked[1] != 1 {
		t.Fatalf("readDump gives %v; want [3 1]", picked)
	}
	sent := []int{5, 1, 0, 3, 1} // 10 queries
	var out strings.Builder
	report(&out, "d", sent, picked)
	want := "d: 2 names cover 0.400 of the queries sent; the 2 most sent 0.800 (0.500 of that); the first 2 by index 0.600\n"
	if out.String() != want {
		t.Errorf("report gives\n%s\nwant\n%s", out.String(), want)
	}
}

// A name no query pattern of the bench has, or one past the zone, is not
// weighed; nothing to weigh says so rather than dividing by zero.
func TestReportNothing(t *testing.T) {
	if _, ok := nameIndex(hex.EncodeToString(pkttest.DNSQuery(0, "n-5.example")[2:])); ok {
		t.Error("n-5.example is read as a bench name")
	}
	var out strings.Builder
	report(&out, "d", []int{1, 1}, []int{7})
	if want := "d: 0 names of the zone, 2 queries sent: nothing to weigh\n"; out.String() != want {
		t.Errorf("report gives %q; want %q", out.String(), want)
	}
}
