package cli

import (
	"slices"
	"testing"

	"github.com/santa-offload/santa/rule"
)

func TestDelete(t *testing.T) {
	f, path := withService(t)
	helloFile := writeFile(t, ruleFileOf(t, []rule.Rule{hello}))
	for _, tt := range []struct {
		args           []string
		stdout, stderr string
		code           int
		left           []uint32 // the ids of the rules left
	}{
		{[]string{"delete", "7", "1", "99"}, "", "santactl: delete: rule id 99: no rule 99 (ENOENT)\n", 1, []uint32{1, 2, 3}},
		{[]string{"delete", "7", "3"}, "deleted 1 rule of service 7\n", "", 0, []uint32{1, 2}},
		{[]string{"delete", "7", "-f", helloFile, "-json"}, "{\n  \"service_id\": 7,\n  \"rule_ids\": [\n    1\n  ]\n}\n", "", 0, []uint32{2}},
		{[]string{"delete", "7", "-f", helloFile}, "", "santactl: delete: " + helloFile + `: rule 0: service 7 has no rule with the condition "Hello" at 0` + "\n", 1, []uint32{2}},
		{[]string{"delete", "7"}, "", "santactl: delete: give RULE_IDs or -f FILE\nusage: santactl [-socket PATH] [-json] delete SERVICE RULE_ID... | SERVICE -f FILE\n", 2, []uint32{2}},
		{[]string{"delete", "7", "2", "-f", helloFile}, "", "santactl: delete: give RULE_IDs or -f FILE\nusage: santactl [-socket PATH] [-json] delete SERVICE RULE_ID... | SERVICE -f FILE\n", 2, []uint32{2}},
		{[]string{"delete", "7", "two"}, "", "santactl: delete: RULE_ID \"two\" is not a number from 0 to 4294967295\nusage: santactl [-socket PATH] [-json] delete SERVICE RULE_ID... | SERVICE -f FILE\n", 2, []uint32{2}},
	} {
		stdout, stderr, code := santactl(t, path, tt.args...)
		if stdout != tt.stdout || stderr != tt.stderr || code != tt.code {
			t.Errorf("%q: stdout %q, stderr %q, exit status %d; want %q, %q, %d", tt.args, stdout, stderr, code, tt.stdout, tt.stderr, tt.code)
		}
		var left []uint32
		for _, e := range f.rulesOf(7) {
			left = append(left, e.RuleID)
		}
		if !slices.Equal(left, tt.left) {
			t.Errorf("%q leaves rules %v, want %v", tt.args, left, tt.left)
		}
	}
}

// delete -f names a rule by its whole condition, length included: rules of
// one pattern that differ in their length alone are told apart.
func TestDeleteByLength(t *testing.T) {
	f, path := withService(t)
	other := dns
	other.Condition.MinLen, other.Condition.MaxLen = 30, 0
	if _, stderr, code := santactl(t, path, "add", "7", writeFile(t, ruleFileOf(t, []rule.Rule{other}))); code != 0 {
		t.Fatalf("add: %s", stderr)
	}
	stdout, stderr, code := santactl(t, path, "delete", "7", "-f", writeFile(t, ruleFileOf(t, []rule.Rule{dns})))
	if stdout != "deleted 1 rule of service 7\n" || code != 0 {
		t.Fatalf("delete -f: stdout %q, stderr %q, exit status %d", stdout, stderr, code)
	}
	if got := rulesOnly(f.rulesOf(7)); !slices.EqualFunc(got, []rule.Rule{hello, hi, other}, sameRule) {
		t.Errorf("left %+v; want hello, hi and the rule of 30 bytes or more", got)
	}
	unknown := dns
	unknown.Condition.MinLen, unknown.Condition.MaxLen = 10, 20
	file := writeFile(t, ruleFileOf(t, []rule.Rule{unknown}))
	_, stderr, _ = santactl(t, path, "delete", "7", "-f", file)
	if want := "santactl: delete: " + file + `: rule 0: service 7 has no rule with the condition "\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01" at 2 and the request length 10-20` + "\n"; stderr != want {
		t.Errorf("delete -f of an unknown length: %q; want %q", stderr, want)
	}
}

// TestAddThenDeleteFile checks that delete -f undoes add with the same
// file, however many messages it takes.
func TestAddThenDeleteFile(t *testing.T) {
	f, path := withService(t)
	file := writeFile(t, ruleFileOf(t, patterned(200)))
	if _, stderr, code := santactl(t, path, "add", "7", file); code != 0 {
		t.Fatalf("add: %s", stderr)
	}
	stdout, stderr, code := santactl(t, path, "delete", "7", "-f", file)
	if stdout != "deleted 200 rules of service 7\n" || code != 0 {
		t.Errorf("delete -f: stdout %q, stderr %q, exit status %d", stdout, stderr, code)
	}
	if got := rulesOnly(f.rulesOf(7)); !slices.EqualFunc(got, []rule.Rule{hello, dns, hi}, sameRule) {
		t.Errorf("the service holds %d rules after add and delete -f, want its 3", len(got))
	}
}
