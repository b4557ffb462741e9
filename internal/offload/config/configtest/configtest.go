// Package configtest holds the offload agents' deployed configuration
// files to their defaults and their documentation.
package configtest

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// DeployedIsDefault checks that the JSON file at path, loaded as loaded,
// is the defaults, has every key of C, and that the document at doc
// describes each in a table row ("| `key` |").
func DeployedIsDefault[C any](t *testing.T, path, doc string, loaded, defaults C) {
	t.Helper()
	if !reflect.DeepEqual(loaded, defaults) {
		t.Errorf("%s is\n%+v\nthe defaults are\n%+v", path, loaded, defaults)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]any
	if err := json.Unmarshal(data, &keys); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[C]()) { // those of embedded structs too
		key := f.Tag.Get("json")
		if f.Anonymous || key == "-" {
			continue
		}
		if _, ok := keys[key]; !ok {
			t.Errorf("%s has no key %q", path, key)
		}
		if !strings.Contains(string(text), "| `"+key+"` |") {
			t.Errorf("%s does not describe key %q", doc, key)
		}
	}
}
