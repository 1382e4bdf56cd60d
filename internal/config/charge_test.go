// SPDX-License-Identifier: Apache-2.0

package config

import (
	"strings"
	"testing"
)

// TestCountRefused: rate_limit.count_refused sets Rule.CountRefused, is off
// by default, and is refused where nothing is counted.
func TestCountRefused(t *testing.T) {
	c, err := Load(fsOf(`domain: llm
descriptors:
  - key: tenant
    rate_limit: {unit: month, requests_per_unit: 1000000, count_refused: true}
  - key: other
    rate_limit: {unit: month, requests_per_unit: 10, count_refused: false}
`))
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Match("llm", []Entry{{Key: "tenant", Value: "a"}}); r == nil || !r.CountRefused {
		t.Errorf("tenant: %+v", r)
	}
	if r := c.Match("llm", []Entry{{Key: "other", Value: "a"}}); r == nil || r.CountRefused {
		t.Errorf("other: %+v", r)
	}
	for _, bad := range []string{
		"{unlimited: true, count_refused: true}",
		"{algorithm: concurrency, requests_per_unit: 5, count_refused: true}",
	} {
		_, err := Load(fsOf("domain: d\ndescriptors:\n  - key: k\n    rate_limit: " + bad + "\n"))
		if err == nil || !strings.Contains(err.Error(), "count_refused") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
