// SPDX-License-Identifier: Apache-2.0

package server

import (
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	envoytype "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/sluicehq/sluice/memstore"
)

// TestOverrideFloodIsFreed: every distinct descriptor `limit` override a
// client sends makes a policy in the store, so a client can make as many
// as it likes (defect 2's network path: on 1b40f8a 5,000 overrides took
// 1.4 s, the next 3.7 s, the next 6.4 s, and their tables were never
// freed). On memstore they are freed once their keys expire: after the
// flood and one period, the store holds no more policies than before it.
func TestOverrideFloodIsFreed(t *testing.T) {
	h := start(t, map[string]string{"rides.yaml": ridesYAML})
	store, ok := h.srv.Store().(*memstore.Store)
	if !ok {
		t.Fatalf("the server's store is a %T, want *memstore.Store", h.srv.Store())
	}
	before := store.Stats().Policies
	const flood = 2000
	for n := range flood {
		d := desc("anything", "v")
		d.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: uint32(n + 1), Unit: envoytype.RateLimitUnit_MINUTE}
		if got := codesOf(h.should(t, "rides", d)); got != "OK: OK" {
			t.Fatalf("override %d: %s, want OK", n+1, got)
		}
	}
	if got := store.Stats().Policies; got < before+flood {
		t.Fatalf("after %d distinct overrides the store holds %d policies, want at least %d (one each)", flood, got, before+flood)
	}
	h.clock.Advance(time.Minute)
	store.Sweep()
	if got := store.Stats().Policies; got > before {
		t.Errorf("a minute after %d overrides the store still holds %d policies (%d before): their tables were not freed", flood, got, before)
	}
}
