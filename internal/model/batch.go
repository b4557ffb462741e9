package model

import "github.com/santa-offload/santa/rule"

// Batch is one all-or-nothing change of a service's rules.
//
// The data plane stores rules compiled, and compiling a million takes a
// while: whoever validates a batch's rules compiles them, once, with
// rule.CompileAll against the service's limits, and passes the compiled
// forms on in AddCompiled and ReplaceCompiled, one for each rule of Add
// and Replace, in the same order. The data plane compiles nothing and
// refuses a batch without them; the journal keeps only the rules.
type Batch struct {
	Add         []rule.Rule
	AddCompiled []rule.Compiled
	// AddIDs, if set, are the ids the added rules get: reserved by
	// ReserveRuleIDs, or free (restoring a saved rule set). Otherwise ids
	// are assigned.
	AddIDs          []RuleID
	Replace         []RuleUpdate
	ReplaceCompiled []rule.Compiled
	Delete          []RuleID
	// AddGuards and ReplaceGuards, if set, hold one guard (or nil) for
	// each rule of Add and Replace, in order: a guarded rule of a
	// memcached service answers only while what it answers is current
	// (Guard). The journal does not keep them: a guard is of a data
	// plane's generations, which a restart does not keep.
	AddGuards     []*Guard
	ReplaceGuards []*Guard
}

// RuleUpdate replaces the rule with ID by Rule.
type RuleUpdate struct {
	ID   RuleID
	Rule rule.Rule
}

// Compile fills b's compiled forms from its rules with rule.CompileAll
// against limits (rule.LimitsFor the service's protocol). An error is a
// *rule.BatchError whose index is in Add, or in Replace if Add is fine.
func (b *Batch) Compile(limits rule.Limits) error {
	var err error
	if b.AddCompiled, err = rule.CompileAll(b.Add, limits); err != nil {
		return err
	}
	b.ReplaceCompiled, err = rule.CompileAll(b.ReplaceRules(), limits)
	return err
}

// ReplaceRules are the new rules of Replace, in order.
func (b *Batch) ReplaceRules() []rule.Rule {
	rs := make([]rule.Rule, len(b.Replace))
	for i, u := range b.Replace {
		rs[i] = u.Rule
	}
	return rs
}
