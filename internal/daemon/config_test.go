package daemon

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

// deploy/santad.json holds every key with its default, as
// docs/operations.md says.
func TestDeployedConfigIsTheDefault(t *testing.T) {
	const path = "../../deploy/santad.json"
	got, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.Interfaces, want.Quotas = []string{}, map[string]Quota{}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s is\n%+v\nthe defaults are\n%+v", path, got, want)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]any
	if err := json.Unmarshal(data, &keys); err != nil {
		t.Fatal(err)
	}
	for f := range reflect.TypeFor[Config]().Fields() {
		if key := f.Tag.Get("json"); keys[key] == nil {
			t.Errorf("%s has no key %q", path, key)
		}
	}
}
