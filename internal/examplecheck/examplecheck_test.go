// SPDX-License-Identifier: Apache-2.0

package examplecheck_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/internal/examplecheck"
)

// Every Example in this module that states an output is run by go test.
func TestModule(t *testing.T) {
	problems, err := examplecheck.Check(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

func TestCheck(t *testing.T) {
	problems, err := examplecheck.Check(filepath.Join("testdata", "tree"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, fmt.Sprintf("%s:%d %s", filepath.Base(p.Pos.Filename), p.Pos.Line, p.Example))
	}
	want := []string{"bad_test.go:7 ExampleGlued", "bad_test.go:13 ExampleAfter"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("problems %q, want %q", got, want)
	}
}

func ExampleCheck() {
	problems, err := examplecheck.Check(filepath.Join("testdata", "tree", "bad"))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range problems {
		fmt.Println(p.Example)
	}
	// Output:
	// ExampleGlued
	// ExampleAfter
}
