package protocol

import "fmt"

// Type is a message type as the header carries it: a request type, or a
// request type with ReplyBit set for its reply, or TypeError.
type Type uint16

// Request types.
const (
	TypeHello          Type = 1
	TypeAttach         Type = 2
	TypeDetach         Type = 3
	TypeAddRules       Type = 4
	TypeReplaceRules   Type = 5
	TypeDeleteRules    Type = 6
	TypeBegin          Type = 7
	TypeCommit         Type = 8
	TypeAbort          Type = 9
	TypeListServices   Type = 10
	TypeListRules      Type = 11
	TypeRuleStats      Type = 12
	TypeServiceStats   Type = 13
	TypeStatus         Type = 14
	TypeLearn          Type = 15 // version 2
	TypeHot            Type = 16 // version 2
	TypeParser         Type = 17 // version 2
	TypeGeneration     Type = 18 // version 2
	TypeMemcachedStats Type = 19 // version 2
	TypePathStats      Type = 20 // version 2

	// TypeError is the reply to any failed request.
	TypeError Type = 0xffff

	// ReplyBit marks the reply to a request type.
	ReplyBit Type = 0x8000
)

// typeNames are the names of docs/protocol.md, indexed by request type.
var typeNames = [...]string{
	TypeHello:          "HELLO",
	TypeAttach:         "ATTACH",
	TypeDetach:         "DETACH",
	TypeAddRules:       "ADD_RULES",
	TypeReplaceRules:   "REPLACE_RULES",
	TypeDeleteRules:    "DELETE_RULES",
	TypeBegin:          "BEGIN",
	TypeCommit:         "COMMIT",
	TypeAbort:          "ABORT",
	TypeListServices:   "LIST_SERVICES",
	TypeListRules:      "LIST_RULES",
	TypeRuleStats:      "RULE_STATS",
	TypeServiceStats:   "SERVICE_STATS",
	TypeStatus:         "STATUS",
	TypeLearn:          "LEARN",
	TypeHot:            "HOT",
	TypeParser:         "PARSER",
	TypeGeneration:     "GENERATION",
	TypeMemcachedStats: "MEMCACHED_STATS",
	TypePathStats:      "PATH_STATS",
}

// IsReply reports whether t is a reply (ERROR included).
func (t Type) IsReply() bool { return t&ReplyBit != 0 }

// Reply is the type of the reply to request type t.
func (t Type) Reply() Type { return t | ReplyBit }

// Request is the request type t answers (t itself for a request).
func (t Type) Request() Type { return t &^ ReplyBit }

// Known reports whether t is a type of any version of the protocol (Since
// says which).
func (t Type) Known() bool {
	r := t.Request()
	return t == TypeError || (r != 0 && int(r) < len(typeNames))
}

// Name is the name of the request type t is or answers, as the document
// writes it ("HELLO", "ERROR"); empty for an unknown type.
func (t Type) Name() string {
	switch {
	case t == TypeError:
		return "ERROR"
	case t.Known():
		return typeNames[t.Request()]
	}
	return ""
}

func (t Type) String() string {
	switch {
	case !t.Known():
		return fmt.Sprintf("type %#04x", uint16(t))
	case t.IsReply() && t != TypeError:
		return t.Name() + " reply"
	}
	return t.Name()
}
