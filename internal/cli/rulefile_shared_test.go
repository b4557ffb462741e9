package cli

import (
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/santa-offload/santa/rule"
)

// The rule files of testdata/rulefiles and what reading each gives, in
// expected.json: its rules, or the error's message. The Python SDK's
// loader (sdk/python/santa/rulefile.py) is held to the same files.

const ruleFilesDir = "../../testdata/rulefiles"

var updateRuleFiles = flag.Bool("update-rulefiles", false, "rewrite testdata/rulefiles/expected.json from what santactl reads")

func TestRuleFiles(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(ruleFilesDir, "*.rules"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no rule files in %s: %v", ruleFilesDir, err)
	}
	got := map[string]any{}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got[filepath.Base(path)] = readOutcome(data)
	}
	expectedPath := filepath.Join(ruleFilesDir, "expected.json")
	if *updateRuleFiles {
		b, err := json.MarshalIndent(got, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(expectedPath, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(expectedPath)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("%s: %v", expectedPath, err)
	}
	// Both through JSON, so that numbers compare as numbers.
	b, _ := json.Marshal(got)
	var gotJSON map[string]any
	if err := json.Unmarshal(b, &gotJSON); err != nil {
		t.Fatal(err)
	}
	for name, w := range want {
		if _, ok := gotJSON[name]; !ok {
			t.Errorf("expected.json has %s, which is not a file", name)
		} else if !reflect.DeepEqual(gotJSON[name], w) {
			t.Errorf("%s: got %v, want %v", name, gotJSON[name], w)
		}
	}
	for name := range gotJSON {
		if _, ok := want[name]; !ok {
			t.Errorf("%s is not in expected.json", name)
		}
	}
}

// readOutcome is what santactl makes of a rule file: {"rules": [...]}, each
// rule in the protocol vectors' JSON form (testdata/protocol), or
// {"error": message}.
func readOutcome(data []byte) map[string]any {
	rs, err := parseRuleFile(data)
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	out := []any{}
	for _, r := range rs {
		out = append(out, vectorRule(r))
	}
	return map[string]any{"rules": out}
}

func vectorRule(r rule.Rule) map[string]any {
	v := map[string]any{
		"cond_off": r.Condition.Offset, "pattern": hex.EncodeToString(r.Condition.Pattern),
		"reply_len": r.ReplyLen, "flags": 0,
	}
	if r.Condition.HasLength() {
		v["flags"] = 1
		v["min_len"], v["max_len"] = r.Condition.MinLen, r.Condition.MaxLen
	}
	procs := []any{}
	for _, p := range r.Processors {
		switch p.Kind {
		case rule.ProcessorPut:
			procs = append(procs, map[string]any{"put": map[string]any{"dst": p.DstOffset, "bytes": hex.EncodeToString(p.Bytes)}})
		case rule.ProcessorCopy:
			procs = append(procs, map[string]any{"copy": map[string]any{"src": p.SrcOffset, "len": p.Length, "dst": p.DstOffset}})
		}
	}
	v["processors"] = procs
	return v
}
