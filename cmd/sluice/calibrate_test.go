package main

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/config"
)

func TestCalibrateWritesLoadableYAML(t *testing.T) {
	dir := t.TempDir()
	yamlFile := filepath.Join(dir, "calibrated.yaml")
	code, out, errOut := runSluice(t, "", "calibrate", "--algorithm", "token-bucket", "--keep", "100%", "--yaml", yamlFile, "--domain", "rider-api", "--descriptor", "rider_id", filepath.Join("..", "..", "examples", "rider.trace"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"8 requests (8 units) from 1 keys", "algorithm token-bucket, limit 8, period 1s, burst 7", "0 of 8 requests refused"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	c, err := config.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := c.Match("rider-api", []config.Entry{{Key: "rider_id", Value: "r1"}})
	if r == nil || r.Policy.Limit != 8 || r.Policy.Burst != 7 {
		t.Fatalf("loaded rule %+v", r)
	}
}

func TestCalibrateStdinJSONL(t *testing.T) {
	log := `{"ts":"2026-01-01T00:00:00Z","user":"a"}
{"ts":"2026-01-01T00:00:00.5Z","user":"a"}
{"ts":"2026-01-01T00:00:02Z","user":"b"}
`
	code, out, errOut := runSluice(t, log, "calibrate", "--algorithm", "fixed-window", "--format", "jsonl", "--time-field", "ts", "--key-field", "user")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "algorithm fixed-window, limit 2, period 1s") {
		t.Errorf("report:\n%s", out)
	}
}

func TestCalibrateErrors(t *testing.T) {
	for _, tt := range []struct {
		stdin string
		args  []string
		code  int
		want  string
	}{
		{"", []string{}, 2, "--algorithm is required"},
		{"", []string{"--algorithm", "x"}, 2, `--algorithm "x": unknown`},
		{"", []string{"--algorithm", "gcra", "--keep", "120%"}, 2, "--keep: share"},
		{"", []string{"--algorithm", "gcra", "--format", "csv"}, 2, `--format "csv"`},
		{"", []string{"--algorithm", "gcra"}, 1, "no requests"},
		{"0 a\nzero b\n", []string{"--algorithm", "gcra"}, 1, `line 2: time "zero"`},
		{`{"t":1}` + "\n", []string{"--algorithm", "gcra", "--format", "jsonl", "--time-field", "t"}, 1, `line 1: missing key field "key"`},
	} {
		code, _, errOut := runSluice(t, tt.stdin, append([]string{"calibrate"}, tt.args...)...)
		if code != tt.code || !strings.Contains(errOut, tt.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and one line containing %q", tt.args, code, errOut, tt.code, tt.want)
		}
	}
}

func TestSimulate(t *testing.T) {
	out := filepath.Join(t.TempDir(), "x.svg")
	code, _, errOut := runSluice(t, "", "simulate", "--algorithm", "leaky-bucket", "--limit", "3000", "--period", "1s", "--burst", "5000", filepath.Join("..", "..", "examples", "gps.trace"), "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Rects []struct {
			Class string `xml:"class,attr"`
		} `xml:"rect"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, r := range doc.Rects {
		n[r.Class]++
	}
	// examples/README.md: 140 of 157 batches admitted (the first without
	// a delay), 17 refused.
	if n["req admitted"] != 1 || n["req delayed"] != 139 || n["req refused"] != 17 {
		t.Errorf("marks %v", n)
	}
	code, svg, errOut := runSluice(t, "", "simulate", "--algorithm", "fixed-window", "--limit", "2", "--period", "1s", "--pattern", "burst 3 at 0")
	if code != 0 || !strings.Contains(svg, `class="req refused"`) || !strings.HasPrefix(svg, "<svg") {
		t.Errorf("exit %d, stderr %s, svg %.80s", code, errOut, svg)
	}
	for _, args := range [][]string{
		{"--algorithm", "gcra", "--limit", "1", "--period", "1s"},
		{"--algorithm", "gcra", "--limit", "1", "--period", "1s", "--pattern", "burst"},
		{"--algorithm", "fixed-window", "--limit", "1", "--period", "1s", "--burst", "2", "--pattern", "burst 1"},
	} {
		if code, _, errOut := runSluice(t, "", append([]string{"simulate"}, args...)...); code != 2 || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line", args, code, errOut)
		}
	}
}
