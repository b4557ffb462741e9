// Command render prints the plain manifests, santa.yaml: the chart
// rendered with its default values and the release's Namespace (see
// kubernetes.PlainValues). Run from deploy/kubernetes:
//
//	go run ./cmd/render > santa.yaml
package main

import (
	"fmt"
	"os"

	"github.com/santa-offload/santa/deploy/kubernetes"
)

func main() {
	out, err := kubernetes.Plain(kubernetes.ChartDir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "render: %v\n", err)
		os.Exit(1)
	}
	fmt.Print(out)
}
