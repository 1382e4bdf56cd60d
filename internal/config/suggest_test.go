// SPDX-License-Identifier: Apache-2.0

package config

import (
	"strings"
	"testing"
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
