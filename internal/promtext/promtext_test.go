package promtext

import (
	"bytes"
	"testing"
)

func TestWriter(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	w.Gauge("up", "Whether it is up.", 1)
	w.Family("hits_total", "counter", "Hits.")
	w.Sample("hits_total", 7, "path", `a"b\c`+"\n", "x", "y")
	w.Flush()
	want := "# HELP up Whether it is up.\n# TYPE up gauge\nup 1\n# HELP hits_total Hits.\n# TYPE hits_total counter\n" +
		`hits_total{path="a\"b\\c\n",x="y"} 7` + "\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}
