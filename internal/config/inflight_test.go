// SPDX-License-Identifier: Apache-2.0

package config

import (
	"strings"
	"testing"
	"time"
)

func TestInFlightRules(t *testing.T) {
	c := mustLoad(t, `domain: gateway
descriptors:
  - key: route
    value: GET /work
    rate_limit: {algorithm: concurrency, requests_per_unit: 20}
    descriptors:
      - key: remote_address
        rate_limit: {algorithm: adaptive-concurrency, floor: 2, ceiling: 50, holder_ttl: 30s, critical_reserve: 0.2, failure_mode: closed}
      - key: header:X-Api-Key
        rate_limit: {algorithm: adaptive-concurrency, floor: 1, ceiling: 8, controller: aimd, latency_threshold: 300ms}
`)
	rs := c.Rules()
	if len(rs) != 3 {
		t.Fatalf("%d rules, want 3", len(rs))
	}
	if f := rs[2].InFlight; f == nil || f.Controller != "aimd" || f.Threshold != 300*time.Millisecond {
		t.Fatalf("aimd rule: %+v", f)
	}
	if f := rs[0].InFlight; f == nil || f.Limit != 20 || f.Adaptive || f.TTL != 10*time.Second {
		t.Fatalf("fixed rule: %+v", f)
	}
	if f := rs[1].InFlight; f == nil || !f.Adaptive || f.Controller != "gradient" || f.Floor != 2 || f.Ceiling != 50 || f.TTL != 30*time.Second || f.Reserve != 0.2 {
		t.Fatalf("adaptive rule: %+v", f)
	}
	if rs[1].FailureMode.String() != "closed" {
		t.Fatalf("failure mode %v", rs[1].FailureMode)
	}
}

func TestInFlightErrors(t *testing.T) {
	rule := func(rl string) string {
		return "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {" + rl + "}\n"
	}
	for _, tc := range []struct{ rl, want string }{
		{"algorithm: concurrency", "descriptors[0].rate_limit.requests_per_unit: missing"},
		{"algorithm: concurrency, requests_per_unit: 0", "requests_per_unit: 0: must be between 1 and 4611686018427387904"},
		{"algorithm: concurrency, requests_per_unit: 5, unit: second", "rate_limit.unit: must not be set with algorithm concurrency"},
		{"algorithm: concurrency, requests_per_unit: 5, burst: 3", "rate_limit.burst: must not be set"},
		{"algorithm: concurrency, requests_per_unit: 5, floor: 3", "rate_limit.floor: only for algorithm adaptive-concurrency"},
		{"algorithm: adaptive-concurrency, ceiling: 5", "rate_limit.floor: missing"},
		{"algorithm: adaptive-concurrency, floor: 5", "rate_limit.ceiling: missing"},
		{"algorithm: adaptive-concurrency, floor: 5, ceiling: 4", "rate_limit.ceiling: 4: must be at least floor 5"},
		{"algorithm: adaptive-concurrency, floor: 0, ceiling: 4", "rate_limit.floor: 0: must be between 1 and 2147483647"},
		{"algorithm: adaptive-concurrency, floor: 1, ceiling: 4, requests_per_unit: 3", "requests_per_unit: must not be set with algorithm adaptive-concurrency"},
		{"algorithm: concurrency, requests_per_unit: 5, holder_ttl: 10ms", `rate_limit.holder_ttl: "10ms": want a duration of at least 1s`},
		{"algorithm: concurrency, requests_per_unit: 5, critical_reserve: 1.5", "rate_limit.critical_reserve: \"1.5\": want a fraction in [0, 1)"},
		{"unit: second, requests_per_unit: 5, ceiling: 9", "rate_limit.ceiling: only for algorithm concurrency or adaptive-concurrency"},
		{"algorithm: concurent, requests_per_unit: 5", `"concurent": want one of`},
		{"algorithm: adaptive-concurrency, floor: 1, ceiling: 4, controller: pid", `rate_limit.controller: "pid": want gradient or aimd`},
		{"algorithm: adaptive-concurrency, floor: 1, ceiling: 4, controller: aimd", "rate_limit.latency_threshold: missing"},
		{"algorithm: adaptive-concurrency, floor: 1, ceiling: 4, latency_threshold: 1s", "rate_limit.latency_threshold: only with controller aimd"},
		{"algorithm: adaptive-concurrency, floor: 1, ceiling: 4, controller: aimd, latency_threshold: -1s", `latency_threshold: "-1s": want a positive duration`},
		{"algorithm: concurrency, requests_per_unit: 4, controller: aimd", "rate_limit.controller: only for algorithm adaptive-concurrency"},
	} {
		_, err := Load(fsOf(rule(tc.rl)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("{%s}: error %v, want one containing %q", tc.rl, err, tc.want)
		}
	}
}
