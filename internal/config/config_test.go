// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/sluicehq/sluice"
)

func TestDefaultLoads(t *testing.T) {
	c, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]sluice.Algorithm{
		"rider-api.rider_id":       sluice.TokenBucket,
		"driver-location.city":     sluice.LeakyBucket,
		"admin.user":               sluice.FixedWindow,
		"partner-api.partner_acme": sluice.SlidingLog,
		"trip-history.rider_id":    sluice.SlidingWindow,
	}
	for key, alg := range want {
		found := false
		for _, r := range c.Rules() {
			if r.FullKey == key {
				found = true
				if r.Policy.Algorithm != alg {
					t.Errorf("%s: algorithm %s, want %s", key, r.Policy.Algorithm, alg)
				}
			}
		}
		if !found {
			t.Errorf("no rule %s in the defaults", key)
		}
	}
	if got := c.Summary(); got != "5 files, 5 domains, 9 rules" {
		t.Errorf("Summary() = %q", got)
	}
}

// TestEnvoyExamples loads configurations written like envoyproxy/ratelimit's
// documented examples and checks the rule each request descriptor gets.
func TestEnvoyExamples(t *testing.T) {
	c, err := LoadDir("testdata/envoy")
	if err != nil {
		t.Fatal(err)
	}
	type E = Entry
	for _, tc := range []struct {
		domain  string
		entries []Entry
		want    string // FullKey, or "" for no rule
	}{
		{"db_ops", []E{{"database", "accounts"}}, "db_ops.database_accounts"},
		{"db_ops", []E{{"database", "orders"}}, "db_ops.database"},
		{"db_ops", []E{{"table", "orders"}}, ""},
		{"db_ops", []E{{"database", "accounts"}, {"table", "x"}}, ""}, // deeper than the tree
		{"nope", []E{{"database", "accounts"}}, ""},
		{"sms", []E{{"kind", "promo"}, {"recipient", "+15550100"}}, "sms.kind_promo.recipient"},
		{"sms", []E{{"kind", "promo"}}, ""}, // shorter than the tree: no rule at that level
		{"sms", []E{{"kind", "receipt"}, {"recipient", "+15550100"}}, ""},
		{"sms", []E{{"recipient", "+15550100"}}, "sms.recipient"},
		{"mesh", []E{{"src", "checkout"}, {"dst", "payments"}}, "mesh.src_checkout.dst_payments"},
		{"mesh", []E{{"dst", "payments"}}, "mesh.dst_payments"},
		{"mesh", []E{{"src", "search"}, {"dst", "payments"}}, ""},
		{"mesh", []E{{"logged_in", "no"}, {"client_ip", "203.0.113.5"}}, "mesh.logged_in_no.client_ip"},
		{"mesh", []E{{"logged_in", "no"}, {"client_ip", "192.0.2.7"}}, "mesh.logged_in_no.client_ip_192.0.2.7"},
		{"mesh", []E{{"logged_in", "no"}, {"client_ip", "198.51.100.9"}}, "mesh.logged_in_no.client_ip_198.51.100.9"},
		{"paths", []E{{"path", "/reports/daily"}}, "paths.path_/reports/daily"}, // exact beats wildcard
		{"paths", []E{{"path", "/reports/weekly"}}, "paths.path_/reports/*"},
		{"paths", []E{{"path", "/reports/"}}, "paths.path_/reports/*"},
		{"paths", []E{{"path", "/trips"}}, "paths.path"},
		{"plans", []E{{"plan", "gold"}}, "plans.plan_gold"},
		{"plans", []E{{"plan", "silver"}}, ""},
	} {
		r := c.Match(tc.domain, tc.entries)
		got := ""
		if r != nil {
			got = r.FullKey
		}
		if got != tc.want {
			t.Errorf("Match(%s, %v) = %q, want %q", tc.domain, tc.entries, got, tc.want)
		}
	}

	rule := func(domain string, e ...Entry) *Rule {
		t.Helper()
		r := c.Match(domain, e)
		if r == nil {
			t.Fatalf("no rule for %s %v", domain, e)
		}
		return r
	}
	if r := rule("sms", E{"recipient", "x"}); r.Policy != (sluice.Policy{Name: "sms.recipient", Algorithm: sluice.FixedWindow, Limit: 50, Period: 24 * time.Hour}) || r.Unit != "day" || r.UnitMultiplier != 1 {
		t.Errorf("sms.recipient: %+v", r)
	}
	if r := rule("mesh", E{"logged_in", "no"}, E{"client_ip", "192.0.2.7"}); !r.Deny {
		t.Errorf("requests_per_unit 0 should deny: %+v", r)
	}
	if r := rule("mesh", E{"logged_in", "no"}, E{"client_ip", "198.51.100.9"}); !r.Unlimited {
		t.Errorf("unlimited: %+v", r)
	}
	if r := rule("trial", E{"tenant", "newco"}); !r.ShadowMode || r.DetailedMetric {
		t.Errorf("shadow: %+v", r)
	}
	if r := rule("trial", E{"tenant", "other"}); r.ShadowMode || !r.DetailedMetric {
		t.Errorf("detailed: %+v", r)
	}
	if r := rule("plans", E{"plan", "gold"}); r.Name != "gold_plan" || len(r.Replaces) != 1 || r.Replaces[0] != "per_user" {
		t.Errorf("replaces: %+v", r)
	}
}

