// SPDX-License-Identifier: Apache-2.0

package config

import (
	"testing"

	"github.com/sluicehq/sluice"
)

// TestFailureModes: a rule without failure_mode fails local (an Envoy
// ratelimit config, which has no such field, loads with it); local, open and
// closed are spelled out.
func TestFailureModes(t *testing.T) {
	c, err := Load(fsOf(`domain: d
descriptors:
  - key: envoy
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: local
    rate_limit: {unit: minute, requests_per_unit: 5, failure_mode: local}
  - key: open
    rate_limit: {unit: minute, requests_per_unit: 5, failure_mode: open}
  - key: closed
    rate_limit: {unit: minute, requests_per_unit: 5, failure_mode: closed}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]sluice.FailureMode{"envoy": sluice.FailLocal, "local": sluice.FailLocal, "open": sluice.FailOpen, "closed": sluice.FailClosed}
	for _, r := range c.Rules() {
		if m, ok := want[r.FullKey[len("d."):]]; !ok || r.FailureMode != m {
			t.Errorf("rule %s: failure mode %v, want %v", r.FullKey, r.FailureMode, m)
		}
	}
	if DefaultFailureMode != sluice.FailLocal {
		t.Errorf("DefaultFailureMode %v", DefaultFailureMode)
	}
}
