package protocol

import (
	"errors"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/santa-offload/santa/rule"
)

func TestEncodeRefuses(t *testing.T) {
	badKind := helloRule
	badKind.Processors = []rule.Processor{{Kind: 7}}
	tests := []struct {
		name  string
		body  Body
		code  syscall.Errno
		index uint32
		msg   string // in the error message
	}{
		{"add rules without rules", &AddRules{ServiceID: 1}, syscall.EINVAL, NoIndex, "rules: has 0 items"},
		{"unknown processor kind", &AddRules{Rules: []rule.Rule{helloRule, badKind}}, syscall.EINVAL, 1, "rules[1].processors[0].kind: unknown kind 7"},
		{"pattern over 65535 bytes", &AddRules{Rules: []rule.Rule{{Condition: rule.Condition{Pattern: make([]byte, 1<<16)}}}}, syscall.EINVAL, 0, "rules[0].pattern"},
		{"processors over 255", &AddRules{Rules: []rule.Rule{{Processors: make([]rule.Processor, 256)}}}, syscall.EINVAL, 0, "processors: has 256 items"},
		{"client name over 64 bytes", &Hello{Client: strings.Repeat("a", 65)}, syscall.EINVAL, NoIndex, "client: is 65 bytes"},
		{"client name not UTF-8", &Hello{Client: "\xff"}, syscall.EINVAL, NoIndex, "client: is not UTF-8"},
		{"error message over 1024 bytes", &Error{Message: strings.Repeat("a", 1025)}, syscall.EINVAL, NoIndex, "message"},
		{"interfaces over 65535", &StatusReply{Interfaces: make([]Interface, 1<<16)}, syscall.EINVAL, NoIndex, "interfaces: has 65536 items"},
		{"message over 131072 bytes", &DeleteRules{RuleIDs: make([]uint32, MaxMessage/4)}, syscall.EMSGSIZE, NoIndex, "DELETE_RULES is"},
		{"length condition in version 1", &AddRules{Rules: []rule.Rule{helloRule, helloRangeRule}}, syscall.EINVAL, 1,
			"rules[1].flags: a length condition needs protocol version 2; this connection speaks version 1"},
		{"length condition listed in version 1", &ListRulesReply{Rules: []RuleEntry{{RuleID: 7, Rule: echoOpenRule}}}, syscall.EINVAL, 0,
			"rules[0].rule.flags: a length condition needs protocol version 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := Encode(Version1, 1, tt.body)
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Encode gives %x, %v; want a *Error", msg, err)
			}
			if pe.Code != tt.code || pe.Index != tt.index || !strings.Contains(pe.Message, tt.msg) {
				t.Errorf("Encode gives %+v; want code %v, index %d, a message with %q", *pe, tt.code, tt.index, tt.msg)
			}
		})
	}
}

func TestEncodeUnknownVersion(t *testing.T) {
	for _, v := range []uint16{0, MaxVersion + 1} {
		if _, err := Encode(v, 1, &Status{}); err == nil {
			t.Errorf("Encode in version %d succeeds", v)
		}
	}
}

func TestDecodeErrorDetails(t *testing.T) {
	okRule := cat(u16(0), b16("ab"), u16(4), []byte{1, 0}, []byte{1, 0}, u16(0), b16("xy"))
	badRule := cat(u16(0), b16("ab"), u16(4), []byte{1, 0}, []byte{9, 0}, u16(0), b16("xy"))
	tests := []struct {
		name    string
		msg     []byte
		index   uint32
		message string
	}{
		{"bad rule names its index and field", message(TypeAddRules, u32(1), u32(0), u32(2), okRule, badRule), 1, "rules[1].processors[0].kind: unknown kind 9"},
		{"bad update names its index", message(TypeReplaceRules, u32(1), u32(0), u32(1), u32(5), badRule), 0, "updates[0].rule.processors[0].kind: unknown kind 9"},
		{"short field", message(TypeDetach, []byte{1, 2}), NoIndex, "service_id: the body ends 2 bytes into this 4-byte field"},
		{"count", message(TypeDeleteRules, u32(1), u32(0), u32(3), u32(1)), NoIndex, "rule_ids: count 3 needs at least 12 bytes; the body has 4 left"},
		{"left over", message(TypeAbort, u32(1), u32(2)), NoIndex, "4 bytes left over after the ABORT body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _, err := Decode(tt.msg)
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Decode gives %v; want a *Error", err)
			}
			if pe.Index != tt.index || pe.Message != tt.message {
				t.Errorf("Decode gives index %d, %q; want %d, %q", pe.Index, pe.Message, tt.index, tt.message)
			}
			if h.Seq != 1 {
				t.Errorf("the header of a refused body has seq %d, want 1", h.Seq)
			}
		})
	}
}

func TestDecodeCopiesBytes(t *testing.T) {
	msg := mustEncode(Version1, 1, &AddRules{Rules: []rule.Rule{helloRule}})
	_, body, err := Decode(msg)
	if err != nil {
		t.Fatal(err)
	}
	clear(msg)
	if p := body.(*AddRules).Rules[0].Condition.Pattern; string(p) != "Hello" {
		t.Errorf("pattern is %q after the datagram was overwritten; the body must not alias it", p)
	}
}

func TestType(t *testing.T) {
	tests := []struct {
		t     Type
		known bool
		reply bool
		s     string
	}{
		{TypeHello, true, false, "HELLO"},
		{TypeStatus.Reply(), true, true, "STATUS reply"},
		{TypeError, true, true, "ERROR"},
		{0, false, false, "type 0x0000"},
		{TypeHot.Reply(), true, true, "HOT reply"},
		{TypeMemcachedStats, true, false, "MEMCACHED_STATS"},
		{TypePathStats.Reply(), true, true, "PATH_STATS reply"},
		{21, false, false, "type 0x0015"},
		{ReplyBit, false, true, "type 0x8000"},
		{0x7fff, false, false, "type 0x7fff"},
	}
	for _, tt := range tests {
		if tt.t.Known() != tt.known || tt.t.IsReply() != tt.reply || tt.t.String() != tt.s {
			t.Errorf("%#x: known %v, reply %v, %q; want %v, %v, %q", uint16(tt.t), tt.t.Known(), tt.t.IsReply(), tt.t, tt.known, tt.reply, tt.s)
		}
	}
}

func TestError(t *testing.T) {
	tests := []struct {
		err  *Error
		text string
	}{
		{Errorf(syscall.ENOENT, "no service %d", 3), "no such file or directory: no service 3"},
		{ErrorAt(syscall.EINVAL, 2, "bad"), "invalid argument (item 2): bad"},
		{Errorf(syscall.EPROTO, ""), "protocol error"},
	}
	for _, tt := range tests {
		if tt.err.Error() != tt.text {
			t.Errorf("Error() is %q, want %q", tt.err, tt.text)
		}
	}
	if err := error(Errorf(syscall.ENOENT, "x")); !errors.Is(err, syscall.ENOENT) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("errors.Is does not see the errno of %v", err)
	}
	long := Errorf(syscall.EINVAL, "%s", strings.Repeat("é", MaxErrorMessage))
	if len(long.Message) != MaxErrorMessage || !strings.HasSuffix(long.Message, "é") {
		t.Errorf("a long message is cut to %d bytes ending in %q; want %d bytes of whole characters", len(long.Message), long.Message[len(long.Message)-2:], MaxErrorMessage)
	}
}
