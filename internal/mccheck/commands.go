package mccheck

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// A writer's commands: what it sends for each kind, and what memcached's
// reply says about the key afterwards.

// keyState is what a writer knows of one of its keys: the value its last
// change left, and whether that value is a counter. Only the writer
// changes the key's value (a flush_all, anyone's, can only remove it), so
// an append that memcached stores leaves exactly value+data.
type keyState struct {
	value string
	// counter: value is a number; arith: an incr/decr/ma left it, so
	// memcached may hold it padded with spaces (its length is unknown).
	counter, arith bool
	retired        bool // a UDP write of it went unanswered
}

// cmd is one write command of a batch.
type cmd struct {
	key     int // -1: flush_all or mn
	kind    Kind
	line    string // the command line, without CRLF: what the history shows
	data    string // a storing command's data
	noreply bool   // no reply at all: acknowledged by the next one
	opaque  string // quiet: "O<n>"; its reply, if any, carries it
	delay   int    // flush_all's delay
	seq     int
}

// bytes is the command on the wire.
func (c *cmd) bytes() []byte {
	if c.data == "" && !storing(c.kind) {
		return []byte(c.line + "\r\n")
	}
	return []byte(c.line + "\r\n" + c.data + "\r\n")
}

func storing(k Kind) bool {
	switch k {
	case Set, Add, Replace, Append, Prepend, CAS, MetaSet:
		return true
	}
	return false
}

// gen makes a writer's commands.
type gen struct {
	cfg     Config
	writer  int
	run     string // names the run in every value
	rng     *rand.Rand
	kinds   []Kind // the kinds used
	version int
	state   map[int]*keyState
}

// textValue is a new value of key: unique in the run (it names the run,
// the key, the writer and a version), 30 to 210 bytes.
func (g *gen) textValue(key int) string {
	g.version++
	v := fmt.Sprintf("%s.%s.w%d.v%d.", g.run, g.cfg.Key(key), g.writer, g.version)
	return v + strings.Repeat("x", g.rng.IntN(180))
}

// counterValue is a new counter of key: unique until incremented by a
// million.
func (g *gen) counterValue() string {
	g.version++
	return strconv.FormatUint(uint64(g.version)*1_000_000+g.rng.Uint64N(1000), 10)
}

// allowed: kind k is used.
func (g *gen) allowed(k Kind) bool { return slices.Contains(g.kinds, k) }

// set is a set of key to a new value.
func (g *gen) set(key int) *cmd {
	c := &cmd{key: key, kind: Set, data: g.textValue(key)}
	c.line = fmt.Sprintf("set %s 0 0 %d", g.cfg.Key(key), len(c.data))
	return c
}

// next is a command for key over TCP (udp false) or UDP, among the kinds
// that make sense for what the key holds.
func (g *gen) next(key int, udp bool) *cmd {
	st := g.state[key]
	var usable []Kind
	for _, k := range g.kinds {
		switch {
		case k == FlushAll || k == FlushDelay:
		case udp && (k == CAS || k == NoReply || k == Quiet):
		case (k == Incr || k == Decr || k == MetaArith) && !st.counter:
		case (k == Append || k == Prepend) && (st.counter || st.arith || len(st.value) > 400):
		default:
			usable = append(usable, k)
		}
	}
	kind := Set
	if len(usable) > 0 {
		kind = usable[g.rng.IntN(len(usable))]
	}
	name := g.cfg.Key(key)
	c := &cmd{key: key, kind: kind}
	value := func() string {
		if g.rng.IntN(4) == 0 {
			return g.counterValue()
		}
		return g.textValue(key)
	}
	switch kind {
	case Set, Add, Replace:
		c.data = value()
		c.line = fmt.Sprintf("%s %s %d 0 %d", kind, name, g.rng.IntN(1000), len(c.data))
	case Append, Prepend:
		g.version++
		c.data = fmt.Sprintf("+%c%d", kind[0], g.version)
		c.line = fmt.Sprintf("%s %s 0 0 %d", kind, name, len(c.data))
	case CAS:
		c.data = value() // the line gets the unique once the writer has it
	case Incr, Decr:
		c.line = fmt.Sprintf("%s %s %d", kind, name, 1+g.rng.IntN(1000))
	case Delete:
		c.line = "delete " + name
	case Touch:
		c.line = "touch " + name + " 0"
	case MetaSet:
		c.data = value()
		c.line = fmt.Sprintf("ms %s %d F%d", name, len(c.data), g.rng.IntN(1000))
	case MetaDel:
		c.line = "md " + name
	case MetaArith:
		c.line = fmt.Sprintf("ma %s v D%d", name, 1+g.rng.IntN(1000))
		if g.rng.IntN(2) == 0 {
			c.line += " MD"
		}
	case NoReply:
		if g.rng.IntN(3) == 0 {
			c.line = "delete " + name + " noreply"
		} else {
			c.data = value()
			c.line = fmt.Sprintf("set %s 0 0 %d noreply", name, len(c.data))
		}
		c.noreply = true
	case Quiet:
		g.version++
		c.opaque = fmt.Sprintf("O%d", g.version)
		if g.rng.IntN(3) == 0 {
			c.line = "md " + name + " q " + c.opaque
		} else {
			c.data = value()
			c.line = fmt.Sprintf("ms %s %d q %s", name, len(c.data), c.opaque)
		}
	}
	return c
}

// outcome applies memcached's reply to c (for a silent command, "": it
// succeeded; data: a VA reply's data) to the writer's state and to w.
func (g *gen) outcome(c *cmd, reply, data string, w *write) {
	st := g.state[c.key]
	w.reply = reply
	change := func(v string, arith bool) {
		w.changed, w.value, w.present = true, v, true
		_, err := strconv.ParseUint(v, 10, 64)
		st.value, st.counter, st.arith = v, err == nil, arith
	}
	line := c.line
	switch {
	case c.kind == NoReply && strings.HasPrefix(line, "delete"), c.kind == Quiet && strings.HasPrefix(line, "md"):
		w.absent = true // silent or NF: absent either way
	case c.kind == NoReply || c.kind == Quiet:
		if reply == "" {
			change(c.data, false)
		}
	case c.kind == Delete || c.kind == MetaDel:
		w.absent = reply == "DELETED" || reply == "NOT_FOUND" || reply == "HD" || reply == "NF"
	case reply == "STORED" || reply == "HD":
		switch c.kind {
		case Append:
			change(st.value+c.data, false)
		case Prepend:
			change(c.data+st.value, false)
		default:
			change(c.data, false)
		}
	case reply == "NOT_FOUND" || reply == "NF" ||
		reply == "NOT_STORED" && (c.kind == Replace || c.kind == Append || c.kind == Prepend):
		w.absent = true
	case reply == "NOT_STORED" && c.kind == Add, reply == "EXISTS" && c.kind == CAS, reply == "TOUCHED",
		strings.HasPrefix(reply, "CLIENT_ERROR cannot increment"):
		w.present = true // refused, or no new value, but the key is there
	case c.kind == Incr || c.kind == Decr:
		if _, err := strconv.ParseUint(reply, 10, 64); err == nil {
			change(reply, true)
		}
	case c.kind == MetaArith && strings.HasPrefix(reply, "VA "):
		change(data, true)
	}
}
