package client

import (
	"fmt"

	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/internal/rules"
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

// AddRules adds rules to the transaction; Commit gives their ids.
func (t *Txn) AddRules(rs []rules.Rule) error {
	_, err := t.c.addRules(t.service, t.id, rs)
	return err
}

// ReplaceRules adds replacements to the transaction.
func (t *Txn) ReplaceRules(updates []RuleEntry) error {
	return t.c.replaceRules(t.service, t.id, updates)
}

// DeleteRules adds deletions to the transaction.
func (t *Txn) DeleteRules(ids []uint32) error {
	return t.c.deleteRules(t.service, t.id, ids)
}

// Commit applies the transaction and returns the ids of the rules it
// added, in the order they were added.
func (t *Txn) Commit() ([]uint32, error) {
	r, err := call[*protocol.CommitReply](t.c, &protocol.Commit{Txn: t.id}, nil)
	if err != nil {
		return nil, fmt.Errorf("commit transaction %d: %w", t.id, err)
	}
	return r.RuleIDs, nil
}

// Abort drops the transaction.
func (t *Txn) Abort() error {
	if _, err := call[*protocol.AbortReply](t.c, &protocol.Abort{Txn: t.id}, nil); err != nil {
		return fmt.Errorf("abort transaction %d: %w", t.id, err)
	}
	return nil
}
