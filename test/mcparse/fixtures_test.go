package mcparse_test

import (
	"slices"
	"strings"
	"testing"

	m "github.com/santa-offload/santa/internal/mcproto"
)

func key(k string) m.Event { return m.Event{Type: m.EvKey, Hash: m.KeyHash([]byte(k))} }
func all(delay int32) m.Event {
	return m.Event{Type: m.EvAll, Arg: delay}
}
func lost(reason uint8) m.Event { return m.Event{Type: m.EvLost, Flags: reason} }
func rep(family uint8, seen uint32) m.Event {
	return m.Event{Type: m.EvReply, Reply: family, Seq: seen}
}

// stored is a STORED reply's event.
func stored(seen uint32) m.Event {
	return m.Event{Type: m.EvReply, Reply: m.FamText, Flags: m.ReplyStored, Seq: seen}
}

// cmd is a command's event; k is its key if it writes one key.
func cmd(c m.Command, replies, flags uint8, k string, doneAt uint32) m.Event {
	e := m.Event{Type: m.EvCmd, Cmd: c, Reply: replies, Flags: flags, Seq: doneAt}
	if k != "" {
		e.Hash = m.KeyHash([]byte(k))
	}
	return e
}

func flush(replies uint8, delay int32, doneAt uint32) m.Event {
	e := cmd(m.CmdFlushAll, replies, m.CmdWrite|m.CmdAll, "", doneAt)
	e.Arg = delay
	return e
}

const (
	w       = m.CmdWrite
	wAll    = m.CmdWrite | m.CmdAll
	wTTL    = m.CmdWrite | m.CmdTTL // may give its key an expiry
	wAllTTL = m.CmdWrite | m.CmdAll | m.CmdTTL
)

type fixture struct {
	name     string
	requests string
	replies  string
	want     []m.Event // requests' then replies', offsets aside
}

var long = strings.Repeat("k", m.MaxKey+1)

