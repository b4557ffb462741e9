package cli

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/rule"
)

// The rule file of add and delete -f, which is also what rules -json
// prints (docs/santactl.md):
//
//	{"rules": [{"condition": {"offset": 0, "text": "Hello", "length": "5-9"},
//	            "reply_len": 6,
//	            "processors": [{"put": {"offset": 0, "text": "COMSYS"}},
//	                           {"copy": {"from": 0, "length": 2, "to": 0}}]}]}
type ruleFile struct {
	Rules []jsonRule `json:"rules"`
}

type jsonRule struct {
	// ID is what rules -json prints; add and delete -f ignore it, so that
	// what rules prints can be installed elsewhere.
	ID         *uint32         `json:"id,omitempty"`
	Condition  jsonCondition   `json:"condition"`
	ReplyLen   *uint16         `json:"reply_len,omitempty"` // default: where the processors' writes end
	Processors []jsonProcessor `json:"processors"`
	// Guard is what rules -json prints of a guarded rule's guard; a rule
	// file to install cannot hold one (jsonRule.rule).
	Guard *jsonGuard `json:"guard,omitempty"`
}

type jsonGuard struct {
	Key         byteString `json:"key"` // empty: the domain's generation alone
	Gen         uint32     `json:"gen"`
	DomainGen   uint32     `json:"domain_gen"`
	Epoch       uint32     `json:"epoch"`
	ExpiresInMS uint32     `json:"expires_in_ms"` // the time left; 0: no deadline
}

type jsonCondition struct {
	Offset uint16 `json:"offset"`
	byteString
	Length json.RawMessage `json:"length,omitempty"` // length.go
}

// jsonProcessor holds exactly one of its fields.
type jsonProcessor struct {
	Put  *jsonPut  `json:"put,omitempty"`
	Copy *jsonCopy `json:"copy,omitempty"`
}

type jsonPut struct {
	Offset uint16 `json:"offset"`
	byteString
}

type jsonCopy struct {
	From   uint16 `json:"from"`
	Length uint16 `json:"length"`
	To     uint16 `json:"to"`
}

// byteString is bytes as text, as hex digits (spaces allowed between
// them) or both, which must then agree. santactl prints hex always, and
// text too when the bytes are printable UTF-8.
type byteString struct {
	Text string `json:"text,omitempty"`
	Hex  string `json:"hex,omitempty"`
}

// parseRuleFile reads a rule file. It holds at least one rule.
func parseRuleFile(data []byte) ([]rule.Rule, error) {
	var file struct {
		Rules []json.RawMessage `json:"rules"`
	}
	if err := decodeStrict(data, &file); err != nil {
		return nil, err
	}
	if len(file.Rules) == 0 {
		return nil, errors.New(`no rules: want {"rules": [rule, ...]}`)
	}
	rs := make([]rule.Rule, len(file.Rules))
	for i, raw := range file.Rules {
		var jr jsonRule
		err := decodeStrict(raw, &jr)
		if err == nil {
			rs[i], err = jr.rule()
		}
		if err != nil {
			return nil, fmt.Errorf("rule %d: %w", i, err)
		}
	}
	return rs, nil
}

// decodeStrict decodes the one JSON value data holds into v, refusing
// fields v does not have: a misspelt field would otherwise be dropped
// without a word.
func decodeStrict(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return jsonError(data, err)
	}
	end := d.InputOffset()
	if _, err := d.Token(); err != io.EOF {
		rest := data[end:]
		line, col := position(data, end+int64(len(rest)-len(bytes.TrimLeft(rest, " \t\r\n"))))
		return fmt.Errorf("line %d, column %d: more after the end of the JSON value", line, col)
	}
	return nil
}

