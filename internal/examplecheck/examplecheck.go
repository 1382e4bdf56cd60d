// SPDX-License-Identifier: Apache-2.0

// Package examplecheck finds Example functions that say what they print
// but that go test never runs.
//
// go test runs an Example only when the last comment of its body is a
// comment group that begins with "Output:" (or "Unordered output:").
// Otherwise the Example is compiled and silently skipped: a comment glued
// to the output line, a comment after it, or a misspelt name makes a
// documented output that nothing checks. Check flags each Example that has
// an output line go test does not recognise; the module's own test runs
// it over the whole tree.
package examplecheck

import (
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// outputLine is go test's test for an output comment line.
var outputLine = regexp.MustCompile(`(?i)^[[:space:]]*(unordered )?output:`)

// A Problem is an Example with an output comment that go test ignores.
type Problem struct {
	Pos     token.Position // where the Example function is declared
	Example string         // its name, e.g. "ExampleRun"
}

// String says where the Example is and why go test does not run it.
func (p Problem) String() string {
	return fmt.Sprintf("%s: %s has an Output: comment that go test does not see, so it never runs (the output must be the last comment of the body and begin its own comment group)", p.Pos, p.Example)
}

// Check parses the _test.go files under root (skipping testdata, and
// directories whose names begin with "." or "_", as the go tool does) and
// returns the Examples whose output comment go test would not recognise,
// sorted by position.
func Check(root string) ([]Problem, error) {
	var problems []Problem
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		p, err := checkDir(path)
		problems = append(problems, p...)
		return err
	})
	sort.Slice(problems, func(i, j int) bool {
		a, b := problems[i].Pos, problems[j].Pos
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		return a.Line < b.Line
	})
	return problems, err
}

// checkDir checks the _test.go files of one directory.
func checkDir(dir string) ([]Problem, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil || len(names) == 0 {
		return nil, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, n := range names {
		f, err := parser.ParseFile(fset, n, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	// What go test runs: doc.Examples applies its rules.
	runs := map[string]bool{}
	for _, ex := range doc.Examples(files...) {
		if ex.Output != "" || ex.EmptyOutput {
			runs["Example"+ex.Name] = true // Name holds any suffix
		}
	}
	var problems []Problem
	for _, f := range files {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Example") {
				continue
			}
			if hasOutputLine(f, fn) && !runs[fn.Name.Name] {
				problems = append(problems, Problem{Pos: fset.Position(fn.Pos()), Example: fn.Name.Name})
			}
		}
	}
	return problems, nil
}

// hasOutputLine reports whether a comment inside fn's body has a line
// that go test would read as the start of an output.
func hasOutputLine(f *ast.File, fn *ast.FuncDecl) bool {
	for _, cg := range f.Comments {
		if cg.Pos() < fn.Body.Lbrace || cg.End() > fn.Body.Rbrace {
			continue
		}
		for _, c := range cg.List {
			text := strings.TrimPrefix(strings.TrimPrefix(c.Text, "//"), "/*")
			for _, line := range strings.Split(text, "\n") {
				if outputLine.MatchString(line) {
					return true
				}
			}
		}
	}
	return false
}
