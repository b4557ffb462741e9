package mcagent

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/santa-offload/santa/internal/model"
	"github.com/santa-offload/santa/rule"
)

// memcached's UDP frame header is 8 bytes: the request id (2, the client's
// choice), the datagram's sequence number (2), the datagram count (2) and
// 2 reserved bytes. The agent learns requests by their bytes from 2 on
// (keyOffset): the frame without the request id, then the command.
const (
	keyOffset = 2
	frameLen  = 8
)

// oneDatagram is a frame's bytes 2 to 8 for datagram 0 of 1, reserved 0:
// the only requests offloaded, and the only replies a rule can give.
var oneDatagram = []byte{0, 0, 0, 1, 0, 0}

// maxKey is the longest memcached key a rule's condition holds: the
// condition is oneDatagram, "get ", the key and CRLF, at most
// rule.MaxCondLen bytes.
const maxKey = rule.MaxCondLen - 6 - len("get \r\n")

// maxReply is the longest UDP reply memcached sends in one datagram
// (UDP_MAX_PAYLOAD_SIZE in memcached.h, its frame header included): a
// longer value is split over several, which no rule can give.
const maxReply = 1400

// Reasons a hot request is not offloaded (the metric's label).
const (
	skipForm      = "form"         // not a single-key get in one datagram
	skipLongKey   = "long_key"     // a key over maxKey bytes
	skipInFlight  = "in_flight"    // a write of the key or the domain in flight (GENERATION)
	skipDead      = "dead"         // the domain's life ended (GENERATION's epoch 0)
	skipMiss      = "miss"         // memcached does not have the key
	skipExpiring  = "expiring"     // the item expires too soon to be worth a rule
	skipTooLarge  = "too_large"    // the reply takes more than one datagram
	skipChanged   = "changed"      // the UDP reply and the TCP read disagree: a write came between
	skipMalformed = "malformed"    // a reply the agent cannot read
	skipTimeout   = "timeout"      // memcached did not answer in time
	skipRefused   = "refused"      // santad refused the rule
	skipSlow      = "slow_install" // santad took longer than expiry_margin to apply it
)

// skip is why a key is not offloaded now.
type skip struct {
	reason string
	detail string
}

func (s *skip) Error() string { return s.reason + ": " + s.detail }

func skipf(reason, format string, args ...any) *skip {
	return &skip{reason: reason, detail: fmt.Sprintf(format, args...)}
}

// getKey is the memcached key of a hot request (its bytes from keyOffset
// on) if it is offloadable: one datagram holding exactly "get <key>\r\n".
// Anything else (several keys, gets, meta commands, several datagrams,
// other spacing) passes to memcached.
func getKey(hot []byte) ([]byte, error) {
	rest, ok := bytes.CutPrefix(hot, oneDatagram)
	if !ok {
		return nil, skipf(skipForm, "frame % x is not datagram 0 of 1", hot[:min(len(hot), len(oneDatagram))])
	}
	cmd, ok := bytes.CutPrefix(rest, []byte("get "))
	if !ok {
		return nil, skipf(skipForm, "%q is not a get", firstWord(rest))
	}
	key, ok := bytes.CutSuffix(cmd, []byte("\r\n"))
	if !ok || bytes.IndexByte(key, '\n') >= 0 {
		return nil, skipf(skipForm, "not one line ending in CRLF")
	}
	if bytes.IndexByte(key, ' ') >= 0 {
		return nil, skipf(skipForm, "a get of several keys")
	}
	if err := model.CheckMemcachedKey(key); err != nil {
		return nil, skipf(skipForm, "%v", err)
	}
	if len(key) > maxKey {
		return nil, skipf(skipLongKey, "a %d-byte key; a rule holds at most %d", len(key), maxKey)
	}
	return key, nil
}

func firstWord(b []byte) string {
	w, _, _ := bytes.Cut(b, []byte(" "))
	return string(w[:min(len(w), 16)])
}

// hotForm is the hot request of key: the bytes a rule's condition holds.
func hotForm(key []byte) []byte {
	return append(append(append(bytes.Clone(oneDatagram), "get "...), key...), "\r\n"...)
}

// udpGet is the UDP request for key, request id 0 (the probe sets it).
func udpGet(key []byte) []byte { return append([]byte{0, 0}, hotForm(key)...) }

// item is a value as memcached holds it.
type item struct {
	flags string // client flags, in decimal
	data  []byte
	ttl   int // seconds left; -1: none
}

