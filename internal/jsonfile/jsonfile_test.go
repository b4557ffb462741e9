package jsonfile

import (
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	type config struct {
		Port int    `json:"port"`
		Unit string `json:"unit"`
	}
	for _, text := range []string{`{"port": 53}`, "{\"port\": 53}\n", " \t{\"port\": 53}\r\n\n  "} {
		var c config
		if err := Decode([]byte(text), &c); err != nil || c.Port != 53 {
			t.Errorf("%q: %+v, %v", text, c, err)
		}
	}
	for text, want := range map[string]string{
		`{"port": 53} {"port": 5353}`:             `line 1, column 14: more after the end of the JSON value: "{\"port\": 5353}"`,
		`{"port": 53}}`:                           `line 1, column 13: more after the end of the JSON value: "}"`,
		"{\"port\": 53}\n\n  max_rules=5\nmore":   `line 3, column 3: more after the end of the JSON value: "max_rules=5"...`,
		`{"port": 53} ` + strings.Repeat("é", 30): `: "` + strings.Repeat("é", 20) + `"...`,
		`{"port": 53, "prot": 1}`:                 `unknown field "prot"`,
		`[1]`:                                     `cannot unmarshal array`,
	} {
		var c config
		err := Decode([]byte(text), &c)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v; want one with %s", text, err, want)
		}
	}
}
