package protocol

import "syscall"

// Body is the body of one message. Its type says which message it is and
// whether it is a reply; the bodies are the types of this package.
type Body interface {
	Type() Type
	// fields visits the body's fields in wire order.
	fields(c codec)
}

// Encode makes the datagram of message body in protocol version v with
// sequence number seq. It refuses a body the decoder would refuse, with the
// same *Error, and one version v cannot carry (a length condition in
// version 1).
func Encode(v uint16, seq uint32, body Body) ([]byte, error) {
	return AppendEncode(nil, v, seq, body)
}

// AppendEncode is Encode into buf's room, from buf[:0] on: a connection
// that sends one message at a time can encode each into the last one's
// buffer, where a buffer of its own grew by doubling to each message's
// size (128 KiB for a page of rule counters, of which an agent reads a
// dozen every few seconds: page faults and garbage on the server's core).
func AppendEncode(buf []byte, v uint16, seq uint32, body Body) ([]byte, error) {
	if !Speaks(v) {
		return nil, Errorf(syscall.EINVAL, "version %d; this side speaks versions %d to %d", v, MinVersion, MaxVersion)
	}
	if err := checkVersion(body.Type(), v); err != nil {
		return nil, err
	}
	e := encoder{cursor: cursor{v: v, index: NoIndex}, b: append(buf[:0], make([]byte, HeaderLen)...)}
	body.fields(&e)
	if e.err != nil {
		return nil, e.err
	}
	if len(e.b) > MaxMessage {
		return nil, Errorf(syscall.EMSGSIZE, "%v is %d bytes; the limit is %d", body.Type(), len(e.b), MaxMessage)
	}
	appendHeader(e.b[:0], Header{Version: v, Type: body.Type(), Length: uint32(len(e.b)), Seq: seq}) // into the room left for it
	return e.b, nil
}

// Decode reads the datagram msg, whose body is in the version its header
// names. Every error is a *Error with the code of docs/protocol.md. When
// only the body is refused, the header is returned too, so that a server
// can answer with the request's seq.
func Decode(msg []byte) (Header, Body, error) {
	h, err := decodeHeader(msg)
	if err != nil {
		return h, nil, err
	}
	if err := checkVersion(h.Type, h.Version); err != nil {
		return h, nil, err
	}
	body := newBody(h.Type)
	d := decoder{cursor: cursor{v: h.Version, index: NoIndex}, b: msg[HeaderLen:]}
	body.fields(&d)
	switch {
	case d.err != nil:
		return h, nil, d.err
	case len(d.b) > 0:
		return h, nil, Errorf(syscall.EBADMSG, "%d bytes left over after the %v body", len(d.b), h.Type)
	}
	return h, body, nil
}

// newBody is an empty body of known type t.
func newBody(t Type) Body {
	switch t {
	case TypeHello:
		return &Hello{}
	case TypeHello | ReplyBit:
		return &HelloReply{}
	case TypeAttach:
		return &Attach{}
	case TypeAttach | ReplyBit:
		return &ServiceInfo{}
	case TypeDetach:
		return &Detach{}
	case TypeDetach | ReplyBit:
		return &DetachReply{}
	case TypeAddRules:
		return &AddRules{}
	case TypeAddRules | ReplyBit:
		return &AddRulesReply{}
	case TypeReplaceRules:
		return &ReplaceRules{}
	case TypeReplaceRules | ReplyBit:
		return &ReplaceRulesReply{}
	case TypeDeleteRules:
		return &DeleteRules{}
	case TypeDeleteRules | ReplyBit:
		return &DeleteRulesReply{}
	case TypeBegin:
		return &Begin{}
	case TypeBegin | ReplyBit:
		return &BeginReply{}
	case TypeCommit:
		return &Commit{}
	case TypeCommit | ReplyBit:
		return &CommitReply{}
	case TypeAbort:
		return &Abort{}
	case TypeAbort | ReplyBit:
		return &AbortReply{}
	case TypeListServices:
		return &ListServices{}
	case TypeListServices | ReplyBit:
		return &ListServicesReply{}
	case TypeListRules:
		return &ListRules{}
	case TypeListRules | ReplyBit:
		return &ListRulesReply{}
	case TypeRuleStats:
		return &RuleStats{}
	case TypeRuleStats | ReplyBit:
		return &RuleStatsReply{}
	case TypeServiceStats:
		return &ServiceStats{}
	case TypeServiceStats | ReplyBit:
		return &ServiceStatsReply{}
	case TypeStatus:
		return &Status{}
	case TypeStatus | ReplyBit:
		return &StatusReply{}
	case TypeLearn:
		return &Learn{}
	case TypeLearn | ReplyBit:
		return &LearnReply{}
	case TypeHot:
		return &Hot{}
	case TypeHot | ReplyBit:
		return &HotReply{}
	case TypeParser:
		return &Parser{}
	case TypeParser | ReplyBit:
		return &ParserReply{}
	case TypeGeneration:
		return &Generation{}
	case TypeGeneration | ReplyBit:
		return &GenerationReply{}
	case TypeMemcachedStats:
		return &MemcachedStats{}
	case TypeMemcachedStats | ReplyBit:
		return &MemcachedStatsReply{}
	case TypePathStats:
		return &PathStats{}
	case TypePathStats | ReplyBit:
		return &PathStatsReply{}
	case TypeError:
		return &Error{}
	}
	panic("protocol: no body for " + t.String())
}