func TestExtensions(t *testing.T) {
	c := mustLoad(t, `domain: d
descriptors:
  - key: a
    rate_limit: {period: 1500ms, requests_per_unit: 3, algorithm: gcra, burst: 7, failure_mode: closed}
  - key: b
    rate_limit: {period: 10m, requests_per_unit: 3}
`)
	a := c.Match("d", []Entry{{"a", "x"}})
	if a.Policy != (sluice.Policy{Name: "d.a", Algorithm: sluice.GCRA, Limit: 3, Period: 1500 * time.Millisecond, Burst: 7}) || a.FailureMode != sluice.FailClosed || a.Unit != "" {
		t.Errorf("a: %+v", a)
	}
	b := c.Match("d", []Entry{{"b", "x"}})
	if b.Unit != "minute" || b.UnitMultiplier != 10 || b.Policy.Algorithm != sluice.FixedWindow {
		t.Errorf("b: %+v", b)
	}
}

func mustLoad(t *testing.T, files ...string) *Config {
	t.Helper()
	c, err := Load(fsOf(files...))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func fsOf(files ...string) fstest.MapFS {
	m := fstest.MapFS{}
	for i, f := range files {
		m[fmt.Sprintf("f%d.yaml", i)] = &fstest.MapFile{Data: []byte(f)}
	}
	return m
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		want  []string // each a substring of one line of the error
	}{
		{"unknown field", []string{"domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, burts: 3}\n"},
			[]string{"f0.yaml:4: descriptors[0].rate_limit.burts: unknown field"}},
		{"colliding names", []string{"domain: d\ndescriptors:\n  - key: a_b\n    rate_limit: {unit: second, requests_per_unit: 1}\n  - key: a\n    value: b\n    rate_limit: {unit: minute, requests_per_unit: 5}\n"},
			[]string{`f0.yaml:7: descriptor: its full name "d.a_b" is also the name of the rule at f0.yaml:4`}},
		{"colliding names across domains", []string{"domain: d\ndescriptors:\n  - key: a.b\n    rate_limit: {unit: second, requests_per_unit: 1}\n", "domain: d.a\ndescriptors:\n  - key: b\n    rate_limit: {unit: second, requests_per_unit: 1}\n"},
			[]string{`its full name "d.a.b" is also the name of the rule at`}},
		{"unknown top-level field", []string{"domain: d\nrules: []\n"},
			[]string{"f0.yaml:2: rules: unknown field"}},
		{"wrong type", []string{"domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: lots\n"},
			[]string{`f0.yaml:6: descriptors[0].rate_limit.requests_per_unit: want a whole number, got "lots"`}},
		{"bool type", []string{"domain: d\ndescriptors:\n  - key: a\n    shadow_mode: yes please\n"},
			[]string{`f0.yaml:4: descriptors[0].shadow_mode: want true or false`}},
		{"bad unit", []string{"domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"},
			[]string{`f0.yaml:4: descriptors[0].rate_limit.unit: "fortnight": want second`}},
		{"bad algorithm", []string{"domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: bucket}\n"},
			[]string{`descriptors[0].rate_limit.algorithm: "bucket"`}},
		{"burst on a window", []string{"domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, burst: 4}\n"},
			[]string{`f0.yaml:4: descriptors[0].rate_limit.burst: policy "d.a": burst 4: fixed-window has no burst`}},
		{"unit and period", []string{"domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, period: 2s, requests_per_unit: 1}\n"},
			[]string{`descriptors[0].rate_limit.period: set unit or period, not both`}},
		{"bad period", []string{"domain: d\ndescriptors:\n  - key: a\n    rate_limit: {period: -2s, requests_per_unit: 1}\n"},
			[]string{`descriptors[0].rate_limit.period: "-2s": want a positive duration`}},
		{"no unit", []string{"domain: d\ndescriptors:\n  - key: a\n    rate_limit: {requests_per_unit: 1}\n"},
			[]string{`f0.yaml:4: descriptors[0].rate_limit.unit: missing`}},
		{"no requests", []string{"domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: hour}\n"},
			[]string{`descriptors[0].rate_limit.requests_per_unit: missing`}},
		{"negative", []string{"domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: hour, requests_per_unit: -1}\n"},
			[]string{`descriptors[0].rate_limit.requests_per_unit: -1: must be between 0 and 4611686018427387904 (0 refuses every request)`}},
		{"unlimited with unit", []string{"domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: hour, unlimited: true}\n"},
			[]string{`descriptors[0].rate_limit.unit: must not be set on an unlimited rate_limit`}},
		{"bad failure mode", []string{"domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: hour, requests_per_unit: 1, failure_mode: maybe}\n"},
			[]string{`descriptors[0].rate_limit.failure_mode: "maybe": want local, open or closed`}},
		{"empty key", []string{"domain: d\ndescriptors:\n  - value: x\n"},
			[]string{`f0.yaml:3: descriptors[0].key: missing or empty`}},
		{"duplicate descriptor", []string{"domain: d\ndescriptors:\n  - key: a\n  - key: a\n"},
			[]string{`f0.yaml:4: descriptors[1]: duplicate descriptor "d.a" at this level: f0.yaml:3 (descriptors[0]) already defines it`}},
		{"duplicate wildcard", []string{"domain: d\ndescriptors:\n  - {key: a, value: x*}\n  - {key: a, value: x*}\n"},
			[]string{`f0.yaml:4: descriptors[1]: duplicate descriptor "d.a_x*" at this level: f0.yaml:3 (descriptors[0]) already defines it`}},
		{"duplicate nested descriptor", []string{"domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - {key: b, value: v}\n      - {key: c}\n      - {key: b, value: v}\n"},
			[]string{`f0.yaml:7: descriptors[0].descriptors[2]: duplicate descriptor "d.a.b_v" at this level: f0.yaml:5 (descriptors[0].descriptors[0]) already defines it`}},
		{"duplicate field", []string{"domain: d\ndomain: e\n"},
			[]string{`f0.yaml:2: domain: duplicate field`}},
		{"missing domain", []string{"descriptors: []\n"},
			[]string{`f0.yaml:1: domain: missing or empty`}},
		{"empty file", []string{""},
			[]string{`f0.yaml:1: domain: missing (the file is empty)`}},
		{"syntax", []string{"domain: d\ndescriptors: [\n"},
			[]string{`f0.yaml:2: YAML syntax: did not find expected node content`}},
		{"replaces itself", []string{"domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: hour, requests_per_unit: 1, name: n, replaces: [{name: n}]}\n"},
			[]string{`descriptors[0].rate_limit.replaces[0].name: "n" is this rule's own name`}},
		{"replaces empty", []string{"domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: hour, requests_per_unit: 1, replaces: [{}]}\n"},
			[]string{`descriptors[0].rate_limit.replaces[0].name: missing or empty`}},
		{"descriptors not a list", []string{"domain: d\ndescriptors: {key: a}\n"},
			[]string{`f0.yaml:2: descriptors: want a list, got a mapping`}},
		{"duplicate domain", []string{"domain: d\n", "domain: d\n"},
			[]string{`f1.yaml:1: domain: "d" is already defined in f0.yaml`}},
		{"nested error", []string{"domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n        rate_limit: {unit: hour, requests_per_unit: 1, colour: red}\n"},
			[]string{`f0.yaml:6: descriptors[0].descriptors[0].rate_limit.colour: unknown field`}},
		{"two errors, two files", []string{"domain: d\nx: 1\n", "domain: e\ny: 2\n"},
			[]string{"f0.yaml:2: x: unknown field", "f1.yaml:2: y: unknown field"}},
		{"second document", []string{"domain: d\n---\ndomain: e\n"},
			[]string{"f0.yaml:2: a second YAML document"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(fsOf(tc.files...))
			if err == nil {
				t.Fatal("loaded; want an error")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Errorf("%d error lines, want %d:\n%v", len(lines), len(tc.want), err)
			}
			for _, w := range tc.want {
				found := false
				for _, l := range lines {
					found = found || strings.Contains(l, w)
				}
				if !found {
					t.Errorf("error %q\nhas no line containing %q", err, w)
				}
			}
		})
	}
}

