package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/rule"
)

// Escaped bytes in the rules table are cut after this many characters.
const (
	patternWidth = 40
	putWidth     = 16
)

type rulesOptions struct{}

func (*rulesOptions) flags(*flag.FlagSet) {}

// run takes "SERVICE", "list SERVICE", "SERVICE RULE_ID" or
// "show SERVICE RULE_ID".
func (*rulesOptions) run(ctx context.Context, e *env, args []string) error {
	verb := ""
	if len(args) > 0 && (args[0] == "list" || args[0] == "show") {
		verb, args = args[0], args[1:]
	}
	min, max := 1, 2
	switch verb {
	case "list":
		max = 1
	case "show":
		min = 2
	}
	service, err := serviceArgs(args, min, max)
	if err != nil {
		return err
	}
	if len(args) == 1 {
		return listRules(ctx, e, service)
	}
	id, err := parseID("RULE_ID", args[1])
	if err != nil {
		return err
	}
	return showRule(ctx, e, service, id)
}

func listRules(ctx context.Context, e *env, service uint32) error {
	c, err := e.connect(ctx)
	if err != nil {
		return err
	}
	v := ruleList{ruleFile: ruleFile{Rules: []jsonRule{}}}
	if v.proto, err = serviceProto(c, service); err != nil {
		return err
	}
	for entry, err := range c.Rules(service) {
		if err != nil {
			return err
		}
		v.Rules = append(v.Rules, newJSONRule(entry))
		v.entries = append(v.entries, entry)
	}
	return e.show(v)
}

// ruleList is a service's rules. Its JSON is a rule file.
type ruleList struct {
	ruleFile
	entries []client.RuleEntry
	proto   proto // how the table shows patterns
}

// table has a GUARD column if a rule has a guard.
func (v ruleList) table(w io.Writer) error {
	guarded := slices.ContainsFunc(v.entries, func(e client.RuleEntry) bool { return e.Guard != nil })
	header := []any{"ID", "OFFSET", "PATTERN", "LENGTH", "REPLY", "PROCESSORS"}
	if guarded {
		header = append(header, "GUARD")
	}
	t := newTable(w, header...)
	for _, e := range v.entries {
		var procs []string
		for _, p := range e.Rule.Processors {
			procs = append(procs, describe(p, putWidth))
		}
		c := e.Rule.Condition
		cells := []any{e.RuleID, c.Offset, v.proto.patternCell(c, patternWidth), lengthCell(c), e.Rule.ReplyLen, strings.Join(procs, ", ")}
		if guarded {
			cells = append(cells, describeGuard(e.Guard))
		}
		t.row(cells...)
	}
	return t.flush()
}

// describeGuard tells what a guard holds a rule to; "-" for none.
func describeGuard(g *client.Guard) string {
	if g == nil {
		return "-"
	}
	key := "any key"
	if g.Key != nil {
		key = fmt.Sprintf("key %s gen %d", quote(g.Key), g.Gen)
	}
	deadline := "no deadline"
	if g.ExpiresInMS != 0 {
		deadline = fmt.Sprintf("%.3f s left", float64(g.ExpiresInMS)/1000)
	}
	return fmt.Sprintf("%s, domain gen %d, life %d, %s", key, g.DomainGen, g.Epoch, deadline)
}

// describe tells what a processor does, with a put's bytes cut after
// width escaped characters.
func describe(p rule.Processor, width int) string {
	switch p.Kind {
	case rule.ProcessorPut:
		return fmt.Sprintf("put %s at %d", quoteUpTo(p.Bytes, width), p.DstOffset)
	case rule.ProcessorCopy:
		return fmt.Sprintf("copy %d bytes from %d to %d", p.Length, p.SrcOffset, p.DstOffset)
	}
	return p.Kind.String()
}
