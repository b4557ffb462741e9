// Package batch cuts the agents' rule changes into batches that fit one
// message of santad's protocol.
package batch

import (
	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/rule"
)

// room is what a batch request (ADD_RULES, REPLACE_RULES, DELETE_RULES)
// leaves for its items: a message is at most protocol.MaxMessage bytes;
// the header, service_id, txn and count take the rest.
const room = protocol.MaxMessage - protocol.HeaderLen - 3*4

// ReplaceSize is what a replacement takes in a batch; AddSize a rule to
// add, with its guard (nil: none), which has no id. Both come from the
// protocol's own encoding.
func ReplaceSize(e client.RuleEntry) int { return protocol.RuleEntrySize(protocol.Version2, &e) }
func AddSize(r rule.Rule, g *client.Guard) int {
	return ReplaceSize(client.RuleEntry{Rule: r, Guard: g}) - 4
}

// Fitting is how many of the first items fit one batch: at least one.
func Fitting[T any](items []T, size func(T) int) int {
	used := 0
	for i, item := range items {
		used += size(item)
		if used > room && i > 0 {
			return i
		}
	}
	return len(items)
}