func (jr jsonRule) rule() (rule.Rule, error) {
	if jr.Guard != nil {
		// Installed without it, the rule would answer stale values.
		return rule.Rule{}, errors.New("guard: a rule file cannot hold a guarded rule: its generations are those of when it was listed " +
			"(an agent guards the rules it installs, docs/memcached.md)")
	}
	pattern, err := jr.Condition.bytes()
	if err != nil {
		return rule.Rule{}, fmt.Errorf("condition: %w", err)
	}
	r := rule.Rule{Condition: rule.Condition{Offset: jr.Condition.Offset, Pattern: pattern}}
	if jr.Condition.Length != nil {
		if err := parseLength(jr.Condition.Length, &r.Condition); err != nil {
			return rule.Rule{}, fmt.Errorf("condition.length: %w", err)
		}
	}
	end := 0 // of the processors' writes
	for i, jp := range jr.Processors {
		p, err := jp.processor()
		if err != nil {
			return rule.Rule{}, fmt.Errorf("processor %d: %w", i, err)
		}
		end = max(end, int(p.DstOffset)+int(p.Length)+len(p.Bytes)) // a put has no Length, a copy no Bytes
		r.Processors = append(r.Processors, p)
	}
	switch {
	case jr.ReplyLen != nil:
		r.ReplyLen = *jr.ReplyLen
	case end > math.MaxUint16:
		return rule.Rule{}, fmt.Errorf("the processors write up to byte %d, beyond any reply", end)
	default:
		r.ReplyLen = uint16(end)
	}
	return r, nil
}

func (jp jsonProcessor) processor() (rule.Processor, error) {
	switch {
	case jp.Put != nil && jp.Copy != nil:
		return rule.Processor{}, errors.New(`give "put" or "copy", not both`)
	case jp.Put != nil:
		b, err := jp.Put.bytes()
		if err != nil {
			return rule.Processor{}, fmt.Errorf("put: %w", err)
		}
		return rule.Put(jp.Put.Offset, b), nil
	case jp.Copy != nil:
		return rule.Copy(jp.Copy.From, jp.Copy.Length, jp.Copy.To), nil
	}
	return rule.Processor{}, errors.New(`give "put" or "copy"`)
}

func (s byteString) bytes() ([]byte, error) {
	if s.Hex == "" {
		if s.Text == "" {
			return nil, errors.New(`give "text" or "hex"`)
		}
		return []byte(s.Text), nil
	}
	b, err := hex.DecodeString(strings.Join(strings.Fields(s.Hex), ""))
	if err != nil {
		return nil, fmt.Errorf("hex: %s", strings.TrimPrefix(err.Error(), "encoding/hex: "))
	}
	if s.Text != "" && s.Text != string(b) {
		return nil, fmt.Errorf("text %s and hex %s differ", quote([]byte(s.Text)), quote(b))
	}
	return b, nil
}

// The JSON form of rules santactl prints.

func newByteString(b []byte) byteString {
	s := byteString{Hex: hex.EncodeToString(b)}
	if isText(b) {
		s.Text = string(b)
	}
	return s
}

// isText reports whether b is printable UTF-8 (spaces included, control
// characters not).
func isText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

func newJSONCondition(c rule.Condition) jsonCondition {
	jc := jsonCondition{Offset: c.Offset, byteString: newByteString(c.Pattern)}
	if c.HasLength() {
		jc.Length = json.RawMessage(strconv.Quote(c.LengthText()))
	}
	return jc
}

func newJSONRule(e client.RuleEntry) jsonRule {
	jr := jsonRule{
		ID:         &e.RuleID,
		Condition:  newJSONCondition(e.Rule.Condition),
		ReplyLen:   &e.Rule.ReplyLen,
		Processors: []jsonProcessor{},
	}
	if g := e.Guard; g != nil {
		jr.Guard = &jsonGuard{Key: newByteString(g.Key), Gen: g.Gen, DomainGen: g.DomainGen, Epoch: g.Epoch, ExpiresInMS: g.ExpiresInMS}
	}
	for _, p := range e.Rule.Processors {
		switch p.Kind {
		case rule.ProcessorPut:
			jr.Processors = append(jr.Processors, jsonProcessor{Put: &jsonPut{Offset: p.DstOffset, byteString: newByteString(p.Bytes)}})
		case rule.ProcessorCopy:
			jr.Processors = append(jr.Processors, jsonProcessor{Copy: &jsonCopy{From: p.SrcOffset, Length: p.Length, To: p.DstOffset}})
		}
	}
	return jr
}
