package journal

import (
	"fmt"
	"io"
	"slices"
)

// What a crash can leave after the last good record (the package comment
// says why these and nothing else). Open cuts it off.
const (
	tornRecord = "a record cut short"
	tornZeros  = "zero bytes after the last record"
)

// zerosToEnd reads r to its end and reports whether it held zeros only.
func zerosToEnd(r io.Reader) (bool, error) {
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if !zeros(buf[:n]) {
			return false, nil
		}
		if err == io.EOF {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("reading journal: %w", err)
		}
	}
}

// CorruptError is a journal damaged in a way no crash leaves. Open restores
// nothing from it and leaves the file as it is: the records before the
// damage are not all there is, and restoring them alone would drop the
// acknowledged ones after it without a word.
type CorruptError struct {
	Path    string
	Offset  int64 // where the damaged header or record starts
	Size    int64 // the file's length
	Records int   // good records before Offset
	Reason  string
}

func (e *CorruptError) Error() string {
	msg := fmt.Sprintf("journal %s is damaged at byte %d of %d, after %d good records: %s. Nothing is restored from a damaged journal, and it is left as it is",
		e.Path, e.Offset, e.Size, e.Records, e.Reason)
	aside := fmt.Sprintf("mv %s %s.corrupt", e.Path, e.Path)
	const docs = ` (docs/operations.md, "A damaged journal")`
	if e.Records == 0 {
		return fmt.Sprintf("%s. To start from nothing, keeping it: %s%s", msg, aside, docs)
	}
	return fmt.Sprintf("%s. To restore the %d records before the damage, keeping it: cp -p %s %s.corrupt && truncate -s %d %s; to start from nothing: %s%s",
		msg, e.Records, e.Path, e.Path, e.Offset, e.Path, aside, docs)
}

func zeros(p []byte) bool { return !slices.ContainsFunc(p, func(c byte) bool { return c != 0 }) }
