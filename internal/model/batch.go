package model

import "github.com/santa-offload/santa/rule"

// Batch is one all-or-nothing change of a service's rules.
type Batch struct {
	Add []rule.Rule
	// AddIDs, if set, are the ids the added rules get: reserved by
	// ReserveRuleIDs, or free (restoring a saved rule set). Otherwise ids
	// are assigned.
	AddIDs  []RuleID
	Replace []RuleUpdate
	Delete  []RuleID
}

// RuleUpdate replaces the rule with ID by Rule.
type RuleUpdate struct {
	ID   RuleID
	Rule rule.Rule
}
