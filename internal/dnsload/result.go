package dnsload

import (
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// Result is what a load saw.
type Result struct {
	Sent, Replies, Timeouts int
	// Late replies came after their query's timeout (the first reply to
	// it); Unexpected ones answer no query at all: a second reply to one
	// query (two answerers), or one without an id.
	Late, Unexpected int
	// Refused counts the port-unreachable errors the socket reported: a
	// query reached the server's address while no socket was bound to
	// its port (a server restarting). Its query is lost (a timeout).
	Refused int
	// Starting counts the SERVFAIL replies of a server starting
	// (Config.Restarting).
	Starting int
	// Mismatches are replies that match neither the expected reply nor,
	// after a change, the one from before it.
	Mismatches int
	// OldReplies carried the data from before a change, to a form the
	// change altered; Stale of them arrived more than StaleAfter after
	// the change was complete; LastOld is when the last one arrived.
	OldReplies, Stale int
	LastOld           time.Time
	Elapsed           time.Duration
	PerForm           []FormCounts // by form, as Config.Forms
	// FirstMismatches are the first few mismatched replies.
	FirstMismatches []Mismatch
}

// FormCounts are one form's counts.
type FormCounts struct{ Sent, Replies, Timeouts, Mismatches, Stale int }

// A Mismatch is a reply that was not the expected one.
type Mismatch struct {
	Form      int
	At        time.Time
	Got, Want []byte // Want with transaction id 0
}

// Report is the result in words: the counts, the forms with mismatches,
// timeouts or stale replies, and hex dumps of the first mismatches.
func (r Result) Report(forms []Form) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d sent, %d replies, %d timeouts (%d replied late), %d port unreachable, %d SERVFAIL while starting, %d unexpected, %d mismatches, %d old (%d stale) in %v\n",
		r.Sent, r.Replies, r.Timeouts, r.Late, r.Refused, r.Starting, r.Unexpected, r.Mismatches, r.OldReplies, r.Stale, r.Elapsed.Round(time.Millisecond))
	for i, c := range r.PerForm {
		if c.Mismatches+c.Timeouts+c.Stale > 0 && i < len(forms) {
			fmt.Fprintf(&b, "  %v: %d sent, %d replies, %d timeouts, %d mismatches, %d stale\n",
				forms[i], c.Sent, c.Replies, c.Timeouts, c.Mismatches, c.Stale)
		}
	}
	for _, m := range r.FirstMismatches {
		name := fmt.Sprint(m.Form)
		if m.Form < len(forms) {
			name = forms[m.Form].String()
		}
		fmt.Fprintf(&b, "mismatch for %s at %s:\ngot:\n%swant:\n%s", name, m.At.Format("15:04:05.000000"),
			hex.Dump(m.Got), hex.Dump(m.Want))
	}
	return b.String()
}