// TestSyntaxErrorLine: a YAML syntax error names the file and the line of
// the mistake as file:line:, as every other error does. yaml.v3's own
// "line N" named the line where the enclosing collection starts (0-based
// for the parser's errors, 1-based for the scanner's, and none for line 1),
// and the error had no file:line: form.
func TestSyntaxErrorLine(t *testing.T) {
	for _, c := range []struct {
		name, yaml, want string
	}{
		{"entry indented by 3, not 4", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 1}\n  - key: b\n   rate_limit: {unit: minute, requests_per_unit: 1}\n",
			"rules.yaml:6: YAML syntax: did not find expected '-' indicator"},
		{"tab for indentation", "domain: d\ndescriptors:\n  - key: a\n\trate_limit: {unit: minute, requests_per_unit: 1}\n",
			"rules.yaml:4: YAML syntax: found a tab character that violates indentation"},
		{"flow mapping never closed", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 1\n  - key: b\n    rate_limit: {unit: minute, requests_per_unit: 1}\n",
			"rules.yaml:4: YAML syntax: did not find expected ',' or '}'"},
		{"comma missing in a flow sequence", "domain: d\ndescriptors: [\n  {key: a},\n  {key: b}\n  {key: c}]\n",
			"rules.yaml:4: YAML syntax: did not find expected ',' or ']'"},
		// The parser reads past blank lines and comments before it
		// reports the stray scalar.
		{"stray scalar before blank lines", "domain: d\ndescriptors:\n  - key: a\n    value: x\n   bad\n\n# c\n\n  - key: b\n",
			"rules.yaml:5: YAML syntax: did not find expected '-' indicator"},
		{"mistake on line 1", "a: b: c\n", "rules.yaml:1: YAML syntax: mapping values are not allowed in this context"},
		{"quote never closed", "domain: d\ndescriptors:\n  - key: a\n    value: 'x\n", "rules.yaml:4: YAML syntax: found unexpected end of stream"},
		{"unknown alias", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: *nope\n", "rules.yaml:4: YAML syntax: unknown anchor 'nope' referenced"},
		{"in a second document", "domain: d\n---\ndomain: e\n  x: 1\n", "rules.yaml:4: YAML syntax: mapping values are not allowed in this context"},
	} {
		_, err := Load(fstest.MapFS{"rules.yaml": {Data: []byte(c.yaml)}})
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: error %v, want %s", c.name, err, c.want)
		}
	}
}

