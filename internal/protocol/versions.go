package protocol

import "syscall"

// since is the version that introduced a request type; types not listed
// are version 1's. Version 2 adds LEARN, HOT, PARSER, GENERATION and
// MEMCACHED_STATS (and, in bodies every version has, a rule's length
// condition and guard and a service's manager).
var since = map[Type]uint16{
	TypeLearn:          Version2,
	TypeHot:            Version2,
	TypeParser:         Version2,
	TypeGeneration:     Version2,
	TypeMemcachedStats: Version2,
	TypePathStats:      Version2,
}

// Since is the protocol version that introduced the request type t is or
// answers.
func (t Type) Since() uint16 {
	if v, ok := since[t.Request()]; ok && t != TypeError {
		return v
	}
	return Version1
}

// checkVersion refuses a message type the version does not have.
func checkVersion(t Type, version uint16) *Error {
	if v := t.Since(); v > version {
		return Errorf(syscall.EPROTO, "%v is a message of protocol version %d; this message is in version %d", t, v, version)
	}
	return nil
}
