// Package kubernetes renders Santa's Helm chart (helm/santa) offline, as
// `helm template` would, and decodes what it renders strictly into the
// Kubernetes API types. It is a module of its own so that Santa's main
// module does not depend on Helm and Kubernetes; its tests check the chart
// and the plain manifests (santa.yaml) generated from it.
package kubernetes

import (
	"fmt"
	"path"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
)

// ChartDir is the chart, relative to this directory.
const ChartDir = "helm/santa"

// Release names a release: the plain manifests are the chart installed as
// PlainRelease.
type Release struct{ Name, Namespace string }

// PlainRelease is the release santa.yaml is rendered for.
var PlainRelease = Release{Name: "santa", Namespace: "santa"}

// PlainValues are the values santa.yaml is rendered with: the chart's
// defaults, and the Namespace, which kubectl apply does not create.
func PlainValues() map[string]any { return map[string]any{"createNamespace": true} }

// Render renders the chart at dir with values over its defaults, as
// `helm template NAME DIR --namespace NS` prints it: the objects in Helm's
// install order, each after a "# Source:" line.
func Render(dir string, rel Release, values map[string]any) (string, error) {
	chart, err := loader.Load(dir)
	if err != nil {
		return "", fmt.Errorf("loading chart %s: %w", dir, err)
	}
	opts := chartutil.ReleaseOptions{Name: rel.Name, Namespace: rel.Namespace, Revision: 1, IsInstall: true}
	top, err := chartutil.ToRenderValues(chart, values, opts, chartutil.DefaultCapabilities)
	if err != nil {
		return "", fmt.Errorf("values: %w", err)
	}
	files, err := engine.Render(chart, top)
	if err != nil {
		return "", err
	}
	// The helpers and notes render no objects.
	for name := range files {
		if b := path.Base(name); strings.HasPrefix(b, "_") || b == "NOTES.txt" {
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return "", err
	}
	if len(hooks) > 0 {
		return "", fmt.Errorf("the chart has %d hooks; santa.yaml could not hold them", len(hooks))
	}
	var b strings.Builder
	for _, m := range manifests {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Name, m.Content)
	}
	return b.String(), nil
}

// plainHeader heads santa.yaml: where it comes from, so that nobody edits
// it by hand.
const plainHeader = `# Santa on Kubernetes: santad on every node. Generated from the Helm chart
# helm/santa with its default values (kubernetes.PlainValues): edit the
# chart, then run "go run ./cmd/render > santa.yaml" in deploy/kubernetes.
# Install: kubectl apply -f santa.yaml (README.md).
`

// Plain is santa.yaml: the chart at dir rendered for PlainRelease with
// PlainValues.
func Plain(dir string) (string, error) {
	out, err := Render(dir, PlainRelease, PlainValues())
	if err != nil {
		return "", err
	}
	return plainHeader + out, nil
}
