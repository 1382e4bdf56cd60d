package server

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
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
	sn := h.srv.snap.Load()
	for r, l := range sn.limiters {
		s := l.LeaseStats()
		if r.FullKey == "d.leased" && s.Local < 10*s.StoreCalls {
			t.Errorf("leased rule: %+v, want most decisions local", s)
		}
		if want := map[string]int{"d.leased": 1, "d.sharded": 3}[r.FullKey]; l.Shards() != want {
			t.Errorf("%s: %d shards, want %d", r.FullKey, l.Shards(), want)
		}
	}
}
