// Package mcproto is the reference of the data plane's memcached stream
// parsers (bpf/include/mc_request.h, mc_reply.h): what memcached 1.6 reads
// in a client's requests (which keys they write, how many replies they get,
// where they end) and where its replies end, parsed a byte at a time with a
// small state that survives any cut of the stream. Written for clarity from
// memcached's doc/protocol.txt and proto_text.c; the data plane's parsers
// must report the same events and reach the same states, byte for byte
// (test/mcparse runs them). docs/memcached.md, "Parsing the streams", is
// the specification.
package mcproto

import (
	"fmt"
	"hash/fnv"
)

// Limits (docs/memcached.md).
const (
	Chunk          = 2048 // bytes one data-plane parse call reads
	MaxLine        = 2048 // bytes of a line, but a get/gets line's
	MaxKey         = 250  // memcached's KEY_MAX_LENGTH
	MaxFlags       = 16   // flags of a meta command
	maxDigits      = 9    // digits of a length, flags, exptime, delay
	maxCASDigits   = 19   // digits of a cas unique
	maxValueDigits = 20   // digits of incr/decr's new value
)

// EventType is what an Event reports.
type EventType uint8

const (
	EvKey   EventType = 1 // a write to the key hashed in Hash: invalidate it now
	EvAll   EventType = 2 // a write to keys not known: invalidate the service
	EvCmd   EventType = 3 // a command fully received, its data too
	EvLost  EventType = 4 // sync lost (Flags: a Lost reason); nothing more is parsed
	EvReply EventType = 5 // a reply fully sent
)

// Command is a request's command.
type Command uint8

const (
	CmdNone Command = iota
	CmdGet
	CmdGets
	CmdGat
	CmdGats
	CmdSet
	CmdAdd
	CmdReplace
	CmdAppend
	CmdPrepend
	CmdCAS
	CmdIncr
	CmdDecr
	CmdDelete
	CmdTouch
	CmdFlushAll
	CmdVersion
	CmdVerbosity
	CmdQuit
	CmdStats
	CmdMg
	CmdMs
	CmdMd
	CmdMa
	CmdMn
	CmdMe
)

var commandNames = map[string]Command{
	"get": CmdGet, "gets": CmdGets, "gat": CmdGat, "gats": CmdGats,
	"set": CmdSet, "add": CmdAdd, "replace": CmdReplace, "append": CmdAppend, "prepend": CmdPrepend, "cas": CmdCAS,
	"incr": CmdIncr, "decr": CmdDecr, "delete": CmdDelete, "touch": CmdTouch, "flush_all": CmdFlushAll,
	"version": CmdVersion, "verbosity": CmdVerbosity, "quit": CmdQuit, "stats": CmdStats,
	"mg": CmdMg, "ms": CmdMs, "md": CmdMd, "ma": CmdMa, "mn": CmdMn, "me": CmdMe,
}

func (c Command) String() string {
	for name, cmd := range commandNames {
		if cmd == c {
			return name
		}
	}
	return fmt.Sprintf("command(%d)", uint8(c))
}

// How many replies a command gets (Event.Reply of EvCmd).
const (
	ReplyNone  = 0 // noreply, quit
	ReplyOne   = 1
	ReplyMaybe = 2 // a meta command with q: none on success, one otherwise
)

// Whose a reply can be (Event.Reply of EvReply).
const (
	FamText  = 1 // STORED, VALUE...END, a number...: a text command's
	FamMeta  = 2 // HD VA EN NS EX NF ME: a meta command's
	FamMn    = 3 // MN: an mn's
	FamError = 4 // ERROR, CLIENT_ERROR, SERVER_ERROR: any command's
)

// Event.Flags of EvReply.
const (
	ReplyStored = 1 // the reply is STORED
)

// Event.Flags of EvCmd.
const (
	CmdWrite = 1 // may change data: its keys were reported (EvKey or EvAll)
	CmdAll   = 2 // its change is not one key's: flush_all, a base64 key, several keys
	CmdTTL   = 4 // may give its keys an expiry: a storage command's nonzero exptime, touch, gat, meta
)

// Why sync was lost (Event.Flags of EvLost).
const (
	LostBinary  = 1 // the binary protocol
	LostCommand = 2 // an unknown command or reply
	LostFormat  = 3 // a known one with arguments memcached may read otherwise
	LostLine    = 4 // a line longer than MaxLine
	LostByte    = 5 // a NUL, a CR not before LF, an empty line
)

// Event is one report of a parser, laid out as the data plane's struct
// mc_event (24 bytes, little-endian).
type Event struct {
	Type  EventType
	Cmd   Command // EvCmd
	Reply uint8   // EvCmd: Reply*; EvReply: Fam*
	Flags uint8   // EvCmd: Cmd*; EvReply: Reply*; EvLost: Lost*
	Off   uint32  // bytes of the segment consumed when it happened
	Hash  uint32  // EvKey, EvCmd of a one-key write: FNV-1a of the key
	Seq   uint32  // EvCmd: the reply count at which it is done; EvReply: replies seen
	Arg   int32   // EvAll, EvCmd of flush_all: its delay
	_     uint32
}

func (e Event) String() string {
	switch e.Type {
	case EvKey:
		return fmt.Sprintf("key %#x @%d", e.Hash, e.Off)
	case EvAll:
		return fmt.Sprintf("all delay %d @%d", e.Arg, e.Off)
	case EvCmd:
		return fmt.Sprintf("cmd %v reply %d flags %d hash %#x seq %d arg %d @%d",
			e.Cmd, e.Reply, e.Flags, e.Hash, e.Seq, e.Arg, e.Off)
	case EvLost:
		return fmt.Sprintf("lost %d @%d", e.Flags, e.Off)
	case EvReply:
		return fmt.Sprintf("reply family %d flags %d seq %d @%d", e.Reply, e.Flags, e.Seq, e.Off)
	}
	return fmt.Sprintf("event(%d)", e.Type)
}

// KeyHash is the hash the parsers report a key by: FNV-1a, 32 bits.
func KeyHash(key []byte) uint32 {
	h := fnv.New32a()
	h.Write(key)
	return h.Sum32()
}
