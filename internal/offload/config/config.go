// Package config is what the offload agents' configurations share: the
// JSON file read over the defaults, refusing unknown keys, and durations
// written as in Go ("250ms") in files and flags.
package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// Load reads the JSON file at path into c, which holds the defaults: keys
// the file has override them. Unknown keys are refused: a misspelt key
// must not silently do nothing.
func Load(path string, c any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(c); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Duration is a time.Duration written as in Go ("250ms") in JSON and
// flags.
type Duration time.Duration

func (d Duration) String() string { return time.Duration(d).String() }

// Set parses s (flag.Value).
func (d *Duration) Set(s string) error {
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"250ms\": %w", err)
	}
	return d.Set(s)
}

// Positive checks that each named duration is positive.
func Positive(ds map[string]Duration) error {
	for name, d := range ds {
		if d <= 0 {
			return fmt.Errorf("%s is %v; it must be positive", name, time.Duration(d))
		}
	}
	return nil
}
