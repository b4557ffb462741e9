package agent

import (
	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/rule"
)

// batchRoom is what a batch request (ADD_RULES, REPLACE_RULES,
// DELETE_RULES) leaves for its items: a message is at most
// protocol.MaxMessage bytes; the header, service_id, txn and count take
// the rest.
const batchRoom = protocol.MaxMessage - protocol.HeaderLen - 3*4

// replaceSize is what a replacement takes in a batch; addSize a rule to
// add, which has no id. Both come from the protocol's own encoding.
func replaceSize(e client.RuleEntry) int { return protocol.RuleEntrySize(protocol.Version2, &e) }
func addSize(r rule.Rule) int            { return replaceSize(client.RuleEntry{Rule: r}) - 4 }

// fitting is how many of the first items fit one batch: at least one.
func fitting[T any](items []T, size func(T) int) int {
	used := 0
	for i, item := range items {
		used += size(item)
		if used > batchRoom && i > 0 {
			return i
		}
	}
	return len(items)
}
