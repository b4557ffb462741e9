package client

import (
	"fmt"

	"github.com/santa-offload/santa/internal/protocol"
	"github.com/santa-offload/santa/rule"
)

// AddRules installs rules on a service as one all-or-nothing batch and
// returns their ids, in order. On a refusal, the *Error's Index is the
// first offending rule.
func (c *Client) AddRules(service uint32, rs []rule.Rule) ([]uint32, error) {
	return c.addRules(service, 0, rs)
}

// ReplaceRules gives rules new contents, all or nothing; each keeps its id.
func (c *Client) ReplaceRules(service uint32, updates []RuleEntry) error {
	return c.replaceRules(service, 0, updates)
}

// DeleteRules removes rules by id, all or nothing.
func (c *Client) DeleteRules(service uint32, ids []uint32) error {
	return c.deleteRules(service, 0, ids)
}

// The batches, applied at once (txn 0) or held by a transaction.

func (c *Client) addRules(service, txn uint32, rs []rule.Rule) ([]uint32, error) {
	return c.addRulesReq(&protocol.AddRules{ServiceID: service, Txn: txn, Rules: rs})
}

func (c *Client) addRulesReq(req *protocol.AddRules) ([]uint32, error) {
	r, err := call[*protocol.AddRulesReply](c, req, nil)
	if err != nil {
		return nil, fmt.Errorf("add rules to service %d: %w", req.ServiceID, err)
	}
	return r.RuleIDs, nil
}

func (c *Client) replaceRules(service, txn uint32, updates []RuleEntry) error {
	if _, err := call[*protocol.ReplaceRulesReply](c, &protocol.ReplaceRules{ServiceID: service, Txn: txn, Updates: updates}, nil); err != nil {
		return fmt.Errorf("replace rules of service %d: %w", service, err)
	}
	return nil
}

func (c *Client) deleteRules(service, txn uint32, ids []uint32) error {
	if _, err := call[*protocol.DeleteRulesReply](c, &protocol.DeleteRules{ServiceID: service, Txn: txn, RuleIDs: ids}, nil); err != nil {
		return fmt.Errorf("delete rules of service %d: %w", service, err)
	}
	return nil
}