var fixtures = []fixture{
	// Reads.
	{"get", "get foo\r\n", "", []m.Event{cmd(m.CmdGet, 1, 0, "", 1)}},
	{"gets of keys", "gets a b c\r\n", "", []m.Event{cmd(m.CmdGets, 1, 0, "", 1)}},
	{"get line with no end to its length", "get " + strings.Repeat("key ", 1500) + "\r\n", "",
		[]m.Event{cmd(m.CmdGet, 1, 0, "", 1)}},
	{"get with LF alone", "get foo\n", "", []m.Event{cmd(m.CmdGet, 1, 0, "", 1)}},
	{"get line's bytes do not matter", "get a\rb\x00c\r\n", "", []m.Event{cmd(m.CmdGet, 1, 0, "", 1)}},
	{"leading and repeated spaces", "  get   foo  \r\n", "", []m.Event{cmd(m.CmdGet, 1, 0, "", 1)}},
	// Storage commands: the data is skipped, whatever it holds.
	{"set", "set foo 1 2 5\r\nhello\r\n", "", []m.Event{key("foo"), cmd(m.CmdSet, 1, wTTL, "foo", 1)}},
	{"set data that reads as commands", "set foo 0 0 12\r\ndelete bar\r\n\r\n", "",
		[]m.Event{key("foo"), cmd(m.CmdSet, 1, w, "foo", 1)}},
	{"set empty, negative exptime", "set foo 0 -1 0\r\n\r\n", "", []m.Event{key("foo"), cmd(m.CmdSet, 1, wTTL, "foo", 1)}},
	{"add noreply", "add foo 0 0 1 noreply\r\nx\r\n", "", []m.Event{key("foo"), cmd(m.CmdAdd, 0, w, "foo", 1)}},
	{"replace", "replace foo 0 0 1\r\nx\r\n", "", []m.Event{key("foo"), cmd(m.CmdReplace, 1, w, "foo", 1)}},
	{"append", "append foo 0 0 1\r\nx\r\n", "", []m.Event{key("foo"), cmd(m.CmdAppend, 1, w, "foo", 1)}},
	{"prepend", "prepend foo 0 0 1\r\nx\r\n", "", []m.Event{key("foo"), cmd(m.CmdPrepend, 1, w, "foo", 1)}},
	{"set, exptime 0 with leading zeros", "set foo 0 00 1\r\nx\r\n", "", []m.Event{key("foo"), cmd(m.CmdSet, 1, w, "foo", 1)}},
	{"set, flags of 3 digits, exptime 0", "set foo 999 0 1\r\nx\r\n", "", []m.Event{key("foo"), cmd(m.CmdSet, 1, w, "foo", 1)}},
	{"set, negative zero exptime", "set foo 0 -0 1\r\nx\r\n", "", []m.Event{key("foo"), cmd(m.CmdSet, 1, w, "foo", 1)}},
	{"append's exptime", "append foo 0 10 1\r\nx\r\n", "", []m.Event{key("foo"), cmd(m.CmdAppend, 1, wTTL, "foo", 1)}},
	{"set's sixth token other than noreply", "set foo 0 0 1 x\r\nx\r\n", "",
		[]m.Event{key("foo"), cmd(m.CmdSet, 1, w, "foo", 1)}},
	{"cas", "cas foo 0 0 3 12345\r\nabc\r\n", "", []m.Event{key("foo"), cmd(m.CmdCAS, 1, w, "foo", 1)}},
	{"cas noreply", "cas foo 0 0 3 12345 noreply\r\nabc\r\n", "",
		[]m.Event{key("foo"), cmd(m.CmdCAS, 0, w, "foo", 1)}},
	{"a key of 250 bytes", "set " + long[1:] + " 0 0 1\r\nx\r\n", "",
		[]m.Event{key(long[1:]), cmd(m.CmdSet, 1, w, long[1:], 1)}},
	// Other writes.
	{"incr", "incr n 5\r\n", "", []m.Event{key("n"), cmd(m.CmdIncr, 1, w, "n", 1)}},
	{"decr noreply", "decr n 1 noreply\r\n", "", []m.Event{key("n"), cmd(m.CmdDecr, 0, w, "n", 1)}},
	{"delete", "delete foo\r\n", "", []m.Event{key("foo"), cmd(m.CmdDelete, 1, w, "foo", 1)}},
	{"delete 0", "delete foo 0\r\n", "", []m.Event{key("foo"), cmd(m.CmdDelete, 1, w, "foo", 1)}},
	{"delete noreply", "delete foo noreply\r\n", "", []m.Event{key("foo"), cmd(m.CmdDelete, 0, w, "foo", 1)}},
	{"delete 0 noreply", "delete foo 0 noreply\r\n", "", []m.Event{key("foo"), cmd(m.CmdDelete, 0, w, "foo", 1)}},
	{"delete of the key noreply", "delete noreply\r\n", "",
		[]m.Event{key("noreply"), cmd(m.CmdDelete, 1, w, "noreply", 1)}},
	{"touch", "touch foo 10\r\n", "", []m.Event{key("foo"), cmd(m.CmdTouch, 1, wTTL, "foo", 1)}},
	{"touch noreply", "touch foo 10 noreply\r\n", "", []m.Event{key("foo"), cmd(m.CmdTouch, 0, wTTL, "foo", 1)}},
	{"gat", "gat 10 foo\r\n", "", []m.Event{key("foo"), cmd(m.CmdGat, 1, wTTL, "foo", 1)}},
	{"gats of keys", "gats 0 a b\r\n", "", []m.Event{key("a"), key("b"), cmd(m.CmdGats, 1, wAllTTL, "", 1)}},
	{"flush_all", "flush_all\r\n", "", []m.Event{all(0), flush(1, 0, 1)}},
	{"flush_all delay", "flush_all 30\r\n", "", []m.Event{all(30), flush(1, 30, 1)}},
	{"flush_all noreply", "flush_all noreply\r\n", "", []m.Event{all(0), flush(0, 0, 1)}},
	{"flush_all negative delay noreply", "flush_all -1 noreply\r\n", "", []m.Event{all(-1), flush(0, -1, 1)}},
	// Others.
	{"version", "version\r\n", "", []m.Event{cmd(m.CmdVersion, 1, 0, "", 1)}},
	{"verbosity", "verbosity 1\r\n", "", []m.Event{cmd(m.CmdVerbosity, 1, 0, "", 1)}},
	{"verbosity noreply", "verbosity 1 noreply\r\n", "", []m.Event{cmd(m.CmdVerbosity, 0, 0, "", 1)}},
	{"quit", "quit\r\n", "", []m.Event{cmd(m.CmdQuit, 0, 0, "", 1)}},
	{"stats", "stats\r\nstats settings\r\n", "", []m.Event{cmd(m.CmdStats, 1, 0, "", 1), cmd(m.CmdStats, 1, 0, "", 2)}},
	// Meta commands.
	{"mg", "mg foo v\r\n", "", []m.Event{cmd(m.CmdMg, 1, 0, "", 1)}},
	{"mg bare", "mg foo\r\n", "", []m.Event{cmd(m.CmdMg, 1, 0, "", 1)}},
	{"mg quiet", "mg foo v q k O123 t c f s\r\n", "", []m.Event{cmd(m.CmdMg, 2, 0, "", 1)}},
	{"mg vivify", "mg foo N30 v\r\n", "", []m.Event{key("foo"), cmd(m.CmdMg, 1, wTTL, "foo", 1)}},
	{"mg touch", "mg foo T30\r\n", "", []m.Event{key("foo"), cmd(m.CmdMg, 1, wTTL, "foo", 1)}},
	{"mg recache", "mg foo R30 v\r\n", "", []m.Event{key("foo"), cmd(m.CmdMg, 1, wTTL, "foo", 1)}},
	{"mg unknown flag", "mg foo E5\r\n", "", []m.Event{key("foo"), cmd(m.CmdMg, 1, wTTL, "foo", 1)}},
	{"mg base64 vivify", "mg Zm9v b N30\r\n", "", []m.Event{all(0), cmd(m.CmdMg, 1, wAllTTL, "", 1)}},
	{"ms", "ms foo 5 T0 F1\r\nhello\r\n", "", []m.Event{key("foo"), cmd(m.CmdMs, 1, wTTL, "foo", 1)}},
	{"ms quiet", "ms foo 2 q\r\nhi\r\n", "", []m.Event{key("foo"), cmd(m.CmdMs, 2, wTTL, "foo", 1)}},
	{"ms base64", "ms Zm9v 2 b\r\nhi\r\n", "", []m.Event{all(0), cmd(m.CmdMs, 1, wAllTTL, "", 1)}},
	{"ms append mode", "ms foo 2 MA\r\nhi\r\n", "", []m.Event{key("foo"), cmd(m.CmdMs, 1, wTTL, "foo", 1)}},
	{"ms of 16 flags", "ms foo 1" + strings.Repeat(" O1", 16) + "\r\nx\r\n", "",
		[]m.Event{key("foo"), cmd(m.CmdMs, 1, wTTL, "foo", 1)}},
	{"md quiet", "md foo q\r\n", "", []m.Event{key("foo"), cmd(m.CmdMd, 2, wTTL, "foo", 1)}},
	{"md invalidate", "md foo I T30\r\n", "", []m.Event{key("foo"), cmd(m.CmdMd, 1, wTTL, "foo", 1)}},
	{"ma", "ma foo D5 MD\r\n", "", []m.Event{key("foo"), cmd(m.CmdMa, 1, wTTL, "foo", 1)}},
	{"mn", "mn\r\n", "", []m.Event{cmd(m.CmdMn, 1, 0, "", 1)}},
	{"me", "me foo\r\n", "", []m.Event{cmd(m.CmdMe, 1, 0, "", 1)}},
	// Several in a row: when each is done.
	{"pipelined", "set a 0 0 1 noreply\r\nx\r\nget a\r\nmg b q\r\nmn\r\n", "",
		[]m.Event{key("a"), cmd(m.CmdSet, 0, w, "a", 1), cmd(m.CmdGet, 1, 0, "", 1),
			cmd(m.CmdMg, 2, 0, "", 2), cmd(m.CmdMn, 1, 0, "", 3)}},
	// Lost sync: nothing after it is parsed.
	{"binary protocol", "\x80\x01\x00\x03\x00\x00\x00\x00", "", []m.Event{lost(m.LostBinary)}},
	{"uppercase command", "GET foo\r\n", "", []m.Event{lost(m.LostCommand)}},
	{"unknown command", "bogus\r\nget foo\r\n", "", []m.Event{lost(m.LostCommand)}},
	{"command not a name", "g3t foo\r\n", "", []m.Event{lost(m.LostCommand)}},
	{"empty line", "\r\n", "", []m.Event{lost(m.LostByte)}},
	{"CR not before LF", "delete foo\rx\r\n", "", []m.Event{lost(m.LostByte)}},
	{"NUL", "delete fo\x00o\r\n", "", []m.Event{lost(m.LostByte)}},
	{"bytes not a number", "set foo 0 0 abc\r\nabc\r\n", "", []m.Event{lost(m.LostFormat)}},
	{"bytes with a sign", "set foo 0 0 +5\r\nhello\r\n", "", []m.Event{lost(m.LostFormat)}},
	{"bytes with a tab", "set foo 0 0 5\t\r\nhello\r\n", "", []m.Event{lost(m.LostFormat)}},
	{"bytes of 10 digits", "set foo 0 0 1234567890\r\n", "", []m.Event{lost(m.LostFormat)}},
	{"negative flags", "set foo -1 0 1\r\nx\r\n", "", []m.Event{lost(m.LostFormat)}},
	{"cas unique of 20 digits", "cas foo 0 0 1 12345678901234567890\r\nx\r\n", "", []m.Event{lost(m.LostFormat)}},
	{"data not ending in CRLF: memcached reads the rest as a command", "set bad 0 0 2\r\nxyz\r\n", "",
		[]m.Event{key("bad"), cmd(m.CmdSet, 1, w, "bad", 1), lost(m.LostByte)}},
	{"set of too many tokens", "set foo 0 0 1 noreply x\r\nx\r\n", "", []m.Event{lost(m.LostFormat)}},
	{"set of too few tokens", "set foo 0 0\r\n", "", []m.Event{lost(m.LostFormat)}},
	{"key of 251 bytes", "set " + long + " 0 0 1\r\nx\r\n", "", []m.Event{lost(m.LostFormat)}},
	{"delete of too many tokens", "delete a 0 noreply x\r\n", "", []m.Event{lost(m.LostFormat)}},
	{"flush_all delay not a number", "flush_all x\r\n", "", []m.Event{lost(m.LostFormat)}},
	{"ms negative length", "ms foo -1\r\n", "", []m.Event{lost(m.LostFormat)}},
	{"ms with no length", "ms foo\r\n", "", []m.Event{lost(m.LostFormat)}},
	{"ms of 17 flags", "ms foo 1" + strings.Repeat(" O1", 17) + "\r\nx\r\n", "", []m.Event{lost(m.LostFormat)}},
	{"mg of 17 flags", "mg foo" + strings.Repeat(" k", 17) + "\r\n", "", []m.Event{lost(m.LostFormat)}},
	{"mg with no key", "mg\r\n", "", []m.Event{lost(m.LostFormat)}},
	{"line too long", "version" + strings.Repeat(" x", m.MaxLine) + "\r\n", "", []m.Event{lost(m.LostLine)}},

	// Replies.
	{"stored", "", "STORED\r\n", []m.Event{stored(1)}},
	{"stored or not", "", "NOT_STORED\r\nSTORED\r\nEND\r\n", []m.Event{rep(m.FamText, 1), stored(2), rep(m.FamText, 3)}},
	{"values", "", "VALUE foo 0 5\r\nhello\r\nVALUE bar 1 2 99\r\nhi\r\nEND\r\n", []m.Event{rep(m.FamText, 1)}},
	{"value data that reads as replies", "", "VALUE foo 0 8\r\nSTORED\r\n\r\nEND\r\n", []m.Event{rep(m.FamText, 1)}},
	{"miss", "", "END\r\n", []m.Event{rep(m.FamText, 1)}},
	{"text codes", "", "NOT_STORED\r\nEXISTS\r\nNOT_FOUND\r\nDELETED\r\nTOUCHED\r\nOK\r\nRESET\r\n",
		[]m.Event{rep(1, 1), rep(1, 2), rep(1, 3), rep(1, 4), rep(1, 5), rep(1, 6), rep(1, 7)}},
	{"incr's value", "", "18446744073709551615\r\n", []m.Event{rep(m.FamText, 1)}},
	{"version", "", "VERSION 1.6.18\r\n", []m.Event{rep(m.FamText, 1)}},
	{"stats", "", "STAT pid 1\r\nSTAT version 1.6.18\r\nEND\r\n", []m.Event{rep(m.FamText, 1)}},
	{"meta codes", "", "HD\r\nHD k foo O12 c99\r\nNS\r\nEX\r\nNF\r\nEN\r\n",
		[]m.Event{rep(2, 1), rep(2, 2), rep(2, 3), rep(2, 4), rep(2, 5), rep(2, 6)}},
	{"meta value", "", "VA 5 f0 t-1\r\nhello\r\n", []m.Event{rep(m.FamMeta, 1)}},
	{"meta debug", "", "ME foo exp=-1 la=2 cas=3 fetch=no cls=1 size=60\r\n", []m.Event{rep(m.FamMeta, 1)}},
	{"mn", "", "MN\r\n", []m.Event{rep(m.FamMn, 1)}},
	{"errors", "", "ERROR\r\nCLIENT_ERROR bad command line format\r\nSERVER_ERROR out of memory\r\n",
		[]m.Event{rep(4, 1), rep(4, 2), rep(4, 3)}},
	{"error ends a get's reply", "", "VALUE foo 0 5\r\nhello\r\nSERVER_ERROR x\r\n", []m.Event{rep(m.FamError, 1)}},
	{"MN after quiet misses: up to the mn", "mg a q\r\nmg b q\r\nmn\r\n", "MN\r\n",
		[]m.Event{cmd(m.CmdMg, 2, 0, "", 1), cmd(m.CmdMg, 2, 0, "", 2), cmd(m.CmdMn, 1, 0, "", 3), rep(m.FamMn, 3)}},
	{"MN of an earlier mn: counted alone", "mg a q\r\nmn\r\nmg b q\r\nmn\r\n", "MN\r\n",
		[]m.Event{cmd(m.CmdMg, 2, 0, "", 1), cmd(m.CmdMn, 1, 0, "", 2), cmd(m.CmdMg, 2, 0, "", 3),
			cmd(m.CmdMn, 1, 0, "", 4), rep(m.FamMn, 1)}},
	{"reply binary protocol", "", "\x81\x00\x00\x00", []m.Event{lost(m.LostBinary)}},
	{"lowercase reply", "", "stored\r\n", []m.Event{lost(m.LostCommand)}},
	{"value line short", "", "VALUE foo 0\r\n", []m.Event{lost(m.LostFormat)}},
	{"value length not a number", "", "VALUE foo 0 x\r\n", []m.Event{lost(m.LostFormat)}},
	{"value line long", "", "VALUE foo 0 1 2 3\r\n", []m.Event{lost(m.LostFormat)}},
	{"code in a get's reply", "", "VALUE foo 0 5\r\nhello\r\nSTORED\r\n", []m.Event{lost(m.LostFormat)}},
	{"text code not alone", "", "STORED extra\r\n", []m.Event{lost(m.LostFormat)}},
	{"empty reply line", "", "\r\n", []m.Event{lost(m.LostByte)}},
	{"reply line too long", "", "STAT " + strings.Repeat("x", m.MaxLine) + "\r\n", []m.Event{lost(m.LostLine)}},
}

