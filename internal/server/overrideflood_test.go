// SPDX-License-Identifier: Apache-2.0

package server

import (
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	envoytype "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/memstore"
)

// TestOverrideFloodIsFreed: a descriptor `limit` override's policy is
// named by its domain and period (overrideRule), so distinct limits of one
// unit make one policy, and what a client can make is one policy per
// distinct period (unit × unit_multiplier) it sends (defect 2's network
// path: on 1b40f8a, when every distinct override made a policy, 5,000 took
// 1.4 s, the next 3.7 s, the next 6.4 s, and their tables were never
// freed). On memstore they are freed once their keys expire: after the
// flood and its longest period, the store holds no more policies than
// before it.
func TestOverrideFloodIsFreed(t *testing.T) {
	h := start(t, map[string]string{"rides.yaml": ridesYAML})
	store, ok := h.srv.Store().(*memstore.Store)
	if !ok {
		t.Fatalf("the server's store is a %T, want *memstore.Store", h.srv.Store())
	}
	before := store.Stats().Policies
	const flood = 2000
	flooding := func(name string, limit func(n int) *rlcommon.RateLimitDescriptor_RateLimitOverride) {
		t.Helper()
		for n := range flood {
			d := desc("anything", name)
			d.Limit = limit(n)
			if got := codesOf(h.should(t, "rides", d)); got != "OK: OK" {
				t.Fatalf("%s, override %d: %s, want OK", name, n+1, got)
			}
		}
	}
	flooding("limits", func(n int) *rlcommon.RateLimitDescriptor_RateLimitOverride {
		return &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: uint32(n + flood), Unit: envoytype.RateLimitUnit_MINUTE}
	})
	if got := store.Stats().Policies; got > before+1 {
		t.Errorf("after %d overrides of distinct limits a minute the store holds %d policies, want at most %d (one for the minute)", flood, got, before+1)
	}
	flooding("periods", func(n int) *rlcommon.RateLimitDescriptor_RateLimitOverride {
		return &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: envoytype.RateLimitUnit_MINUTE, UnitMultiplier: wrapperspb.UInt32(uint32(n + 2))}
	})
	if got := store.Stats().Policies; got < before+flood {
		t.Fatalf("after %d overrides of distinct periods the store holds %d policies, want at least %d (one each)", flood, got, before+flood)
	}
	h.clock.Advance((flood + 1) * time.Minute)
	store.Sweep()
	if got := store.Stats().Policies; got > before {
		t.Errorf("%d minutes after %d overrides the store still holds %d policies (%d before): their tables were not freed", flood+1, flood, got, before)
	}
}
