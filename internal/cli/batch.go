package cli

import (
	"iter"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/rule"
)

// batchRoom is what a batch request (ADD_RULES, DELETE_RULES) leaves for
// its items: a message is at most protocol.MaxMessage bytes, and the
// header, service_id, txn and count take the rest.
const batchRoom = protocol.MaxMessage - protocol.HeaderLen - 3*4

// ruleSize is the size of a rule on the wire in the newest version, which
// takes no less than an older one (docs/protocol.md, "rule").
func ruleSize(r rule.Rule) int { return protocol.RuleSize(protocol.MaxVersion, &r) }

// idSize is the size of a rule id on the wire.
func idSize(uint32) int { return 4 }

// batches yields runs of items that each fit one message, with the index
// of each run's first item. An item too big for any message (none of a
// valid rule's size is) goes alone, for the daemon to refuse.
func batches[T any](items []T, size func(T) int) iter.Seq2[int, []T] {
	return func(yield func(int, []T) bool) {
		start, used := 0, 0
		for i, item := range items {
			n := size(item)
			if i > start && used+n > batchRoom {
				if !yield(start, items[start:i]) {
					return
				}
				start, used = i, 0
			}
			used += n
		}
		if start < len(items) {
			yield(start, items[start:])
		}
	}
}

// inTxn applies items to a service in one transaction, batch by batch:
// all or nothing, however many there are. send adds a batch to the
// transaction. A refusal names its item with name, given the item's index
// in items; COMMIT's index is taken to count the items the same way, as
// the transaction holds them in that order. It returns the rule ids send
// was given for the batches (those of added rules), once COMMIT lands them.
// p shows how many were sent, then the commit, which applies them all.
func inTxn[T any](c *client.Client, service uint32, items []T, size func(T) int,
	send func(*client.Txn, []T) ([]uint32, error), name func(index int) string, p *progress) ([]uint32, error) {
	txn, err := c.Begin(service)
	if err != nil {
		return nil, err
	}
	var ids []uint32
	for start, batch := range batches(items, size) {
		got, err := send(txn, batch)
		if err != nil {
			// The daemon keeps a refused transaction open; closing the
			// connection would abort it too, but not before run ends.
			txn.Abort()
			return nil, refused(err, func(i int) string { return name(start + i) })
		}
		ids = append(ids, got...)
		p.show(false, "sent %d of %d", start+len(batch), len(items))
	}
	p.show(true, "sent %d, committing: santad applies them all", len(items))
	if _, err := txn.Commit(); err != nil {
		return nil, refused(err, name)
	}
	return ids, nil
}
