// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice"
)

// TestLeaseAndShardsExact: rules with lease: true and shards: 3 admit
// exactly their limit under 64 concurrent clients, and the leased rule
// decides most requests without the store.
func TestLeaseAndShardsExact(t *testing.T) {
	h := start(t, map[string]string{"a.yaml": `domain: d
descriptors:
  - key: leased
    rate_limit: {unit: day, requests_per_unit: 1000, lease: true}
  - key: sharded
    rate_limit: {unit: day, requests_per_unit: 1000, shards: 3}
`})
	for _, key := range []string{"leased", "sharded"} {
		const clients, perClient = 64, 40
		var ok atomic.Int64
		var wg sync.WaitGroup
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range perClient {
					resp, err := h.client.ShouldRateLimit(context.Background(), &rls.RateLimitRequest{Domain: "d", Descriptors: []*rlcommon.RateLimitDescriptor{desc(key, "one")}})
					if err != nil {
						t.Error(err)
						return
					}
					if resp.GetOverallCode() == rls.RateLimitResponse_OK {
						ok.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		if ok.Load() != 1000 {
			t.Errorf("%s: admitted %d, want exactly 1000", key, ok.Load())
		}
	}
	body := h.get(t, "/metrics")
	for _, want := range []string{
		`sluice_lease_units_total{domain="d",kind="spent",policy="d.leased"} 1000`,
		`sluice_lease_local_decisions_total{domain="d",policy="d.leased"}`,
		`sluice_lease_store_calls_total{domain="d",policy="d.leased"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "sluice_lease_") && strings.Contains(line, "d.sharded") {
			t.Errorf("/metrics has a lease counter for a rule without lease: %s", line)
		}
	}
	sn := h.srv.snap.Load()
	for r, l := range sn.limiters {
		s := h.srv.leases.Stats(l.Policy())
		if r.FullKey == "d.leased" && s.Local < 10*s.StoreCalls {
			t.Errorf("leased rule: %+v, want most decisions local", s)
		}
		if want := map[string]int{"d.leased": 1, "d.sharded": 3}[r.FullKey]; h.srv.plan.shards(l.Policy()) != want && want > 1 {
			t.Errorf("%s: %d shards, want %d", r.FullKey, h.srv.plan.shards(l.Policy()), want)
		}
	}
}

// TestLeaseSurvivesReload: a reload that leaves a leased rule as it was
// keeps its limiter, and so the blocks it holds; one that changes the rule
// makes a new one and returns what the old one held; ReleaseLeases (at
// shutdown) returns what the rules in force hold.
func TestLeaseSurvivesReload(t *testing.T) {
	const rule = `domain: d
descriptors:
  - key: leased
    rate_limit: {unit: day, requests_per_unit: %d, lease: true}
`
	h := start(t, map[string]string{"a.yaml": fmt.Sprintf(rule, 1000)})
	limiter := func() *sluice.Limiter {
		for r, l := range h.srv.snap.Load().limiters {
			if r.FullKey == "d.leased" {
				return l
			}
		}
		t.Fatal("no limiter for d.leased")
		return nil
	}
	before := limiter()
	for range 20 { // blocks of 1, 2, 4, 8, 16: 11 units held after 20 requests
		if r := h.should(t, "d", desc("leased", "x")); r.GetOverallCode() != rls.RateLimitResponse_OK {
			t.Fatalf("refused: %v", r)
		}
	}
	writeFiles(t, h.dir, map[string]string{"b.yaml": "domain: e\ndescriptors:\n  - key: other\n    rate_limit: {unit: day, requests_per_unit: 5}\n"})
	if err := h.srv.ReloadDir(h.dir); err != nil {
		t.Fatal(err)
	}
	if limiter() != before {
		t.Error("a reload that left the leased rule alone replaced its limiter (and dropped its blocks)")
	}
	writeFiles(t, h.dir, map[string]string{"a.yaml": fmt.Sprintf(rule, 2000)})
	if err := h.srv.ReloadDir(h.dir); err != nil {
		t.Fatal(err)
	}
	if l := limiter(); l == before || l.Policy().Limit != 2000 {
		t.Errorf("a reload that changed the leased rule kept the old limiter (limit %d)", l.Policy().Limit)
	}
	if s := h.srv.leases.Stats(before.Policy()); s.Returned == 0 || s.Returned != s.Taken-s.Spent {
		t.Errorf("the replaced limiter: %+v; want all it held returned", s)
	}
	// Shutting down returns what the rules in force hold.
	for range 20 {
		h.should(t, "d", desc("leased", "x"))
	}
	l := limiter()
	if err := h.srv.ReleaseLeases(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := h.srv.leases.Stats(l.Policy()); s.Taken == s.Spent || s.Returned != s.Taken-s.Spent {
		t.Errorf("after ReleaseLeases: %+v; want what it held returned", s)
	}
}
