// SPDX-License-Identifier: Apache-2.0

package config

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestMatchWildcard: patterns × values, against envoyproxy/ratelimit's
// meaning of "*" (any run of characters, the empty run included).
func TestMatchWildcard(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		yes     []string
		no      []string
	}{
		{"foo*", []string{"foo", "foo1", "foobar", "foo*"}, []string{"fo", "afoo", "Foo", ""}},
		{"*", []string{"", "x", "anything at all"}, nil},
		{"*b", []string{"b", "ab", "bbb"}, []string{"ba", ""}},
		{"bar*b", []string{"barb", "barXb", "barbb", "bar-b-b"}, []string{"bar", "barbx", "bab", "xbarb"}},
		{"/api*v1", []string{"/apiv1", "/api/users/v1", "/api-v1"}, []string{"/api/v2", "/apiv1/", "api/v1"}},
		{"svc*ep*rpc", []string{"svceprpc", "svc1ep2rpc", "svc-ep-ep-rpc", "svcepXrpc"}, []string{"svcrpc", "svc1rpc", "svcep", "xsvceprpc", "svcepr"}},
		// Overlap: the parts may not share characters.
		{"ab*ba", []string{"abba", "abXba"}, []string{"aba", "ab"}},
		{"a*a*a", []string{"aaa", "abaca"}, []string{"aa", "a"}},
		{"**", []string{"", "x"}, nil},
		{"t*prod", []string{"tprod", "team-prod"}, []string{"t-dev", "prodt"}},
	} {
		parts := strings.Split(tc.pattern, "*")
		for _, v := range tc.yes {
			if !matchWildcard(parts, v) || !MatchValue(tc.pattern, v) {
				t.Errorf("%q does not match %q; want a match", tc.pattern, v)
			}
		}
		for _, v := range tc.no {
			if matchWildcard(parts, v) || MatchValue(tc.pattern, v) {
				t.Errorf("%q matches %q; want none", tc.pattern, v)
			}
		}
	}
	if !MatchValue("", "x") || !MatchValue("x", "x") || MatchValue("x", "y") {
		t.Error("MatchValue: exact and any-value cases wrong")
	}
}

// wildcardRegexp is an independent oracle for matchWildcard.
func wildcardRegexp(pattern string) *regexp.Regexp {
	parts := strings.Split(pattern, "*")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(`^(?s:` + strings.Join(parts, ".*") + `)$`)
}

// FuzzMatchWildcard: matchWildcard agrees with a regular expression that
// says the same thing.
func FuzzMatchWildcard(f *testing.F) {
	for _, s := range [][2]string{{"foo*", "foobar"}, {"bar*b", "barb"}, {"svc*ep*rpc", "svc1ep2rpc"}, {"a*a*a", "aa"}, {"*", ""}, {"ab*ba", "aba"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, value string) {
		// The oracle reads UTF-8; matchWildcard compares bytes, which
		// agrees on valid UTF-8.
		pattern, value = strings.ToValidUTF8(pattern, "?"), strings.ToValidUTF8(value, "?")
		if !strings.Contains(pattern, "*") {
			pattern += "*"
		}
		got := matchWildcard(strings.Split(pattern, "*"), value)
		if want := wildcardRegexp(pattern).MatchString(value); got != want {
			t.Fatalf("matchWildcard(%q, %q) = %v, want %v", pattern, value, got, want)
		}
	})
}

