// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
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
	for _, want := range []string{"8 requests (8 units) from 1 keys", "algorithm token-bucket, limit 1, period 1s, burst 8", "rate 1 per 1s: what 1 of 1 keys need over their busiest 1m0s (at most 8 units), rounded up", "0 of 8 requests refused"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	c, err := config.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := c.Match("rider-api", []config.Entry{{Key: "rider_id", Value: "r1"}})
	if r == nil || r.Policy.Limit != 1 || r.Policy.Burst != 8 {
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
		{"", []string{"--algorithm", "fixed-window", "--limit", "5"}, 2, `--limit is for token-bucket`},
		{"", []string{"--algorithm", "gcra"}, 1, "no requests"},
		{"0 a\nzero b\n", []string{"--algorithm", "gcra"}, 1, `line 2: time "zero"`},
		{`{"t":1}` + "\n", []string{"--algorithm", "gcra", "--format", "jsonl", "--time-field", "t"}, 1, `line 1: missing key field "key"`},
		{"0 a\n", []string{"--algorithm", "gcra", "--yaml", os.DevNull, "--domain", ""}, 2, `--domain "": the --yaml file's domain must not be empty`},
		{"0 a\n", []string{"--algorithm", "gcra", "--yaml", os.DevNull, "--descriptor", ""}, 2, `--descriptor "": the --yaml file's descriptor key must not be empty`},
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
	// Keys and titles with control characters or invalid UTF-8 still make
	// well-formed XML.
	for _, tc := range []struct{ stdin, title string }{{"0 k\x01x\n", "t"}, {"0 \xff\n", "t"}, {"0 k\n", "a\x01b"}} {
		code, svg, errOut := runSluice(t, tc.stdin, "simulate", "--algorithm", "token-bucket", "--limit", "5", "--period", "1s", "--title", tc.title, "-")
		d := xml.NewDecoder(strings.NewReader(svg))
		var err error
		for err == nil {
			_, err = d.Token()
		}
		if code != 0 || err != io.EOF {
			t.Errorf("%q, title %q: exit %d, stderr %q, XML error %v", tc.stdin, tc.title, code, errOut, err)
		}
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

// TestPicturesAreCurrent remakes every docs/*.svg from the command line in
// its <desc> (make pictures wrote both) and compares: the README's
// pictures stay what the models do.
func TestPicturesAreCurrent(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.svg"))
	if err != nil || len(files) < 10 {
		t.Fatalf("docs/*.svg: %d files, %v; want the pictures of make pictures", len(files), err)
	}
	for _, f := range files {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Desc string `xml:"desc"`
		}
		if err := xml.Unmarshal(want, &doc); err != nil || !strings.HasPrefix(doc.Desc, "sluice simulate ") {
			t.Fatalf("%s: no command line in <desc> (%v)", f, err)
		}
		args, err := unquoteFields(strings.TrimPrefix(doc.Desc, "sluice "))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for i, a := range args {
			if strings.HasSuffix(a, ".trace") {
				args[i] = filepath.Join("..", "..", a)
			}
		}
		code, got, errOut := runSluice(t, "", args...)
		if code != 0 {
			t.Fatalf("%s: %v: exit %d: %s", f, args, code, errOut)
		}
		// The <desc> names the trace as make pictures did, from the root.
		got = strings.ReplaceAll(got, filepath.Join("..", "..", "examples")+"/", "examples/")
		if got != string(want) {
			t.Errorf("%s is out of date: run make pictures", f)
		}
	}
}

// unquoteFields splits s into fields separated by spaces, each bare or in
// Go quotes.
func unquoteFields(s string) ([]string, error) {
	var out []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] != '"' {
			f, rest, _ := strings.Cut(s, " ")
			out = append(out, f)
			s = rest
			continue
		}
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", s, err)
		}
		u, _ := strconv.Unquote(q)
		out = append(out, u)
		s = s[len(q):]
	}
	return out, nil
}

// The access logs operators have, through the command.
func TestCalibrateAccessLogs(t *testing.T) {
	td := filepath.Join("..", "..", "calibrate", "testdata")
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--format", "combined", filepath.Join(td, "nginx-combined.log")},
			[]string{"5 requests (5 units) from 3 keys over 4s", "note: the times are in whole multiples of 1s"}},
		{[]string{"--format", "combined", "--key", "path", filepath.Join(td, "nginx-combined.log")},
			[]string{"from 3 keys"}},
		{[]string{"--format", "envoy", filepath.Join(td, "envoy-default.log")},
			[]string{"3 requests (3 units) from 2 keys over 0.49s"}},
		{[]string{"--log-format", `$remote_addr [$time_local] "$request" $status $request_time $msec "$http_x_api_key"`, "--key", "header:X-Api-Key", filepath.Join(td, "nginx-timed.log")},
			[]string{"3 requests (3 units) from 2 keys over 0.55s"}},
		{[]string{"--format", "jsonl", "--time-field", "start_time", "--key-field", "downstream_remote_address", "--key", "ip", filepath.Join(td, "envoy.jsonl")},
			[]string{"3 requests (3 units) from 2 keys"}},
	} {
		yamlFile := filepath.Join(dir, "c.yaml")
		args := append([]string{"calibrate", "--algorithm", "gcra", "--yaml", yamlFile}, c.args...)
		code, out, errOut := runSluice(t, "", args...)
		if code != exitOK {
			t.Errorf("%v: exit %d: %s", c.args, code, errOut)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: report lacks %q:\n%s", c.args, w, out)
			}
		}
	}
	// --key ip writes the descriptor Envoy's remote_address action sends.
	code, _, errOut := runSluice(t, "", "calibrate", "--algorithm", "gcra", "--format", "combined", "--yaml", filepath.Join(dir, "ip.yaml"), filepath.Join(td, "nginx-combined.log"))
	if code != exitOK {
		t.Fatal(errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "ip.yaml")); !strings.Contains(string(b), `- key: "remote_address"`) {
		t.Errorf("--key ip YAML:\n%s", b)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--format", "apache"}, `--format "apache": want trace, jsonl, common, combined or envoy`},
		{[]string{"--format", "combined", "--key", "header:x-api-key"}, "--key header:x-api-key: the log format has no $http_x_api_key"},
		{[]string{"--key", "ip"}, "--key: a trace's key is its second field"},
		{[]string{"--format", "combined", "--log-format", "$msec $remote_addr"}, "give one"},
		{[]string{"--format", "combined", "--key-field", "ip"}, "--key-field is for --format jsonl"},
	} {
		code, _, errOut := runSluice(t, "", append([]string{"calibrate", "--algorithm", "gcra"}, c.args...)...)
		if code != exitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

func TestSimulateZoomFlags(t *testing.T) {
	base := []string{"simulate", "--algorithm", "fixed-window", "--limit", "1", "--period", "1s", "--pattern", "burst 2 at 0.5"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--from", "1"}, "--from and --to go together"},
		{[]string{"--from", "x", "--to", "2"}, `--from "x": want seconds`},
		{[]string{"--from", "2s", "--to", "1"}, "--to 1s: must be after --from 2s"},
	} {
		code, _, errOut := runSluice(t, "", append(base, c.args...)...)
		if code != exitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
	code, out, errOut := runSluice(t, "", append(base, "--from", "250ms", "--to", "1.25")...)
	if code != exitOK || !strings.Contains(out, `>0.3s</text>`) || !strings.Contains(out, "window boundary (1s)") {
		t.Errorf("zoomed: exit %d, stderr %q, svg lacks its axis start or boundary", code, errOut)
	}
}
