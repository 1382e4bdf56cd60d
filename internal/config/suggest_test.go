// SPDX-License-Identifier: Apache-2.0

package config

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestSuggest(t *testing.T) {
	known := []string{"unit", "requests_per_unit", "burst", "algorithm", "unlimited", "name"}
	for _, c := range []struct{ word, want string }{
		{"request_per_unit", "requests_per_unit"},
		{"requests-per-unit", "requests_per_unit"},
		{"Burst", "burst"},
		{"burts", "burst"},
		{"algoritm", "algorithm"},
		{"units", "unit"},
		{"colour", ""},
		{"nme", "name"},
		{"x", ""},
	} {
		if got := suggest(c.word, known); got != c.want {
			t.Errorf("suggest(%q) = %q, want %q", c.word, got, c.want)
		}
	}
}

// An unknown field that is a typo of a known one names it.
func TestUnknownFieldSuggests(t *testing.T) {
	_, err := Load(fsOf("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, request_per_unit: 5}\n"))
	want := "f0.yaml:4: descriptors[0].rate_limit.request_per_unit: unknown field (did you mean requests_per_unit?)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want a line %q", err, want)
	}
	_, err = Load(fsOf("domian: d\n"))
	if err == nil || !strings.Contains(err.Error(), "domian: unknown field (did you mean domain?)") {
		t.Errorf("error %v, want domian to suggest domain", err)
	}
}

// TestDescriptorFieldInsideRateLimitNamesItsPlace: envoyproxy/ratelimit
// checks every key of a file against one list for every level, so
// shadow_mode or detailed_metric written inside rate_limit loads there and
// does nothing (the rule is enforced). sluice refused it as an unknown
// field, saying nothing of where it goes, as it already did for
// quota_mode.
func TestDescriptorFieldInsideRateLimitNamesItsPlace(t *testing.T) {
	for _, field := range []string{"shadow_mode", "detailed_metric", "value_to_metric", "share_threshold", "quota_mode"} {
		y := "domain: d\ndescriptors:\n  - key: a\n    value: 'x*'\n    rate_limit: {unit: second, requests_per_unit: 1, " + field + ": true}\n"
		_, err := Load(fstest.MapFS{"a.yaml": {Data: []byte(y)}})
		want := "a.yaml:5: descriptors[0].rate_limit." + field + ": " + field + " belongs on the descriptor, beside rate_limit"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s inside rate_limit: %v; want %s", field, err, want)
		}
	}
}
