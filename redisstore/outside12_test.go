// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetest"
)

// TestOutside12OverrideKeepsTheMargin: Override is on the decision path
// and, as every call, is bounded by the caller's deadline less the margin
// (package doc, "Failures"), so that the caller still gets an answer (its
// failure mode's) in time. On a Redis that does not answer, the barrier
// round trip of a domain not read in the last OverrideSettle is waited for
// until the caller's context itself ends: the caller is then gone, and no
// failure mode may answer it.
func TestOutside12OverrideKeepsTheMargin(t *testing.T) {
	addr := sluicetest.StartRedis(t)
	admin := newClient(t, addr)
	s := newStore(t, newClient(t, addr)) // default timeout, margin and breaker
	// Connected, and the override path warmed up on another domain.
	if _, _, err := s.Override(t.Context(), "warm", "id"); err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(t.Context(), admin.B().ClientPause().Timeout(2000).All().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	// A deadline of 1 s: the margin is 2 ms + 100 ms, so the call must end
	// about 102 ms before the context does.
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_, _, err := s.Override(ctx, "api", "tenant")
	if err == nil {
		t.Fatal("Override answered from a paused Redis")
	}
	if ctx.Err() != nil {
		t.Fatalf("Override on a paused Redis returned %v only once the caller's context had ended (%v): want it bounded by the deadline less the margin, as Take is", err, ctx.Err())
	}
}
