package protocol

import "syscall"

// Protocol versions. The header's version field is always Version (1): it
// names the framing. HELLO agrees on the version of the messages, from
// Version to LatestVersion: version 2 adds LEARN and HOT, and a service's
// manager.
const LatestVersion = 2

// since is the version that introduced a request type; types not listed
// are version 1's.
var since = map[Type]uint16{
	TypeLearn: 2,
	TypeHot:   2,
}

// Since is the protocol version that introduced the request type t is or
// answers.
func (t Type) Since() uint16 {
	if v, ok := since[t.Request()]; ok && t != TypeError {
		return v
	}
	return Version
}

// checkVersion refuses a message type the version does not have.
func checkVersion(t Type, version uint16) *Error {
	if v := t.Since(); v > version {
		return Errorf(syscall.EPROTO, "%v is a message of protocol version %d; this connection agreed on version %d in HELLO", t, v, version)
	}
	return nil
}
