package kubernetes

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// newObject is an empty object of each kind the chart and the examples may
// hold, by apiVersion and kind: any other is an error.
var newObject = map[[2]string]func() any{
	{"v1", "Namespace"}:       func() any { return new(corev1.Namespace) },
	{"v1", "ServiceAccount"}:  func() any { return new(corev1.ServiceAccount) },
	{"v1", "ConfigMap"}:       func() any { return new(corev1.ConfigMap) },
	{"v1", "Pod"}:             func() any { return new(corev1.Pod) },
	{"apps/v1", "DaemonSet"}:  func() any { return new(appsv1.DaemonSet) },
	{"apps/v1", "Deployment"}: func() any { return new(appsv1.Deployment) },
}

// docSep splits a YAML stream into documents.
var docSep = regexp.MustCompile(`(?m)^---[ \t]*$`)

// Decode splits a YAML stream into its objects and decodes each strictly
// into its Kubernetes API type, as the API server does: an unknown field,
// a field spelt in another case, a duplicate key or a value of the wrong
// type is an error naming the document. Documents holding only comments
// are skipped.
func Decode(stream string) ([]any, error) {
	var objs []any
	for i, doc := range docSep.Split(stream, -1) {
		js, err := yaml.YAMLToJSONStrict([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
			continue // comments only
		}
		obj, err := decodeObject(js)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// decodeObject decodes one object, by its apiVersion and kind.
func decodeObject(js []byte) (any, error) {
	var tm metav1.TypeMeta
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &tm); err != nil {
		return nil, err
	}
	newObj, ok := newObject[[2]string{tm.APIVersion, tm.Kind}]
	if !ok {
		return nil, fmt.Errorf("apiVersion %q kind %q is not a kind this chart renders", tm.APIVersion, tm.Kind)
	}
	obj := newObj()
	strict, err := kjson.UnmarshalStrict(js, obj)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	if len(strict) > 0 {
		return nil, fmt.Errorf("%s: %w", tm.Kind, errors.Join(strict...))
	}
	return obj, nil
}