// checkUDPReply reads memcached's UDP reply to a get of key: one datagram,
// a hit with its value. It returns the value; a miss is skipMiss.
func checkUDPReply(key, reply []byte) (item, error) {
	if len(reply) < frameLen {
		return item{}, skipf(skipMalformed, "a %d-byte UDP reply", len(reply))
	}
	if !bytes.Equal(reply[2:frameLen], oneDatagram) {
		if reply[4] != 0 || reply[5] != 1 {
			return item{}, skipf(skipTooLarge, "the reply takes %d datagrams", int(reply[4])<<8|int(reply[5]))
		}
		return item{}, skipf(skipMalformed, "frame header % x", reply[:frameLen])
	}
	body := reply[frameLen:]
	if string(body) == "END\r\n" {
		return item{}, skipf(skipMiss, "memcached has no such key")
	}
	line, rest, ok := bytes.Cut(body, []byte("\r\n"))
	f := strings.Split(string(line), " ")
	if !ok || len(f) != 4 || f[0] != "VALUE" || f[1] != string(key) {
		return item{}, skipf(skipMalformed, "reply line %q", line[:min(len(line), 64)])
	}
	n, err := strconv.Atoi(f[3])
	if err != nil || n < 0 || len(rest) != n+len("\r\nEND\r\n") || string(rest[n:]) != "\r\nEND\r\n" {
		return item{}, skipf(skipMalformed, "a VALUE of %q bytes in %d", f[3], len(rest))
	}
	return item{flags: f[2], data: rest[:n]}, nil
}

// udpReply is memcached's UDP reply to a get of key holding it, request
// id 0, as checkUDPReply reads it (memcached's text protocol: one line
// VALUE <key> <flags> <bytes>, the data, END). The agent checks it against
// the reply memcached sent when it learns a key, and builds the key's
// later replies from the TCP read alone if it matched.
func udpReply(key []byte, it item) []byte {
	r := append([]byte{0, 0}, oneDatagram...)
	r = fmt.Appendf(r, "VALUE %s %s %d\r\n", key, it.flags, len(it.data))
	return append(append(r, it.data...), "\r\nEND\r\n"...)
}

// mgRequest reads key's client flags, time to live and value: a read (no
// flag that modifies, docs/memcached.md), so it invalidates nothing.
func mgRequest(key []byte) string { return "mg " + string(key) + " f t v\r\n" }

// readMG reads memcached's reply to mgRequest: the item, or skipMiss.
func readMG(r *bufio.Reader) (item, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return item{}, err
	}
	line, ok := strings.CutSuffix(line, "\r\n")
	switch {
	case !ok:
		return item{}, fmt.Errorf("mg reply %q does not end in CRLF", line)
	case line == "EN":
		return item{}, skipf(skipMiss, "memcached has no such key")
	}
	f := strings.Split(line, " ")
	if len(f) != 4 || f[0] != "VA" {
		return item{}, fmt.Errorf("mg reply %q", line)
	}
	n, err := strconv.Atoi(f[1])
	if err != nil || n < 0 {
		return item{}, fmt.Errorf("mg reply %q: size", line)
	}
	it := item{ttl: -2}
	for _, flag := range f[2:] {
		switch {
		case strings.HasPrefix(flag, "f"):
			it.flags = flag[1:]
		case strings.HasPrefix(flag, "t"):
			if it.ttl, err = strconv.Atoi(flag[1:]); err != nil || it.ttl < -1 {
				return item{}, fmt.Errorf("mg reply %q: ttl", line)
			}
		}
	}
	if it.flags == "" || it.ttl == -2 {
		return item{}, fmt.Errorf("mg reply %q lacks f or t", line)
	}
	data := make([]byte, n+2)
	if _, err := io.ReadFull(r, data); err != nil {
		return item{}, err
	}
	if string(data[n:]) != "\r\n" {
		return item{}, fmt.Errorf("mg value of %d bytes does not end in CRLF", n)
	}
	it.data = data[:n]
	return it, nil
}

// getRule is the rule answering a UDP get of its form (hotForm) with
// reply, memcached's reply to it: the request id copied from the request,
// the rest memcached's bytes.
func getRule(form, reply []byte) rule.Rule {
	return rule.Rule{
		Condition:  rule.ExactLength(rule.Condition{Offset: keyOffset, Pattern: form}, uint16(keyOffset+len(form))),
		Processors: []rule.Processor{rule.Copy(0, 2, 0), rule.Put(2, reply[2:])},
		ReplyLen:   uint16(len(reply)),
	}
}

// evictionStats are the stats counting items memcached dropped for room:
// an item so dropped had no write, so no rule of it died.
var evictionStats = []string{"evictions", "slab_reassign_evictions_nomem"}

// readEvictions reads a stats reply to its END and sums evictionStats; a
// reply without them is an error.
func readEvictions(r *bufio.Reader) (uint64, error) {
	var sum uint64
	found := 0
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return 0, err
		}
		line, ok := strings.CutSuffix(line, "\r\n")
		if !ok {
			return 0, fmt.Errorf("stats line %q does not end in CRLF", line)
		}
		if line == "END" {
			if found != len(evictionStats) {
				return 0, fmt.Errorf("stats without %v", evictionStats)
			}
			return sum, nil
		}
		name, value, ok := strings.Cut(strings.TrimPrefix(line, "STAT "), " ")
		if !ok || !strings.HasPrefix(line, "STAT ") {
			return 0, fmt.Errorf("stats line %q", line)
		}
		if slices.Contains(evictionStats, name) {
			n, err := strconv.ParseUint(value, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("stats %s: %w", name, err)
			}
			sum += n
			found++
		}
	}
}
