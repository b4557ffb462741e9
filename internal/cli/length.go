package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/santa-offload/santa/rule"
)

// A condition's length range in the rule file: "length": 34 (exactly),
// "34", "30-40" or "30-" (no upper bound), in request payload bytes. What
// santactl prints is always a string, rule.Condition.LengthText's.

const lengthForms = `34, "34", "30-40" or "30-" (request payload bytes)`

// parseLength reads the "length" of a condition into c.
func parseLength(raw json.RawMessage, c *rule.Condition) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil { // a number beyond float64's range
		return fmt.Errorf("want %s, not %s", lengthForms, raw)
	}
	var text string
	switch v := v.(type) {
	case float64:
		text = strconv.FormatFloat(v, 'f', -1, 64)
	case string:
		text = v
	default:
		return fmt.Errorf("want %s, not %s", lengthForms, raw)
	}
	lo, hi, ranged := strings.Cut(text, "-")
	min, err := strconv.ParseUint(lo, 10, 16)
	if err != nil {
		return fmt.Errorf("want %s, not %s", lengthForms, raw)
	}
	max := min
	switch {
	case ranged && hi == "":
		max = 0
	case ranged:
		if max, err = strconv.ParseUint(hi, 10, 16); err != nil || max == 0 {
			return fmt.Errorf("want %s, not %s", lengthForms, raw)
		}
	}
	c.MinLen, c.MaxLen = uint16(min), uint16(max)
	switch {
	case !ranged && min == 0:
		return errors.New("0 allows no request: a request holds at least the condition")
	case !c.HasLength():
		return errors.New(`"0-" allows every length: leave "length" out`)
	}
	return nil
}

// lengthCell is a condition's length range in a table.
func lengthCell(c rule.Condition) string {
	if !c.HasLength() {
		return "any"
	}
	return c.LengthText()
}

// describeLength says which requests a condition's length range allows,
// for people.
func describeLength(c rule.Condition) string {
	switch {
	case c.MinLen == c.MaxLen:
		return fmt.Sprintf("requests of %d bytes", c.MinLen)
	case c.MaxLen == 0:
		return fmt.Sprintf("requests of %d bytes or more", c.MinLen)
	}
	return fmt.Sprintf("requests of %d to %d bytes", c.MinLen, c.MaxLen)
}
