package cli

import (
	"fmt"
	"io"
	"time"
)

// progressEvery is how often at most the progress line changes.
const progressEvery = 200 * time.Millisecond

// progress tells how far a long batch (add or delete of a million rules)
// is, on one line of stderr rewritten in place, cleared when it is done.
// Only on a terminal: a script's stderr gets nothing.
type progress struct {
	w     io.Writer // nil: stderr is no terminal
	clock func() time.Time
	last  time.Time
	shown bool
}

func (e *env) progress() *progress {
	if !e.errTerminal {
		return &progress{}
	}
	return &progress{w: e.stderr, clock: e.clock}
}

// show replaces the line with the message, unless the last one is less
// than progressEvery old; a final step (force) shows anyway.
func (p *progress) show(force bool, format string, args ...any) {
	if p.w == nil {
		return
	}
	now := p.clock()
	if !force && p.shown && now.Sub(p.last) < progressEvery {
		return
	}
	p.last, p.shown = now, true
	fmt.Fprintf(p.w, "\r\x1b[K"+format, args...)
}

// done clears the line, before the result or an error is written.
func (p *progress) done() {
	if p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.shown = false
	}
}