// TestSyntaxErrorLineLargeFile: in a large file, a flow sequence left open
// near the top is reported at its line, after a few dozen decodes (not one
// per line), and a mistake near the end at its own line.
func TestSyntaxErrorLineLargeFile(t *testing.T) {
	const n = 5000 // one decode per line would take minutes
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors: [\n")
	for i := range n {
		fmt.Fprintf(&b, "  {key: k, value: v%d, rate_limit: {unit: second, requests_per_unit: 5}},\n", i)
	}
	start := time.Now()
	_, err := Load(fstest.MapFS{"big.yaml": {Data: []byte(b.String())}})
	if want := "big.yaml:2: YAML syntax: "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("open flow sequence: %v, want %s...", err, want)
	}
	t.Logf("open flow sequence in %d lines: %v", n+2, time.Since(start))
	b.Reset()
	b.WriteString("domain: d\ndescriptors:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - key: k\n    value: v%d\n", i)
	}
	b.WriteString("   - key: b\n")
	if want := fmt.Sprintf("big.yaml:%d: YAML syntax: ", 2*n+3); !strings.Contains(fmt.Sprint(loadErr(b.String())), want) {
		t.Errorf("mistake on the last line: %v, want %s...", loadErr(b.String()), want)
	}
}

func loadErr(yaml string) error {
	_, err := Load(fstest.MapFS{"big.yaml": {Data: []byte(yaml)}})
	return err
}

func TestLoadDirSkipsHiddenAndOthers(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "domain: a\n")
	write("b.yml", "domain: b\n")
	write(".a.yaml.swp", "garbage: [")
	write("README.md", "not yaml: [")
	// A Kubernetes ConfigMap: the visible name is a symlink into ..data.
	if err := os.MkdirAll(filepath.Join(dir, "..2026_01_01", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	write("..2026_01_01/c.yaml", "domain: c\n")
	if err := os.Symlink("..2026_01_01", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/c.yaml", filepath.Join(dir, "c.yaml")); err != nil {
		t.Fatal(err)
	}
	c, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Domains(), ","); got != "a,b,c" {
		t.Errorf("domains %s, want a,b,c", got)
	}

	if _, err := LoadDir(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no .yaml or .yml files") {
		t.Errorf("empty directory: %v", err)
	}
	if _, err := LoadDir(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing directory loaded")
	}
}

