// SPDX-License-Identifier: Apache-2.0

package docs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// readme returns README.md.
func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section returns the text of README's "## name" section.
func section(t *testing.T, doc, name string) string {
	t.Helper()
	i := strings.Index(doc, "\n## "+name+"\n")
	if i < 0 {
		t.Fatalf("README has no section %q", name)
	}
	rest := doc[i+len(name)+5:]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// funcBody returns the source of fn's body between its braces, without
// a trailing "// Output:" comment, and the file's import paths.
func funcBody(t *testing.T, name, src, fn string) (string, []string) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
	if err != nil {
		t.Fatalf("%s does not parse: %v", name, err)
	}
	var imports []string
	for _, im := range f.Imports {
		imports = append(imports, im.Path.Value)
	}
	slices.Sort(imports)
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == fn {
			body := src[fset.Position(fd.Body.Lbrace).Offset+1 : fset.Position(fd.Body.Rbrace).Offset]
			body = regexp.MustCompile(`(?m)^\s*// Output:.*\n`).ReplaceAllString(body, "")
			return strings.TrimSpace(body), imports
		}
	}
	t.Fatalf("%s has no func %s", name, fn)
	return "", nil
}

// README's Quick start comes first, installs the command and the library,
// and its program is the Example of this package, so it compiles and
// prints what README says it prints.
func TestQuickStartIsExample(t *testing.T) {
	doc := readme(t)
	first := regexp.MustCompile(`(?m)^## .*$`).FindString(doc)
	if first != "## Quick start" {
		t.Errorf("README's first section is %q, want ## Quick start", first)
	}
	qs := section(t, doc, "Quick start")
	for _, want := range []string{
		"go install github.com/sluicehq/sluice/cmd/sluice@latest",
		"go get github.com/sluicehq/sluice@latest",
		"sluice serve",
		"10 admitted, 2 refused; retry in 1s",
	} {
		if !strings.Contains(qs, want) {
			t.Errorf("Quick start does not say %q", want)
		}
	}
	m := regexp.MustCompile("(?s)```go\n(package main\n.*?)```").FindStringSubmatch(qs)
	if m == nil {
		t.Fatal("Quick start has no ```go block with a package main program")
	}
	got, gotImports := funcBody(t, "README.md Quick start", m[1], "main")
	src, err := os.ReadFile("quickstart_test.go")
	if err != nil {
		t.Fatal(err)
	}
	want, wantImports := funcBody(t, "quickstart_test.go", string(src), "Example")
	if got != want {
		t.Errorf("README's Quick start program differs from docs/quickstart_test.go's Example:\nREADME:\n%s\n\nExample:\n%s", got, want)
	}
	if !slices.Equal(gotImports, wantImports) {
		t.Errorf("imports: README %v, Example %v", gotImports, wantImports)
	}
}

// README keeps make test as the test command, and says how long the
// laptop path takes.
func TestDevelopmentSection(t *testing.T) {
	dev := section(t, readme(t), "Development")
	for _, want := range []string{"make test", "make quick", "SLUICE_CHROMIUM", "redis-server"} {
		if !strings.Contains(dev, want) {
			t.Errorf("Development does not mention %s", want)
		}
	}
}
