// SPDX-License-Identifier: Apache-2.0

package server

import (
	"fmt"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
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