// TestLoadsWhatYAMLv2Loads: files envoyproxy/ratelimit loads (it decodes
// them with yaml.v2, YAML 1.1, and its key check lets a null through)
// load, each with the meaning yaml.v2 gives it: a file ending in a
// document marker "---" (its first document), "rate_limit:" with nothing
// after it on a descriptor that only nests others (no limit there),
// "value:" with nothing after it (the key alone), and YAML 1.1's
// booleans (yes, no, on, off) in the boolean fields. sluice refused each.
// Real mistakes still fail: a second document with something in it (a
// domain yaml.v2 would not read), a quoted "yes", a word that is no
// boolean.
func TestLoadsWhatYAMLv2Loads(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		check      func(t *testing.T, c *Config)
	}{
		{"trailing document marker",
			"domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n---\n",
			func(t *testing.T, c *Config) {
				if r := c.Match("d", []Entry{{"a", "x"}}); r == nil || r.Policy.Limit != 1 {
					t.Errorf("d.a: %+v", r)
				}
			}},
		{"empty documents and a comment after the first",
			"domain: d\n---\n# nothing more\n---\n",
			func(t *testing.T, c *Config) {
				if got := c.Domains(); len(got) != 1 || got[0] != "d" {
					t.Errorf("domains %v", got)
				}
			}},
		{"null rate_limit on a nesting descriptor",
			"domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n    descriptors:\n      - key: b\n        rate_limit: {unit: second, requests_per_unit: 1}\n",
			func(t *testing.T, c *Config) {
				if r := c.Match("d", []Entry{{"a", "x"}}); r != nil {
					t.Errorf("d.a has a rule: %+v", r)
				}
				if r := c.Match("d", []Entry{{"a", "x"}, {"b", "y"}}); r == nil || r.Policy.Limit != 1 {
					t.Errorf("d.a.b: %+v", r)
				}
			}},
		{"null value",
			"domain: d\ndescriptors:\n  - key: a\n    value:\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
			func(t *testing.T, c *Config) {
				if r := c.Match("d", []Entry{{"a", "anything"}}); r == nil || r.FullKey != "d.a" {
					t.Errorf("d.a: %+v", r)
				}
			}},
		{"YAML 1.1 booleans",
			"domain: d\ndescriptors:\n  - key: a\n    shadow_mode: yes\n    detailed_metric: off\n    rate_limit: {unit: second, requests_per_unit: 1}\n  - key: b\n    shadow_mode: On\n    rate_limit: {unlimited: Y}\n  - key: c\n    shadow_mode: NO\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
			func(t *testing.T, c *Config) {
				if r := c.Match("d", []Entry{{"a", "x"}}); r == nil || !r.ShadowMode || r.DetailedMetric {
					t.Errorf("d.a: want shadow mode and no detailed metric: %+v", r)
				}
				if r := c.Match("d", []Entry{{"b", "x"}}); r == nil || !r.ShadowMode || !r.Unlimited {
					t.Errorf("d.b: want shadow mode, unlimited: %+v", r)
				}
				if r := c.Match("d", []Entry{{"c", "x"}}); r == nil || r.ShadowMode {
					t.Errorf("d.c in shadow mode: %+v", r)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(fstest.MapFS{"a.yaml": {Data: []byte(tc.yaml)}})
			if err != nil {
				t.Fatalf("envoyproxy/ratelimit loads this file; sluice: %v", err)
			}
			tc.check(t, c)
		})
	}
	for yaml, want := range map[string]string{
		"domain: d\n---\ndomain: e\n": "a.yaml:2: a second YAML document",
		"domain: d\n--- {}\n":         "a.yaml:2: a second YAML document",
		"domain: d\ndescriptors:\n  - key: a\n    shadow_mode: 'yes'\n    rate_limit: {unit: second, requests_per_unit: 1}\n": `a.yaml:4: descriptors[0].shadow_mode: want true or false, got "yes"`,
		"domain: d\ndescriptors:\n  - key: a\n    shadow_mode: maybe\n    rate_limit: {unit: second, requests_per_unit: 1}\n": `a.yaml:4: descriptors[0].shadow_mode: want true or false, got "maybe"`,
		"domain: d\ndescriptors:\n  - key:\n    rate_limit: {unit: second, requests_per_unit: 1}\n":                           "a.yaml:3: descriptors[0].key: want a string, got null",
	} {
		if _, err := Load(fstest.MapFS{"a.yaml": {Data: []byte(yaml)}}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want %s", yaml, err, want)
		}
	}
}

// TestEmptyDirHintsRuntimeSubdirectory: --config (or sluice config check)
// given what envoyproxy/ratelimit calls RUNTIME_ROOT/RUNTIME_SUBDIRECTORY,
// or RUNTIME_ROOT, whose files sit in config/ below it ("Configuration
// files are loaded from RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/
// RUNTIME_APPDIRECTORY/*.yaml", its README). sluice answered "no .yaml or
// .yml files" and stopped there; the error names the directory that holds
// them.
func TestEmptyDirHintsRuntimeSubdirectory(t *testing.T) {
	root := t.TempDir()
	sub := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, "a.yaml"), []byte("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(root, "ratelimit"), root} {
		_, err := LoadDir(dir)
		if err == nil || !strings.Contains(err.Error(), "no .yaml or .yml files") || !strings.Contains(err.Error(), sub) {
			t.Errorf("LoadDir(%s): %v; want it to name %s, where the .yaml files are", dir, err, sub)
		}
	}
	// Deeper than RUNTIME_ROOT's layout, or nothing below: no hint.
	if _, err := LoadDir(filepath.Dir(root)); err != nil && strings.Contains(err.Error(), sub) {
		t.Errorf("three levels up: %v", err)
	}
	empty := t.TempDir()
	if _, err := LoadDir(empty); err == nil || strings.Contains(err.Error(), "subdirectories") {
		t.Errorf("empty directory: %v", err)
	}
}

func TestUnits(t *testing.T) {
	for _, tc := range []struct {
		unit string
		d    time.Duration
	}{{"second", time.Second}, {"MINUTE", time.Minute}, {"hour", time.Hour}, {"day", 24 * time.Hour}, {"week", 7 * 24 * time.Hour}, {"month", 30 * 24 * time.Hour}, {"year", 365 * 24 * time.Hour}} {
		c := mustLoad(t, fmt.Sprintf("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: %s, requests_per_unit: 7}\n", tc.unit))
		r := c.Match("d", []Entry{{"k", "v"}})
		if r.Policy.Period != tc.d || r.UnitMultiplier != 1 || !strings.EqualFold(r.Unit, tc.unit) {
			t.Errorf("unit %s: %+v", tc.unit, r)
		}
	}
}

