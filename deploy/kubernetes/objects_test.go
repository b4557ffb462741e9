package kubernetes

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestDecodeIsStrict: what the API server would refuse or silently drop is
// an error here, so that a test of the chart cannot pass on a field
// Kubernetes ignores.
func TestDecodeIsStrict(t *testing.T) {
	const head = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n"
	for _, tc := range []struct{ name, doc, want string }{
		{"unknown field", head + "  hostNetwrk: true\n", `unknown field "spec.hostNetwrk"`},
		{"field in another case", head + "  hostnetwork: true\n", `unknown field "spec.hostnetwork"`},
		{"duplicate key", head + "  hostNetwork: true\n  hostNetwork: false\n", `"hostNetwork" already set`},
		{"wrong type", head + "  hostNetwork: \"yes\"\n", "cannot unmarshal string"},
		{"unknown kind", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n", `apiVersion "v1" kind "Secret" is not a kind`},
		{"no kind", "metadata:\n  name: s\n", `apiVersion "" kind ""`},
		{"not YAML", head + "  containers: [\n", "document 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.doc)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}

	objs, err := Decode("# only a comment\n---\n" + head + "  hostNetwork: true\n---\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || !objs[0].(*corev1.Pod).Spec.HostNetwork {
		t.Fatalf("decoded %#v", objs)
	}
}
