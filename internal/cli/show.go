package cli

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"math"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/rule"
)

func showRule(ctx context.Context, e *env, service, id uint32) error {
	c, err := e.connect(ctx)
	if err != nil {
		return err
	}
	p, err := serviceProto(c, service)
	if err != nil {
		return err
	}
	// Without a request for one rule, its page is found by walking them.
	for entry, err := range c.Rules(service) {
		if err != nil {
			return err
		}
		if entry.RuleID == id {
			compiled, err := rule.Compile(entry.Rule)
			if err != nil {
				return fmt.Errorf("rule %d: %w", id, err)
			}
			v := newRuleDetail(service, entry, compiled)
			v.request = p.decode(entry.Rule.Condition)
			return e.show(v)
		}
	}
	return fmt.Errorf("service %d has no rule %d", service, id)
}

// ruleDetail is a rule in full, with the reply template the data plane
// builds from its processors.
type ruleDetail struct {
	ServiceID uint32 `json:"service_id"`
	jsonRule
	Template string     `json:"template"` // hex; copy destinations are zero
	Copies   []jsonCopy `json:"copies"`   // what every reply takes from its request, after later processors cut copies

	entry    client.RuleEntry
	compiled rule.Compiled
	request  string // the condition decoded (patterns.go), if it is
}

func newRuleDetail(service uint32, entry client.RuleEntry, compiled rule.Compiled) ruleDetail {
	v := ruleDetail{
		ServiceID: service,
		jsonRule:  newJSONRule(entry),
		Template:  hex.EncodeToString(compiled.Template),
		Copies:    []jsonCopy{},
		entry:     entry,
		compiled:  compiled,
	}
	for _, p := range compiled.Copies {
		v.Copies = append(v.Copies, jsonCopy{From: p.Src, Length: p.Len, To: p.Dst})
	}
	return v
}

func (v ruleDetail) table(w io.Writer) error {
	r := v.entry.Rule
	fmt.Fprintf(w, "service %d, rule %d\n\n", v.ServiceID, v.entry.RuleID)
	fmt.Fprintf(w, "condition  %d bytes at offset %d: %s\n", len(r.Condition.Pattern), r.Condition.Offset, quote(r.Condition.Pattern))
	hexdump(w, "  ", r.Condition.Pattern, nil)
	if v.request != "" {
		fmt.Fprintf(w, "request    %s\n", v.request)
	}
	if r.Condition.HasLength() {
		fmt.Fprintf(w, "length     %s\n", describeLength(r.Condition))
	}
	if v.entry.Guard != nil {
		fmt.Fprintf(w, "guard      %s\n", describeGuard(v.entry.Guard))
	}
	fmt.Fprintf(w, "\nreply      %d bytes, %d processors\n", r.ReplyLen, len(r.Processors))
	for i, p := range r.Processors {
		fmt.Fprintf(w, "  %d  %s\n", i, describe(p, math.MaxInt))
		if p.Kind == rule.ProcessorPut {
			hexdump(w, "     ", p.Bytes, nil)
		}
	}
	copied := make([]bool, len(v.compiled.Template))
	for _, p := range v.compiled.Copies {
		for i := p.Dst; i < p.Dst+p.Len; i++ {
			copied[i] = true
		}
	}
	fmt.Fprintf(w, "\ntemplate   the reply; -- are bytes copied from each request\n")
	hexdump(w, "  ", v.compiled.Template, copied)
	return nil
}