// Each fixture, whole, reports what memcached does; then, cut at every
// byte and into bytes, the same, through the Go reference and the data
// plane alike, with the same states.
func TestFixtures(t *testing.T) {
	p := load(t)
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			requests, replies := []byte(f.requests), []byte(f.replies)
			whole := goRun(t, requests, replies, nil, nil)
			got := slices.Clone(whole.events)
			for i := range got {
				got[i].Off = 0
			}
			if !slices.Equal(got, f.want) {
				t.Fatalf("events\n%v\nwant\n%v", got, f.want)
			}
			same(t, "data plane, whole", bpfRun(t, p, requests, replies, nil, nil), whole)
			bytewise := func(n int) []int {
				cuts := make([]int, n)
				for i := range cuts {
					cuts[i] = i
				}
				return cuts
			}
			same(t, "Go, bytewise", goRun(t, requests, replies, bytewise(len(requests)), bytewise(len(replies))), whole)
			same(t, "data plane, bytewise",
				bpfRun(t, p, requests, replies, bytewise(len(requests)), bytewise(len(replies))), whole)
			for c := 1; c < len(requests) && len(requests) < 300; c++ {
				same(t, "requests cut", bpfRun(t, p, requests, replies, []int{c}, nil), whole)
			}
			for c := 1; c < len(replies) && len(replies) < 300; c++ {
				same(t, "replies cut", bpfRun(t, p, requests, replies, nil, []int{c}), whole)
			}
		})
	}
}
