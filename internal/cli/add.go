package cli

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/rule"
)

type addOptions struct{}

func (*addOptions) flags(*flag.FlagSet) {}

func (*addOptions) run(ctx context.Context, e *env, args []string) error {
	service, err := serviceArgs(args, 2, 2)
	if err != nil {
		return err
	}
	p := e.progress()
	defer p.done()
	p.show(true, "reading %s", fileName(args[1]))
	rs, err := e.readRuleFile(args[1])
	if err != nil {
		return err
	}
	// Compile checks what Validate does and the copy pieces left after
	// later processors cut copies: all the daemon's limits on one rule,
	// found before anything is sent.
	for i, r := range rs {
		if _, err := rule.Compile(r); err != nil {
			return fmt.Errorf("%s: rule %d: %w", fileName(args[1]), i, err)
		}
		p.show(false, "checked %d of %d rules", i+1, len(rs))
	}
	c, err := e.connect(ctx)
	if err != nil {
		return err
	}
	ids, err := inTxn(c, service, rs, ruleSize, (*client.Txn).AddRules,
		func(i int) string { return fmt.Sprintf("rule %d", i) }, p)
	p.done()
	if err != nil {
		return err
	}
	if len(ids) != len(rs) {
		return fmt.Errorf("santad gave %d ids for %d rules", len(ids), len(rs))
	}
	return e.show(added{ruleIDs{ServiceID: service, RuleIDs: ids}})
}

// ruleIDs are the rules add installed or delete removed.
type ruleIDs struct {
	ServiceID uint32   `json:"service_id"`
	RuleIDs   []uint32 `json:"rule_ids"`
}

type added struct{ ruleIDs }

// table pairs each rule of the file with its id.
func (v added) table(w io.Writer) error {
	t := newTable(w, "RULE", "ID")
	for i, id := range v.RuleIDs {
		t.row(i, id)
	}
	return t.flush()
}
