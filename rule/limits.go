package rule

// Limits of the data plane, santa_abi.h's enum santa_limit. The kernel's
// loops and record sizes are bounded by them, so a rule must respect them.
// Written again here, not generated, so that this package builds without
// the BPF objects; internal/datapath's TestABIConstants checks every one.
const (
	MaxRegions    = 8     // SANTA_MAX_REGIONS: distinct condition offsets per service
	MaxCondLen    = 256   // SANTA_MAX_COND_LEN
	MaxCondEnd    = 1024  // SANTA_MAX_COND_END: conditions and copy sources end here
	MaxProcessors = 8     // SANTA_MAX_PROCESSORS
	MaxCopies     = 8     // SANTA_MAX_COPIES: copy pieces after resolving order
	MaxCopyLen    = 256   // SANTA_MAX_COPY_LEN: bytes one copy processor moves
	MaxUDPReply   = 1472  // SANTA_MAX_UDP_REPLY
	MaxTCPReply   = 65535 // SANTA_MAX_TCP_REPLY: the stack segments it
	MaxUDPRequest = 1472  // SANTA_MAX_UDP_REQUEST: longer requests always pass
	MaxTCPRequest = 1472  // SANTA_MAX_TCP_REQUEST: longer segments always pass
)

// Limits bounds what a rule may ask for. Callers may be stricter than the
// data plane; they can never be looser.
type Limits struct {
	MaxCondLen    int // bytes in a condition pattern
	MaxCondEnd    int // condition offset + pattern length, and copy source ends
	MaxProcessors int // processors per rule
	MaxCopyLen    int // bytes one copy processor moves
	MaxReplyLen   int // reply payload bytes
	MaxRegions    int // distinct condition offsets per service
	MaxRequestLen int // request payload bytes the data plane answers: a length condition's min
	// EndsRequest: the condition must end the request, so a length range
	// must allow the condition's end (TCP: a segment is answered only if
	// it ends where the condition ends, docs/tcp.md).
	EndsRequest bool
}

// DefaultUDPLimits are the data plane's own limits for UDP services.
var DefaultUDPLimits = Limits{
	MaxCondLen:    MaxCondLen,
	MaxCondEnd:    MaxCondEnd,
	MaxProcessors: MaxProcessors,
	MaxCopyLen:    MaxCopyLen,
	MaxReplyLen:   MaxUDPReply,
	MaxRegions:    MaxRegions,
	MaxRequestLen: MaxUDPRequest,
}

// DefaultTCPLimits are the data plane's own limits for TCP services: the
// same as UDP's but for the reply, which TCP segments, and a condition
// must end the request.
var DefaultTCPLimits = func() Limits {
	l := storable
	l.EndsRequest = true
	return l
}()

// storable are the widest limits of the data plane, which size the records
// it stores a rule in: those Compile checks.
var storable = func() Limits {
	l := DefaultUDPLimits
	l.MaxReplyLen = MaxTCPReply
	l.MaxRequestLen = MaxTCPRequest
	return l
}()

// LimitsFor are the data plane's limits for services of a protocol
// (unix.IPPROTO_UDP or IPPROTO_TCP).
func LimitsFor(protocol int) Limits {
	if protocol == protoTCP {
		return DefaultTCPLimits
	}
	return DefaultUDPLimits
}

const protoTCP = 6 // IPPROTO_TCP
