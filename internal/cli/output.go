package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"golang.org/x/sys/unix"
)

// A view is a command's result: a JSON document for scripts (its JSON
// encoding, with the field names docs/santactl.md lists) or tables for
// people.
type view interface {
	table(w io.Writer) error
}

// show prints v the way the user asked for.
func (e *env) show(v view) error {
	if e.global.json {
		return writeJSON(e.stdout, v)
	}
	return v.table(e.stdout)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// table writes rows in aligned columns.
type table struct {
	tw *tabwriter.Writer
}

// newTable starts a table with a header row, if one is given.
func newTable(w io.Writer, header ...any) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

func (t *table) row(cells ...any) {
	for i, c := range cells {
		if i > 0 {
			fmt.Fprint(t.tw, "\t")
		}
		fmt.Fprint(t.tw, c)
	}
	fmt.Fprint(t.tw, "\n")
}

func (t *table) flush() error { return t.tw.Flush() }

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
