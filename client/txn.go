package client

import (
	"fmt"

	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/rule"
)

// Txn is a transaction on one service: batches are checked when sent but
// applied only by Commit, all together or not at all. It is for changes too
// large for one message. Closing the client aborts it.
type Txn struct {
	c       *Client
	service uint32
	id      uint32
}

// Begin opens a transaction on a service.
func (c *Client) Begin(service uint32) (*Txn, error) {
	r, err := call[*protocol.BeginReply](c, &protocol.Begin{ServiceID: service}, nil)
	if err != nil {
		return nil, fmt.Errorf("begin on service %d: %w", service, err)
	}
	return &Txn{c: c, service: service, id: r.Txn}, nil
}

// ID is the daemon's id of the transaction.
func (t *Txn) ID() uint32 { return t.id }

// AddRules adds rules to the transaction and returns the ids they will
// have once Commit lands them.
func (t *Txn) AddRules(rs []rule.Rule) ([]uint32, error) {
	return t.c.addRules(t.service, t.id, rs)
}

// AddGuardedRules is AddRules of rules with guards. Their deadlines count
// from Commit.
func (t *Txn) AddGuardedRules(rs []GuardedRule) ([]uint32, error) {
	return t.c.addGuardedRules(t.service, t.id, rs)
}

// ReplaceRules adds replacements to the transaction.
func (t *Txn) ReplaceRules(updates []RuleEntry) error {
	return t.c.replaceRules(t.service, t.id, updates)
}

// DeleteRules adds deletions to the transaction.
func (t *Txn) DeleteRules(ids []uint32) error {
	return t.c.deleteRules(t.service, t.id, ids)
}

// Commit applies the transaction, all of it or nothing, and returns how
// many rules it added (their ids came from AddRules).
func (t *Txn) Commit() (added int, err error) {
	r, err := call[*protocol.CommitReply](t.c, &protocol.Commit{Txn: t.id}, nil)
	if err != nil {
		return 0, fmt.Errorf("commit transaction %d: %w", t.id, err)
	}
	return int(r.Added), nil
}

// Abort drops the transaction.
func (t *Txn) Abort() error {
	if _, err := call[*protocol.AbortReply](t.c, &protocol.Abort{Txn: t.id}, nil); err != nil {
		return fmt.Errorf("abort transaction %d: %w", t.id, err)
	}
	return nil
}
