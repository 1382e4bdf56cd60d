// SPDX-License-Identifier: Apache-2.0

package server

import (
	"fmt"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// descs builds descriptors, one per key/value list.
func descs(kvs ...[]string) []*rlcommon.RateLimitDescriptor {
	ds := make([]*rlcommon.RateLimitDescriptor, len(kvs))
	for i, kv := range kvs {
		ds[i] = desc(kv...)
	}
	return ds
}

func TestResponseHeaders(t *testing.T) {
	h := start(t, map[string]string{"rides.yaml": ridesYAML}, WithResponseHeaders(true))
	show := func(kvs ...[]string) string {
		t.Helper()
		var s string
		r := h.should(t, "rides", descs(kvs...)...)
		for _, hv := range r.ResponseHeadersToAdd {
			s += fmt.Sprintf("%s: %s\n", hv.Key, hv.Value)
		}
		return s
	}
	// Token bucket 2/s, burst 3: after one request, 2 left, full again in
	// 0.5 s (rounded up to 1); the city window: 99 left, resets in 60 s.
	got := show([]string{"rider", "r1"}, []string{"city", "paris"})
	want := `RateLimit-Policy: "rider";q=3;w=2, "rides.city";q=100;w=60
RateLimit: "rider";r=2;t=1, "rides.city";r=99;t=60
X-RateLimit-Limit: 3
X-RateLimit-Remaining: 2
X-RateLimit-Reset: 1
`
	if got != want {
		t.Errorf("admitted:\n%s\nwant:\n%s", got, want)
	}
	show([]string{"rider", "r1"})
	show([]string{"rider", "r1"})
	// Over: only the violated rule carries t; Retry-After is its wait.
	got = show([]string{"rider", "r1"}, []string{"city", "paris"})
	want = `RateLimit-Policy: "rider";q=3;w=2, "rides.city";q=100;w=60
RateLimit: "rider";r=0;t=1, "rides.city";r=99
Retry-After: 1
X-RateLimit-Limit: 3
X-RateLimit-Remaining: 0
X-RateLimit-Reset: 1
`
	if got != want {
		t.Errorf("refused:\n%s\nwant:\n%s", got, want)
	}
	// No enforced rule: no headers.
	if got := show([]string{"nothing", "x"}, []string{"city", "atlantis"}); got != "" {
		t.Errorf("no rules: %q", got)
	}
}

// TestHeadersOnZeroLimitRefusal: with --response-headers --legacy-headers
// (envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED), a request
// refused by a rule of requests_per_unit: 0 reports that descriptor, as
// envoy does (an OVER_LIMIT descriptor is the one its headers describe,
// remaining 0): limit 0, remaining 0, the reset of its unit, and
// Retry-After. sluice left zero-limit rules out of the headers: the 429
// said "X-RateLimit-Remaining: 2" and no Retry-After (a client pacing from
// the headers retried at once), and with the zero-limit descriptor alone
// it carried no headers at all.
func TestHeadersOnZeroLimitRefusal(t *testing.T) {
	h := start(t, map[string]string{"d.yaml": `domain: d
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: blocked
    rate_limit: {unit: minute, requests_per_unit: 0}
`}, WithResponseHeaders(true))
	h.clock.Advance(15 * time.Second)
	headers := func(r *rls.RateLimitResponse) map[string]string {
		m := map[string]string{}
		for _, hv := range r.GetResponseHeadersToAdd() {
			m[hv.GetKey()] = hv.GetValue()
		}
		return m
	}
	for _, c := range []struct {
		name string
		ds   []*rlcommon.RateLimitDescriptor
	}{
		{"with a rule of 2 a minute", descs([]string{"k", "a"}, []string{"blocked", "a"})},
		{"alone", descs([]string{"blocked", "a"})},
	} {
		r := h.should(t, "d", c.ds...)
		if r.GetOverallCode() != rls.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("%s: %s, want OVER_LIMIT", c.name, codesOf(r))
		}
		got := headers(r)
		for k, want := range map[string]string{"X-RateLimit-Limit": "0", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "45", "Retry-After": "45"} {
			if got[k] != want {
				t.Errorf("%s: %s %q, want %q (all: %v)", c.name, k, got[k], want, got)
			}
		}
	}
}
