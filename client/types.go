package client

import "github.com/santa-offload/santa/internal/protocol"

// The protocol's types, named here because applications outside this module
// cannot import the internal package.
type (
	// Error is santad's refusal of a request: an errno, the offending item
	// of a batch (or protocol.NoIndex) and a message.
	Error = protocol.Error
	// Session is who the daemon thinks the client is (the HELLO reply).
	Session = protocol.HelloReply
	// ServiceInfo is an attached socket.
	ServiceInfo = protocol.ServiceInfo
	// RuleEntry is a rule with its id, and its guard if it has one
	// (memcached.go).
	RuleEntry = protocol.RuleEntry
	// RuleCounters are a rule's hits and bytes.
	RuleCounters = protocol.RuleCounters
	// ServiceStats are a service's counters.
	ServiceStats = protocol.ServiceStatsReply
	// Status is the daemon's state.
	Status = protocol.StatusReply
	// Interface is a network interface the daemon serves.
	Interface = protocol.Interface
)

// NoIndex is the Index of an Error that is not about one item of a batch.
const NoIndex = protocol.NoIndex
