package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/santa-offload/santa/rule"
)

// readRuleFile reads and parses the rule file at path, or standard input
// for "-". Its errors begin with the file's name.
func (e *env) readRuleFile(path string) ([]rule.Rule, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(e.stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	rs, err := parseRuleFile(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fileName(path), err)
	}
	return rs, nil
}

// fileName names the rule file at path in messages.
func fileName(path string) string {
	if path == "-" {
		return "stdin"
	}
	return path
}