func TestRulePath(t *testing.T) {
	c := mustLoad(t, "domain: d\ndescriptors:\n  - key: a\n    value: x*\n    descriptors:\n      - key: b\n        rate_limit: {unit: hour, requests_per_unit: 1}\n      - key: c\n        value: y\n        rate_limit: {unit: hour, requests_per_unit: 1}\n")
	var got []string
	for _, r := range c.Rules() {
		got = append(got, fmt.Sprint(r.Path))
	}
	if s := strings.Join(got, " "); s != "[{a x*} {b }] [{a x*} {c y}]" {
		t.Errorf("paths %s", s)
	}
}

func TestAnchorsAliasesAndMerges(t *testing.T) {
	c := mustLoad(t, `domain: d
descriptors:
  - key: a
    rate_limit: &base {unit: minute, requests_per_unit: 10, name: base}
  - key: b
    rate_limit:
      <<: *base
      name: b
      requests_per_unit: 20
  - key: c
    rate_limit:
      <<: [*base, {unit: hour, algorithm: sliding-window}]
      name: c
  - &dleaf
    key: e
    value: x
    rate_limit: {unit: second, requests_per_unit: 1}
`)
	for _, tc := range []struct {
		key, name string
		limit     int64
		period    time.Duration
		alg       sluice.Algorithm
	}{
		{"a", "base", 10, time.Minute, sluice.FixedWindow},
		{"b", "b", 20, time.Minute, sluice.FixedWindow},
		{"c", "c", 10, time.Minute, sluice.SlidingWindow},
	} {
		r := c.Match("d", []Entry{{tc.key, "v"}})
		if r == nil || r.Name != tc.name || r.Policy.Limit != tc.limit || r.Policy.Period != tc.period || r.Policy.Algorithm != tc.alg {
			t.Errorf("%s: %+v", tc.key, r)
		}
	}

	// Nested aliases that would expand to billions of nodes are refused.
	bomb := "domain: d\ndescriptors:\n  - key: l0\n    descriptors: &l0 [{key: k, rate_limit: {unit: second, requests_per_unit: 1}}]\n"
	for i := 1; i < 12; i++ {
		var items []string
		for j := 0; j < 10; j++ {
			items = append(items, fmt.Sprintf("{key: k%d, descriptors: *l%d}", j, i-1))
		}
		bomb += fmt.Sprintf("  - key: l%d\n    descriptors: &l%d [%s]\n", i, i, strings.Join(items, ", "))
	}
	_, err := Load(fsOf(bomb))
	if err == nil || !strings.Contains(err.Error(), "too many alias expansions") || strings.Contains(err.Error(), "\n") {
		t.Errorf("alias bomb: want only the alias error, got %.300v", err)
	}

	// The same with merge keys: each mapping merges the previous one twice.
	bomb = "domain: d\nm0: &m0 {a0: 1, b0: 2}\n"
	for i := 1; i < 30; i++ {
		bomb += fmt.Sprintf("m%d: &m%d {<<: [*m%d, *m%d], a%d: 1}\n", i, i, i-1, i-1, i)
	}
	_, err = Load(fsOf(bomb))
	if err == nil || !strings.Contains(err.Error(), "too many alias expansions") || strings.Contains(err.Error(), "\n") {
		t.Errorf("merge bomb: want only the alias error, got %.300v", err)
	}
}

// A large file with no aliases is not mistaken for an alias bomb: only the
// nodes aliases add count towards maxWork, not the nodes written.
func TestLargeFileWithoutAliases(t *testing.T) {
	const n = 30000
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - key: k\n    value: v%d\n    rate_limit:\n      unit: second\n      requests_per_unit: 5\n", i)
	}
	b.WriteString("  - key: base\n    rate_limit: &base {unit: minute, requests_per_unit: 7}\n")
	b.WriteString("  - key: aliased\n    rate_limit: *base\n")
	c := mustLoad(t, b.String())
	if got := len(c.Rules()); got != n+2 {
		t.Fatalf("%d rules, want %d", got, n+2)
	}
	if r := c.Match("d", []Entry{{"k", fmt.Sprint("v", n-1)}}); r == nil || r.Policy.Limit != 5 {
		t.Errorf("last descriptor: %+v", r)
	}
	if r := c.Match("d", []Entry{{"aliased", ""}}); r == nil || r.Policy.Limit != 7 || r.Policy.Period != time.Minute {
		t.Errorf("aliased descriptor: %+v", r)
	}
}

