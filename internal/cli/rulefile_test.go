package cli

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/rule"
)

func TestParseRuleFile(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []rule.Rule
	}{
		{"text, put and copy", `{"rules": [{"condition": {"offset": 0, "text": "Hello"}, "reply_len": 6,
			"processors": [{"put": {"offset": 0, "text": "COMSYS"}}, {"copy": {"from": 0, "length": 2, "to": 0}}]}]}`,
			[]rule.Rule{{Condition: rule.Condition{Pattern: []byte("Hello")}, ReplyLen: 6,
				Processors: []rule.Processor{rule.Put(0, []byte("COMSYS")), rule.Copy(0, 2, 0)}}}},
		{"hex with spaces", `{"rules": [{"condition": {"offset": 2, "hex": "01 00 0A ff"}, "reply_len": 1, "processors": []}]}`,
			[]rule.Rule{{Condition: rule.Condition{Offset: 2, Pattern: []byte{1, 0, 10, 255}}, ReplyLen: 1}}},
		{"reply_len defaults to where the writes end", `{"rules": [{"condition": {"text": "a"},
			"processors": [{"put": {"offset": 4, "text": "xy"}}, {"copy": {"from": 0, "length": 1, "to": 1}}]}]}`,
			[]rule.Rule{{Condition: rule.Condition{Pattern: []byte("a")}, ReplyLen: 6,
				Processors: []rule.Processor{rule.Put(4, []byte("xy")), rule.Copy(0, 1, 1)}}}},
		{"text and hex that agree, and an id, as rules -json prints", `{"rules": [{"id": 9, "condition": {"offset": 0, "text": "Hi", "hex": "4869"}, "reply_len": 1, "processors": []}]}`,
			[]rule.Rule{{Condition: rule.Condition{Pattern: []byte("Hi")}, ReplyLen: 1}}},
		{"text is UTF-8 bytes", `{"rules": [{"condition": {"text": "é\n"}, "reply_len": 1, "processors": []}]}`,
			[]rule.Rule{{Condition: rule.Condition{Pattern: []byte("\xc3\xa9\n")}, ReplyLen: 1}}},
		{"lengths: a number, a string, ranges closed, open and bounded above", `{"rules": [
			{"condition": {"text": "a", "length": 34}, "reply_len": 1, "processors": []},
			{"condition": {"text": "b", "length": "34"}, "reply_len": 1, "processors": []},
			{"condition": {"text": "c", "length": "30-40"}, "reply_len": 1, "processors": []},
			{"condition": {"text": "d", "length": "30-"}, "reply_len": 1, "processors": []},
			{"condition": {"text": "e", "length": "0-40"}, "reply_len": 1, "processors": []}]}`,
			[]rule.Rule{
				{Condition: rule.Condition{Pattern: []byte("a"), MinLen: 34, MaxLen: 34}, ReplyLen: 1},
				{Condition: rule.Condition{Pattern: []byte("b"), MinLen: 34, MaxLen: 34}, ReplyLen: 1},
				{Condition: rule.Condition{Pattern: []byte("c"), MinLen: 30, MaxLen: 40}, ReplyLen: 1},
				{Condition: rule.Condition{Pattern: []byte("d"), MinLen: 30}, ReplyLen: 1},
				{Condition: rule.Condition{Pattern: []byte("e"), MaxLen: 40}, ReplyLen: 1},
			}},
	}
	for _, tt := range tests {
		got, err := parseRuleFile([]byte(tt.file))
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if !slices.EqualFunc(got, tt.want, sameRule) {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestParseRuleFileErrors(t *testing.T) {
	tests := []struct {
		file, want string
	}{
		{``, `no JSON value`},
		{`{"rules": [`, `the JSON value ends early`},
		{"{\"rules\": [\n  {\"condition\": {\"offset\": 0,}}]}", `line 2, column 30: invalid character '}' looking for beginning of object key string`},
		{`{"rules": []} []`, `line 1, column 15: more after the end of the JSON value`},
		{`{}`, `no rules: want {"rules": [rule, ...]}`},
		{`{"rules": []}`, `no rules: want {"rules": [rule, ...]}`},
		{`{"rule": []}`, `unknown field "rule"`},
		{`{"rules": {}}`, `rules: want a list, not object`},
		{`{"rules": [{"condition": {"offset": 70000, "text": "a"}}]}`, `rule 0: condition.offset: want an integer from 0 to 65535, not number 70000`},
		{`{"rules": [{"condition": {"offset": "2", "text": "a"}}]}`, `rule 0: condition.offset: want an integer from 0 to 65535, not string`},
		{`{"rules": [{"condition": {"text": "a"}, "procesors": []}]}`, `rule 0: unknown field "procesors"`},
		{`{"rules": [{"condition": {"offset": 1}}]}`, `rule 0: condition: give "text" or "hex"`},
		{`{"rules": [{"condition": {"hex": "123"}}]}`, `rule 0: condition: hex: odd length hex string`},
		{`{"rules": [{"condition": {"hex": "0g"}}]}`, `rule 0: condition: hex: invalid byte: U+0067 'g'`},
		{`{"rules": [{"condition": {"text": "a", "hex": "62"}}]}`, `rule 0: condition: text "a" and hex "b" differ`},
		{`{"rules": [{"condition": {"text": "a"}, "reply_len": 1, "processors": []},
		             {"condition": {"text": "b"}, "processors": [{}]}]}`, `rule 1: processor 0: give "put" or "copy"`},
		{`{"rules": [{"condition": {"text": "a"}, "processors": [{"put": {"text": "x"}, "copy": {"length": 1}}]}]}`, `rule 0: processor 0: give "put" or "copy", not both`},
		{`{"rules": [{"condition": {"text": "a"}, "processors": [{"put": {"offset": 3}}]}]}`, `rule 0: processor 0: put: give "text" or "hex"`},
		{`{"rules": [{"condition": {"text": "a"}, "processors": [{"copy": {"from": 0, "length": 10, "to": 65530}}]}]}`, `rule 0: the processors write up to byte 65540, beyond any reply`},
		{`{"rules": [{"condition": {"text": "a", "length": "abc"}}]}`, `rule 0: condition.length: want 34, "34", "30-40" or "30-" (request payload bytes), not "abc"`},
		{`{"rules": [{"condition": {"text": "a", "length": "-40"}}]}`, `rule 0: condition.length: want 34, "34", "30-40" or "30-" (request payload bytes), not "-40"`},
		{`{"rules": [{"condition": {"text": "a", "length": "30-0"}}]}`, `rule 0: condition.length: want 34, "34", "30-40" or "30-" (request payload bytes), not "30-0"`},
		{`{"rules": [{"condition": {"text": "a", "length": 70000}}]}`, `rule 0: condition.length: want 34, "34", "30-40" or "30-" (request payload bytes), not 70000`},
		{`{"rules": [{"condition": {"text": "a", "length": 3.5}}]}`, `rule 0: condition.length: want 34, "34", "30-40" or "30-" (request payload bytes), not 3.5`},
		{`{"rules": [{"condition": {"text": "a", "length": [3]}}]}`, `rule 0: condition.length: want 34, "34", "30-40" or "30-" (request payload bytes), not [3]`},
		{`{"rules": [{"condition": {"text": "a", "length": 0}}]}`, `rule 0: condition.length: 0 allows no request: a request holds at least the condition`},
		{`{"rules": [{"condition": {"text": "a", "length": "0-"}}]}`, `rule 0: condition.length: "0-" allows every length: leave "length" out`},
	}
	for _, tt := range tests {
		_, err := parseRuleFile([]byte(tt.file))
		if err == nil || err.Error() != tt.want {
			t.Errorf("parsing %s gives error %v, want %s", tt.file, err, tt.want)
		}
	}
}

// TestRuleFileRoundTrip checks that what rules -json prints is a rule file
// of the same rules.
func TestRuleFileRoundTrip(t *testing.T) {
	want := []rule.Rule{hello, dns, hi}
	f := ruleFile{}
	for i, r := range want {
		f.Rules = append(f.Rules, newJSONRule(client.RuleEntry{RuleID: uint32(i + 1), Rule: r}))
	}
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(f); err != nil {
		t.Fatal(err)
	}
	got, err := parseRuleFile(b.Bytes())
	if err != nil || !slices.EqualFunc(got, want, sameRule) {
		t.Errorf("the rules printed as %s read back as %+v, %v", b.String(), got, err)
	}
}

func sameRule(a, b rule.Rule) bool {
	return a.ReplyLen == b.ReplyLen && a.Condition.Offset == b.Condition.Offset &&
		a.Condition.MinLen == b.Condition.MinLen && a.Condition.MaxLen == b.Condition.MaxLen &&
		bytes.Equal(a.Condition.Pattern, b.Condition.Pattern) &&
		slices.EqualFunc(a.Processors, b.Processors, func(p, q rule.Processor) bool {
			return p.Kind == q.Kind && p.DstOffset == q.DstOffset && p.SrcOffset == q.SrcOffset &&
				p.Length == q.Length && bytes.Equal(p.Bytes, q.Bytes)
		})
}
