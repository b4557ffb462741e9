package cli

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/rule"
)

// deleteOptions name the rules by id, or by the conditions of a rule
// file: a service's conditions are unique, so they name its rules too,
// and "delete -f" undoes "add" with the same file.
type deleteOptions struct {
	file string
}

func (o *deleteOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.file, "f", "", "delete the rules with the conditions of the rule file at `FILE` (- for stdin)")
}

func (o *deleteOptions) run(ctx context.Context, e *env, args []string) error {
	service, err := serviceArgs(args, 1, len(args))
	if err != nil {
		return err
	}
	if (o.file == "") == (len(args) == 1) {
		return usagef("give RULE_IDs or -f FILE")
	}
	var ids []uint32
	for _, a := range args[1:] {
		id, err := parseID("RULE_ID", a)
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}
	c, err := e.connect(ctx)
	if err != nil {
		return err
	}
	if o.file != "" {
		rs, err := e.readRuleFile(o.file)
		if err != nil {
			return err
		}
		if ids, err = idsOf(c, service, rs); err != nil {
			return fmt.Errorf("%s: %w", fileName(o.file), err)
		}
	}
	deleteBatch := func(t *client.Txn, ids []uint32) ([]uint32, error) { return nil, t.DeleteRules(ids) }
	p := e.progress()
	_, err = inTxn(c, service, ids, idSize, deleteBatch,
		func(i int) string { return fmt.Sprintf("rule id %d", ids[i]) }, p)
	p.done()
	if err != nil {
		return err
	}
	return e.show(deleted{ruleIDs{ServiceID: service, RuleIDs: ids}})
}

// condition is a rule's condition as a map key: its length range too, as
// rules of one offset and pattern may differ in it alone.
type condition struct {
	offset         uint16
	pattern        string
	minLen, maxLen uint16
}

func keyOf(c rule.Condition) condition {
	return condition{c.Offset, string(c.Pattern), c.MinLen, c.MaxLen}
}

// idsOf finds the ids of the service's rules with the conditions of rs.
func idsOf(c *client.Client, service uint32, rs []rule.Rule) ([]uint32, error) {
	byCondition := make(map[condition]uint32)
	for e, err := range c.Rules(service) {
		if err != nil {
			return nil, err
		}
		byCondition[keyOf(e.Rule.Condition)] = e.RuleID
	}
	ids := make([]uint32, len(rs))
	for i, r := range rs {
		id, ok := byCondition[keyOf(r.Condition)]
		if !ok {
			length := ""
			if r.Condition.HasLength() {
				length = " and the request length " + r.Condition.LengthText()
			}
			return nil, fmt.Errorf("rule %d: service %d has no rule with the condition %s at %d%s",
				i, service, quote(r.Condition.Pattern), r.Condition.Offset, length)
		}
		ids[i] = id
	}
	return ids, nil
}

type deleted struct{ ruleIDs }

func (v deleted) table(w io.Writer) error {
	noun := "rules"
	if len(v.RuleIDs) == 1 {
		noun = "rule"
	}
	_, err := fmt.Fprintf(w, "deleted %d %s of service %d\n", len(v.RuleIDs), noun, v.ServiceID)
	return err
}