func TestSameFiles(t *testing.T) {
	a := "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n"
	b := "domain: b\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n"
	load := func(fsys fstest.MapFS) *Config {
		t.Helper()
		c, err := Load(fsys)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	base := load(fsOf(a, b))
	if !base.SameFiles(load(fsOf(a, b))) {
		t.Error("the same files loaded twice differ")
	}
	withIgnored := fsOf(a, b)
	withIgnored["notes.txt"] = &fstest.MapFile{Data: []byte("not configuration")}
	if !base.SameFiles(load(withIgnored)) {
		t.Error("a file that is not configuration made a difference")
	}
	for name, fsys := range map[string]fstest.MapFS{
		"one byte more":             fsOf(a, b+"\n"),
		"files swapped":             fsOf(b, a),
		"file renamed":              {"f0.yaml": {Data: []byte(a)}, "g1.yaml": {Data: []byte(b)}},
		"file dropped":              fsOf(a),
		"bytes moved between files": {"f0.yaml": {Data: []byte(a + "#")}, "f1.yaml": {Data: []byte(b[:len(b)-1])}},
	} {
		if base.SameFiles(load(fsys)) {
			t.Errorf("%s: counts as the same files", name)
		}
	}
	var none *Config
	if base.SameFiles(none) || none.SameFiles(base) || !none.SameFiles(nil) {
		t.Error("nil: SameFiles is wrong")
	}
}

// TestWholeNumberWrittenAsFloat: a whole number written as a float
// (1e3, 100.0) loads as that number in every whole-number field, as
// envoyproxy/ratelimit's yaml.v2 decodes it into its integer fields
// (README, "Coming from envoyproxy/ratelimit": "the same files load with
// the same meaning"). On main the file did not load: "requests_per_unit:
// want a whole number, got "1e3"". A float that is not a whole number
// (1.5, which yaml.v2 would cut to 1) is refused (TestRangeErrors).
func TestWholeNumberWrittenAsFloat(t *testing.T) {
	const ints = `domain: d
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1000, algorithm: token-bucket, burst: 2500, unit_multiplier: 10, shards: 4, usage_thresholds: [50, 90]}
  - key: b
    rate_limit: {unit: month, requests_per_unit: 100, calendar: true, anchor_day: 15}
  - key: c
    rate_limit: {unit: year, requests_per_unit: 1, calendar: true, anchor_month: 4, anchor_day: 6}
  - key: e
    rate_limit: {algorithm: adaptive-concurrency, floor: 1, ceiling: 200}
  - key: f
    rate_limit: {algorithm: concurrency, requests_per_unit: 5}
`
	floats := strings.NewReplacer(
		"1000,", "1e3,", "2500,", "2.5e3,", "10,", "10.0,", "4,", "4.0,", "[50, 90]", "[50.0, 9e1]",
		"100,", "100.,", "15}", "1.50E1}", "1,", "+1.0,", "6}", "600e-2}",
		"200}", "2e2}", "5}", "5.0}",
	).Replace(ints)
	want, err := Load(fstest.MapFS{"a.yaml": {Data: []byte(ints)}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Load(fstest.MapFS{"a.yaml": {Data: []byte(floats)}})
	if err != nil {
		t.Fatalf("%v\nwant it loaded as\n%s", err, ints)
	}
	if len(got.Rules()) != len(want.Rules()) {
		t.Fatalf("%d rules, want %d", len(got.Rules()), len(want.Rules()))
	}
	for i, r := range got.Rules() {
		if !reflect.DeepEqual(r, want.Rules()[i]) {
			t.Errorf("rule %d written with floats:\n%+v\nwant it as written with whole numbers:\n%+v", i, r, want.Rules()[i])
		}
	}

	// wholeFloat's edges: exactly whole, or beyond 64 bits, or neither.
	for _, tc := range []struct {
		s           string
		v           int64
		whole, over bool
	}{
		{"1e3", 1000, true, false},
		{"100.0", 100, true, false},
		{"5.", 5, true, false},
		{"+.5e1", 5, true, false},
		{"12.50e1", 125, true, false},
		{"-0.0e99999999999", 0, true, false},
		{"9.223372036854775807e18", math.MaxInt64, true, false},
		{"-9.223372036854775808E18", math.MinInt64, true, false},
		{"9.223372036854775808e18", 0, false, true},
		{"1e19", 0, false, true},
		{"1e99999999999", 0, false, true},
		{"1.25e1", 0, false, false},
		{"100.00000000000000001", 0, false, false},
		{"1e-99999999999", 0, false, false},
		{".inf", 0, false, false},
		{".nan", 0, false, false},
	} {
		if v, whole, over := wholeFloat(tc.s); v != tc.v || whole != tc.whole || over != tc.over {
			t.Errorf("wholeFloat(%q) = %d, whole %v, over %v; want %d, %v, %v", tc.s, v, whole, over, tc.v, tc.whole, tc.over)
		}
	}
}

// TestRangeErrors: a whole number out of a field's range is named with the
// field and the value as written, and the error says the field's real
// range, in one line. On main requests_per_unit: 99999999999999999999 said
// "want a whole number" (it is one: too large); a limit over the largest
// said "must be between 1 and …", though 0 is allowed (it refuses every
// request); a negative one "must not be negative" with no upper bound.
func TestRangeErrors(t *testing.T) {
	const max = "4611686018427387904" // sluice.MaxLimit
	for _, tc := range []struct{ limit, want string }{
		{"{unit: hour, requests_per_unit: 99999999999999999999}",
			"requests_per_unit: 99999999999999999999: must be between 0 and " + max + " (0 refuses every request)"},
		{"{unit: hour, requests_per_unit: -99999999999999999999}",
			"requests_per_unit: -99999999999999999999: must be between 0 and " + max + " (0 refuses every request)"},
		{"{unit: hour, requests_per_unit: 9223372036854775807}",
			"requests_per_unit: 9223372036854775807: must be between 0 and " + max + " (0 refuses every request)"},
		{"{unit: hour, requests_per_unit: -1}",
			"requests_per_unit: -1: must be between 0 and " + max + " (0 refuses every request)"},
		{`{unit: hour, requests_per_unit: "x"}`,
			`requests_per_unit: want a whole number, got "x"`},
		{"{unit: hour, requests_per_unit: 1.5}",
			`requests_per_unit: want a whole number, got "1.5"`},
		{"{unit: hour, requests_per_unit: 1e30}",
			"requests_per_unit: 1e30: must be between 0 and " + max + " (0 refuses every request)"},
		{"{unit: hour, requests_per_unit: -1.0}",
			"requests_per_unit: -1: must be between 0 and " + max + " (0 refuses every request)"},
		{"{unit: hour, requests_per_unit: .inf}",
			`requests_per_unit: want a whole number, got ".inf"`},
		{"{unit: hour, requests_per_unit: 10, algorithm: token-bucket, burst: 2.5}",
			`burst: want a whole number, got "2.5"`},
		{"{unit: second, requests_per_unit: 1, shards: 1e-3}",
			`shards: want a whole number, got "1e-3"`},
		{"{algorithm: adaptive-concurrency, floor: 1, ceiling: 20.5}",
			`ceiling: want a whole number, got "20.5"`},
		{"{unit: hour, requests_per_unit: 10, usage_thresholds: [50.5]}",
			`usage_thresholds[0]: want a whole number, got "50.5"`},
		{"{unit: hour, requests_per_unit: 10, algorithm: token-bucket, burst: 99999999999999999999}",
			"burst: 99999999999999999999: must be between 0 and " + max + " (0 means the limit)"},
		{"{unit: hour, requests_per_unit: 10, algorithm: token-bucket, burst: -1}",
			"burst: -1: must be between 0 and " + max + " (0 means the limit)"},
		{"{algorithm: concurrency, requests_per_unit: 99999999999999999999}",
			"requests_per_unit: 99999999999999999999: must be between 1 and " + max},
		{"{unit: second, requests_per_unit: 1, unit_multiplier: 99999999999999999999}",
			"unit_multiplier: 99999999999999999999: 99999999999999999999 × second is longer than the longest period, 320255h58m24.606846976s (at most 1152921504)"},
		{"{unit: second, requests_per_unit: 1, unit_multiplier: -99999999999999999999}",
			"unit_multiplier: -99999999999999999999: must be at least 1"},
		{"{unit: second, requests_per_unit: 1, shards: 99999999999999999999}",
			"shards: 99999999999999999999: must be between 1 and 64"},
		{"{unit: month, requests_per_unit: 1, calendar: true, anchor_day: 99999999999999999999}",
			"anchor_day: 99999999999999999999: must be between 1 and 31"},
		{"{algorithm: adaptive-concurrency, floor: 1, ceiling: 2147483648}",
			"ceiling: 2147483648: must be between 1 and 2147483647"},
		{"{unit: hour, requests_per_unit: 10, usage_thresholds: [99999999999999999999]}",
			"usage_thresholds[0]: 99999999999999999999: want a percentage from 1 to 100"},
		{"{unit: second, requests_per_unit: 1, unit_multiplier: 1.5}",
			`unit_multiplier: want a whole number, got "1.5"`},
		{`{unit: month, requests_per_unit: 1, calendar: true, anchor_day: "x"}`,
			`anchor_day: want a whole number, got "x"`},
		{"{unit: year, requests_per_unit: 1, calendar: true, anchor_month: 4.5}",
			`anchor_month: want a whole number, got "4.5"`},
	} {
		_, err := Load(fsOf("domain: d\ndescriptors:\n  - key: a\n    rate_limit: " + tc.limit + "\n"))
		if err == nil {
			t.Errorf("%s: loaded; want an error", tc.limit)
			continue
		}
		lines := strings.Split(err.Error(), "\n")
		if want := "f0.yaml:4: descriptors[0].rate_limit." + tc.want; !strings.Contains(lines[0], want) || len(lines) != 1 {
			t.Errorf("%s:\n%v\nwant one line with %s", tc.limit, err, want)
		}
	}
}
