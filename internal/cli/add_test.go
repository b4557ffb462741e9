package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santa-offload/santa/client"
	"github.com/santa-offload/santa/rule"
)

// writeFile writes a rule file into a temporary directory.
func writeFile(t *testing.T, content string) string {
	path := filepath.Join(t.TempDir(), "rules.json")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// ruleFileOf is the rule file of rs.
func ruleFileOf(t *testing.T, rs []rule.Rule) string {
	f := ruleFile{}
	for _, r := range rs {
		jr := newJSONRule(client.RuleEntry{Rule: r})
		jr.ID = nil
		f.Rules = append(f.Rules, jr)
	}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// patterned is n rules with 256-byte patterns and 1400-byte replies, so
// that they take many messages; rule i's pattern begins with i.
func patterned(n int) []rule.Rule {
	var rs []rule.Rule
	for i := range n {
		pattern := fmt.Appendf(nil, "%04d", i)
		pattern = append(pattern, bytes.Repeat([]byte("p"), 252)...)
		rs = append(rs, rule.Rule{Condition: rule.Condition{Pattern: pattern},
			Processors: []rule.Processor{rule.Put(0, bytes.Repeat([]byte("r"), 1400))}, ReplyLen: 1400})
	}
	return rs
}

func TestAdd(t *testing.T) {
	f, path := withService(t)
	file := writeFile(t, `{"rules": [
		{"condition": {"offset": 0, "text": "Bye"}, "processors": [{"put": {"offset": 0, "text": "CIAO"}}]},
		{"condition": {"offset": 4, "hex": "00 01"}, "reply_len": 8, "processors": [{"copy": {"from": 0, "length": 4, "to": 0}}]}]}`)
	stdout, stderr, code := santactl(t, path, "add", "7", file)
	check(t, "add's table", stdout, "RULE  ID\n0     4\n1     5\n")
	if stderr != "" || code != 0 {
		t.Errorf("add: stderr %q, exit status %d", stderr, code)
	}
	want := []rule.Rule{hello, dns, hi,
		{Condition: rule.Condition{Pattern: []byte("Bye")}, Processors: []rule.Processor{rule.Put(0, []byte("CIAO"))}, ReplyLen: 4},
		{Condition: rule.Condition{Offset: 4, Pattern: []byte{0, 1}}, Processors: []rule.Processor{rule.Copy(0, 4, 0)}, ReplyLen: 8}}
	if got := rulesOnly(f.rulesOf(7)); !slices.EqualFunc(got, want, sameRule) {
		t.Errorf("the service holds %+v, want %+v", got, want)
	}

	e := testEnv(path, `{"rules": [{"condition": {"text": "stdin"}, "processors": [{"put": {"text": "yes"}}]}]}`, nil)
	stdout, stderr, code = runEnv(t, e, "add", "-json", "7", "-")
	check(t, "add -json from stdin", stdout, "{\n  \"service_id\": 7,\n  \"rule_ids\": [\n    6\n  ]\n}\n")
	if stderr != "" || code != 0 {
		t.Errorf("add from stdin: stderr %q, exit status %d", stderr, code)
	}
}

// TestAddMany checks that add installs rules that take many messages, in
// one transaction.
func TestAddMany(t *testing.T) {
	f, path := newFake(t)
	service := f.addService(client.ServiceInfo{}, client.ServiceStats{})
	rs := patterned(500)
	perMessage := batchRoom / ruleSize(rs[0])
	stdout, stderr, code := santactl(t, path, "-json", "add", fmt.Sprint(service), writeFile(t, ruleFileOf(t, rs)))
	if stderr != "" || code != 0 {
		t.Fatalf("add: stderr %q, exit status %d", stderr, code)
	}
	var got ruleIDs
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || len(got.RuleIDs) != len(rs) || got.RuleIDs[499] != 500 {
		t.Errorf("add printed %.100s..., %v; want 500 ids, 1 to 500", stdout, err)
	}
	if want := (len(rs) + perMessage - 1) / perMessage; f.addRequests != want {
		t.Errorf("add sent %d ADD_RULES requests, want %d", f.addRequests, want)
	}
	if installed := rulesOnly(f.rulesOf(service)); !slices.EqualFunc(installed, rs, sameRule) {
		t.Errorf("the service holds %d rules, not the 500 of the file", len(installed))
	}
}

// TestAddRefused checks that a refused rule is named by its place in the
// file, whichever message carried it, and that nothing is installed then.
func TestAddRefused(t *testing.T) {
	f, path := withService(t)
	rs := patterned(300)
	bad := 250 // in the fourth message; the condition of rule 1
	perMessage := batchRoom / ruleSize(rs[0])
	if bad < 3*perMessage {
		t.Fatalf("rule %d is in message %d, not the fourth", bad, bad/perMessage+1)
	}
	rs[bad] = hello
	_, stderr, code := santactl(t, path, "add", "7", writeFile(t, ruleFileOf(t, rs)))
	check(t, "add's refusal", stderr, `santactl: add: rule 250: a rule has the condition "Hello" at 0 already (EEXIST)`+"\n")
	if code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	if n := len(f.rulesOf(7)); n != 3 {
		t.Errorf("the service holds %d rules after the refusal, want its 3", n)
	}
}

func TestAddInvalid(t *testing.T) {
	f, path := withService(t)
	long := strings.Repeat("x", 300)
	file := writeFile(t, `{"rules": [{"condition": {"text": "a"}, "processors": [{"put": {"text": "A"}}]},
		{"condition": {"text": "b"}, "processors": [{"put": {"text": "B"}}]},
		{"condition": {"text": "c"}, "processors": [{"put": {"text": "C"}}]},
		{"condition": {"text": "`+long+`"}, "processors": [{"put": {"text": "D"}}]}]}`)
	overlong := writeFile(t, `{"rules": [{"condition": {"text": "a"}, "reply_len": 2, "processors": [{"put": {"offset": 1, "text": "AB"}}]}]}`)
	for _, tt := range []struct {
		args   []string
		stderr string
		code   int
	}{
		{[]string{"add", "7", file}, "santactl: add: " + file + ": rule 3: condition pattern is 300 bytes; the limit is 256\n", 1},
		{[]string{"add", "7", overlong}, "santactl: add: " + overlong + ": rule 0: processors[0] (put) end (dst + length) is 3; the limit is 2 (the reply length)\n", 1},
		{[]string{"add", "7", file + ".none"}, "santactl: add: open " + file + ".none: no such file or directory\n", 1},
		{[]string{"add", "7"}, "santactl: add: too few arguments\nusage: santactl [-socket PATH] [-json] add SERVICE FILE\n", 2},
	} {
		stdout, stderr, code := santactl(t, path, tt.args...)
		if stdout != "" || stderr != tt.stderr || code != tt.code {
			t.Errorf("%q: stdout %q, stderr %q, exit status %d; want stderr %q, status %d", tt.args, stdout, stderr, code, tt.stderr, tt.code)
		}
	}
	if f.addRequests != 0 || len(f.rulesOf(7)) != 3 {
		t.Errorf("an invalid file reached the daemon: %d ADD_RULES requests", f.addRequests)
	}
}

func rulesOnly(entries []client.RuleEntry) []rule.Rule {
	var rs []rule.Rule
	for _, e := range entries {
		rs = append(rs, e.Rule)
	}
	return rs
}

// On a terminal, a batch of many messages shows on stderr how far it is,
// on one line rewritten in place and cleared at the end; elsewhere stderr
// stays empty.
func TestAddProgress(t *testing.T) {
	_, path := withService(t)
	file := writeFile(t, ruleFileOf(t, patterned(300)))
	e := testEnv(path, "", nil)
	e.errTerminal = true
	stdout, stderr, code := runEnv(t, e, "add", "7", file)
	if code != 0 || !strings.HasPrefix(stdout, "RULE  ID\n") {
		t.Fatalf("add: status %d, stdout %q", code, stdout)
	}
	// The tests' clock moves a second at each reading: every step shows.
	const clear = "\r\x1b[K"
	var want strings.Builder
	want.WriteString(clear + "reading " + file)
	for i := range 300 {
		fmt.Fprintf(&want, "%schecked %d of 300 rules", clear, i+1)
	}
	// 78 rules of 256 + 1400 bytes and their headers to a message.
	for _, sent := range []int{78, 156, 234, 300} {
		fmt.Fprintf(&want, "%ssent %d of 300", clear, sent)
	}
	want.WriteString(clear + "sent 300, committing: santad applies them all" + clear)
	check(t, "add's progress", stderr, want.String())

	if _, stderr, _ := santactl(t, path, "delete", "7", "-f", file); stderr != "" {
		t.Errorf("delete, stderr no terminal: %q", stderr)
	}
}
