package kubernetes

import (
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
)

// TestLint runs `helm lint`'s checks (Chart.yaml, values, templates)
// against the oldest Kubernetes the chart supports: anything but the
// informational messages fails.
func TestLint(t *testing.T) {
	kube := &chartutil.KubeVersion{Version: "v1.30.0", Major: "1", Minor: "30"}
	for _, values := range []map[string]any{nil, PlainValues()} {
		linter := lint.AllWithKubeVersion(ChartDir, values, PlainRelease.Namespace, kube)
		for _, m := range linter.Messages {
			if m.Severity > support.InfoSev {
				t.Errorf("lint with %v: %v", values, m)
			} else {
				t.Logf("lint with %v: %v", values, m)
			}
		}
	}
}
