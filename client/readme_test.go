package client_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The README's Go example, built in a module of its own as an application
// outside this repository builds it: the public packages it names must be
// all it needs. Its requirements are examples/go/hello's, which needs the
// same packages; the build is offline (GOPROXY=off), from the module cache.
func TestREADMEGoExampleBuildsInAnotherModule(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := bytes.Cut(readme, []byte("```go\n"))
	snippet, _, closed := bytes.Cut(rest, []byte("```\n"))
	if !ok || !closed {
		t.Fatal("README.md has no ```go block")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(root, "examples/go/hello", f))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, f), b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	main := append(append([]byte("package main\n\n"), snippet...), "\nfunc main() {}\n"...)
	if err := os.WriteFile(filepath.Join(dir, "main.go"), main, 0o644); err != nil {
		t.Fatal(err)
	}
	// go test puts its own go first on PATH.
	for _, args := range [][]string{
		{"mod", "edit", "-replace", "github.com/santa-offload/santa=" + root},
		{"build", "-o", os.DevNull, "."},
	} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly", "GOPROXY=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %v: %v\n%s\nmain.go:\n%s", args, err, out, main)
		}
	}
}