func load2026(t *testing.T) *Config {
	t.Helper()
	c, err := LoadDir("testdata/envoy-2026")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestWildcardPrecedence: an exact value beats every wildcard, wildcards
// are tried in configuration order, and the key alone comes last.
func TestWildcardPrecedence(t *testing.T) {
	c := load2026(t)
	type E = Entry
	for _, tc := range []struct {
		entries []Entry
		want    string
	}{
		{[]E{{"wild", "foo"}}, "wild.wild_foo*"},
		{[]E{{"wild", "foobar"}}, "wild.wild_foo*"},
		{[]E{{"wild", "bar"}}, ""},
		{[]E{{"noWild", "foo"}}, "wild.noWild_foo"},
		{[]E{{"noWild", "foo1"}}, ""},
		{[]E{{"noVal", "anything"}}, "wild.noVal"},
		{[]E{{"midWild", "barb"}}, "wild.midWild_bar*b"},
		{[]E{{"midWild", "bar-x-b"}}, "wild.midWild_bar*b"},
		{[]E{{"midWild", "bar-x"}}, ""},
		{[]E{{"order", "ab"}}, "wild.order_ab"},  // exact first
		{[]E{{"order", "axb"}}, "wild.order_a*"}, // both wildcards match: the first listed
		{[]E{{"order", "xb"}}, "wild.order_*b"},  // only the second
		{[]E{{"order", "xyz"}}, "wild.order"},    // neither: the key alone
		{[]E{{"other", "foo"}}, ""},              // a wildcard needs its key
		{[]E{{"wild", "foo"}, {"x", "y"}}, ""},   // longer than the tree
		{[]E{{"share", "files/a"}}, ""},          // another domain's key
		{[]E{{"files", "files/a"}}, ""},          // wrong domain (wild)
	} {
		r := c.Match("wild", tc.entries)
		got := ""
		if r != nil {
			got = r.FullKey
		}
		if got != tc.want {
			t.Errorf("%v: rule %q, want %q", tc.entries, got, tc.want)
		}
	}
}

// TestEnvoy2026Fields: quota_mode, share_threshold, value_to_metric and
// metadata land on the rules, level by level.
func TestEnvoy2026Fields(t *testing.T) {
	c := load2026(t)
	type E = Entry
	r := c.Match("share", []E{{"path", "path/1"}, {"file", "file/2"}, {"type", "jpg"}})
	if r == nil || r.FullKey != "share.path_path/*.file_file/*.type" {
		t.Fatalf("nested shared rule: %+v", r)
	}
	if want := []Level{{ShareThreshold: true}, {}, {}}; !reflect.DeepEqual(r.Levels, want) || !r.Shared() {
		t.Errorf("levels %+v, want %+v", r.Levels, want)
	}
	r = c.Match("share", []E{{"route", "api/v1"}, {"method", "GET"}})
	if want := []Level{{ShareThreshold: true, ValueToMetric: true}, {}}; r == nil || !reflect.DeepEqual(r.Levels, want) {
		t.Errorf("route levels: %+v", r)
	}
	if r := c.Match("share", []E{{"unshared", "u/1"}}); r == nil || r.Shared() {
		t.Errorf("unshared: %+v", r)
	}
	if r := c.Match("share", []E{{"file", "test1"}}); r == nil || r.FullKey != "share.file_test1" || r.Shared() {
		t.Errorf("explicit value under a shared wildcard: %+v", r)
	}
	if r := c.Match("share", []E{{"file", "test2"}}); r == nil || r.FullKey != "share.file_test*" || !r.Shared() {
		t.Errorf("shared wildcard: %+v", r)
	}

	a := c.Match("quota", []E{{"backend", "a"}})
	if a == nil || !a.QuotaMode || !reflect.DeepEqual(a.Metadata, map[string]any{"backend": "a"}) {
		t.Errorf("quota rule: %+v", a)
	}
	if r := c.Match("quota", []E{{"tenant", "t"}}); r == nil || r.QuotaMode || r.Metadata != nil {
		t.Errorf("ordinary rule: %+v", r)
	}
	if r := c.Match("quota", []E{{"blocked", "x"}}); r == nil || !r.QuotaMode || !r.Deny {
		t.Errorf("zero-limit quota rule: %+v", r)
	}

	m := c.Match("meta", []E{{"key2", "v"}})
	want := map[string]any{"service_with_quota": map[string]any{"name": "service_2", "weights": []any{1, 2.5}, "enabled": true}}
	if m == nil || !reflect.DeepEqual(m.Metadata, want) {
		t.Errorf("nested metadata: %#v", m)
	}
	if r := c.Match("meta", []E{{"key1", "value1"}, {"subkey1", "x"}}); r == nil || !reflect.DeepEqual(r.Metadata, map[string]any{"name": "service_1"}) {
		t.Errorf("default's metadata: %+v", r)
	}
	if r := c.Match("meta", []E{{"key1", "value1"}, {"subkey1", "subvalue1"}}); r == nil || r.Metadata != nil {
		t.Errorf("the specific value has no metadata: %+v", r)
	}
}

func TestUnitMultiplier(t *testing.T) {
	c := load2026(t)
	r := c.Match("mult", []Entry{{"key1", "x"}})
	if r == nil || r.Policy.Period != 5*time.Minute || r.Policy.Limit != 20 || r.Unit != "minute" || r.UnitMultiplier != 5 {
		t.Errorf("key1: %+v", r)
	}
	if r := c.Match("mult", []Entry{{"key2", "x"}}); r == nil || r.Policy.Period != time.Minute || r.UnitMultiplier != 1 {
		t.Errorf("key2: %+v", r)
	}
}

func TestMergeDomains(t *testing.T) {
	if _, err := LoadDir("testdata/merge"); err == nil || !strings.Contains(err.Error(), `b-key2.yaml:1: domain: "test-domain" is already defined in testdata/merge/a-key1.yaml`) {
		t.Errorf("without merging: %v", err)
	}
	c, err := LoadDir("testdata/merge", WithMergeDomains())
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Summary(); got != "2 files, 1 domain, 3 rules" {
		t.Errorf("Summary() = %q", got)
	}
	for entries, want := range map[Entry]string{
		{"key1", "value1"}: "test-domain.key1_value1",
		{"key2", "value2"}: "test-domain.key2_value2",
		{"key3", "prefix"}: "test-domain.key3_pre*",
		{"key2", "other"}:  "",
	} {
		got := ""
		if r := c.Match("test-domain", []Entry{entries}); r != nil {
			got = r.FullKey
		}
		if got != want {
			t.Errorf("%v: %q, want %q", entries, got, want)
		}
	}
	_, err = LoadDir("testdata/merge-dup", WithMergeDomains())
	want := `testdata/merge-dup/b.yaml:6: descriptors[1]: duplicate descriptor: domain "test-domain" is merged from several files and testdata/merge-dup/a.yaml:4 (descriptors[0]) already defines it`
	if err == nil || err.Error() != want {
		t.Errorf("duplicate across files:\n got %v\nwant %s", err, want)
	}
	// Merging happens only at the top: the same key/value nested in two
	// files is fine under different parents.
	if _, err := Load(fsOf("domain: d\ndescriptors:\n  - key: a\n    descriptors: [{key: x, rate_limit: {unit: hour, requests_per_unit: 1}}]\n",
		"domain: d\ndescriptors:\n  - key: b\n    descriptors: [{key: x, rate_limit: {unit: hour, requests_per_unit: 1}}]\n"), WithMergeDomains()); err != nil {
		t.Error(err)
	}
	// A wildcard written the same way twice is a duplicate; written
	// differently it is another descriptor.
	_, err = Load(fsOf("domain: d\ndescriptors: [{key: a, value: x*, rate_limit: {unit: hour, requests_per_unit: 1}}]\n",
		"domain: d\ndescriptors: [{key: a, value: x*, rate_limit: {unit: hour, requests_per_unit: 2}}, {key: a, value: x*y, rate_limit: {unit: hour, requests_per_unit: 2}}]\n"), WithMergeDomains())
	if err == nil || !strings.Contains(err.Error(), "f1.yaml:2: descriptors[0]: duplicate descriptor") || strings.Count(err.Error(), "\n") != 0 {
		t.Errorf("duplicate wildcard across files: %v", err)
	}
}

func TestEnvoy2026Errors(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
	}{
		{"share on an exact value", "domain: d\ndescriptors:\n  - key: a\n    value: x\n    share_threshold: true\n    rate_limit: {unit: hour, requests_per_unit: 1}\n",
			`f0.yaml:5: descriptors[0].share_threshold: the value "x" is not a wildcard`},
		{"share on any value", "domain: d\ndescriptors:\n  - key: a\n    share_threshold: true\n",
			`f0.yaml:4: descriptors[0].share_threshold: the value "" is not a wildcard`},
		{"share not a bool", "domain: d\ndescriptors:\n  - key: a\n    value: x*\n    share_threshold: yes please\n",
			`f0.yaml:5: descriptors[0].share_threshold: want true or false, got "yes please"`},
		{"quota_mode not a bool", "domain: d\ndescriptors:\n  - key: a\n    quota_mode: 1\n",
			`f0.yaml:4: descriptors[0].quota_mode: want true or false, got "1"`},
		{"quota_mode in rate_limit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: hour, requests_per_unit: 1, quota_mode: true}\n",
			`f0.yaml:4: descriptors[0].rate_limit.quota_mode: quota_mode belongs on the descriptor, beside rate_limit`},
		{"value_to_metric not a bool", "domain: d\ndescriptors:\n  - key: a\n    value_to_metric: [x]\n",
			`f0.yaml:4: descriptors[0].value_to_metric: want true or false, got a list`},
		{"metadata not a mapping", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: hour, requests_per_unit: 1}\n    metadata: [a, b]\n",
			`f0.yaml:5: descriptors[0].metadata: want a mapping, got a list`},
		{"metadata without a limit", "domain: d\ndescriptors:\n  - key: a\n    metadata: {name: x}\n",
			`f0.yaml:4: descriptors[0].metadata: the descriptor has no rate_limit`},
		{"zero unit_multiplier", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 5, unit_multiplier: 0}\n",
			`f0.yaml:4: descriptors[0].rate_limit.unit_multiplier: 0: must be at least 1`},
		{"unit_multiplier with period", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {period: 2s, requests_per_unit: 5, unit_multiplier: 2}\n",
			`f0.yaml:4: descriptors[0].rate_limit.unit_multiplier: goes with unit, not period`},
		{"unit_multiplier on unlimited", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unlimited: true, unit_multiplier: 2}\n",
			`f0.yaml:4: descriptors[0].rate_limit.unit_multiplier: must not be set on an unlimited rate_limit`},
		{"metadata key not a string", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: hour, requests_per_unit: 1}\n    metadata: {x: {1: y}}\n",
			`f0.yaml:5: descriptors[0].metadata: `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(fsOf(tc.file))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %v\nwant one line starting %q", err, tc.want)
			}
		})
	}
}
