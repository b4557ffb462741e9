// Package batch cuts the agents' rule changes into batches that fit one
// message of santad's protocol.
package batch

import (
	"errors"
	"slices"
	"syscall"

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
		n := size(item)
		if !Fits(used, n, i) {
			return i
		}
		used += n
	}
	return len(items)
}

// Fits is whether an item of size bytes fits a batch of n items that take
// used bytes: the first always does.
func Fits(used, size, n int) bool { return n == 0 || used+size <= room }

// Delete deletes rules ids with del, in batches that fit one message each.
// An id santad refuses as missing (ENOENT at its index: the rule went
// with its socket, or was never there) is left out, passed to missing if
// that is not nil, and the others are deleted all the same: a refused
// batch would leave rules answering with nobody keeping them fresh.
func Delete(ids []uint32, del func([]uint32) error, missing func(id uint32)) error {
	for len(ids) > 0 {
		n := Fitting(ids, func(uint32) int { return 4 })
		err := del(ids[:n])
		var refusal *client.Error
		if errors.As(err, &refusal) && refusal.Code == syscall.ENOENT && int(refusal.Index) < n {
			if missing != nil {
				missing(ids[refusal.Index])
			}
			ids = slices.Delete(slices.Clone(ids), int(refusal.Index), int(refusal.Index)+1)
			continue
		}
		if err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}
