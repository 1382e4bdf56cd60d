// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestOverrideKeepsTheMargin: Override is on the decision path and, as
// every call, ends by the caller's deadline less the margin (package doc,
// "Failures"), so that the caller's failure mode still answers in time: on
// a Redis that does not answer, the barrier round trip of a domain not
// read in the last OverrideSettle was waited for until the caller's
// context itself ended (the caller then gone, which no failure mode may
// answer).
func TestOverrideKeepsTheMargin(t *testing.T) {
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

// TestReplicaCountAfterRestart: FailLocal's bound (docs/fleet.md: R
// replicas together admit per key at most R·(⌊B/R⌋ + ⌊⌊N/R⌋·D/P⌋) in an
// outage) rests on every replica dividing by the same R. Three replicas
// count 3; Redis restarts empty, and the first replica to beat again must
// not take the whole limit as its share (it counted 1, and the fleet
// admitted 5+1+1 = 7 of a burst of 5 when Redis failed again before the
// others beat, over the bound of 3·⌊5/3⌋ = 3).
func TestReplicaCountAfterRestart(t *testing.T) {
	srv := sluicetest.StartRedisServer(t)
	p := sluice.Policy{Name: "api", Algorithm: sluice.TokenBucket, Limit: 5, Period: time.Hour}
	var (
		reps [3]*Replicas
		lims [3]*sluice.Limiter
	)
	for i := range reps {
		s := newStore(t, newClient(t, srv.Addr))
		r, err := NewReplicas(s, fmt.Sprint("replica-", i), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		reps[i] = r
		lims[i], err = sluice.NewLimiter(s, p, sluice.WithFailureMode(sluice.FailLocal), sluice.WithLocalStore(memstore.New(), r))
		if err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		for _, r := range reps {
			if _, err := r.Beat(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, r := range reps {
		if n := r.Replicas(); n != 3 {
			t.Fatalf("replica %d counts %d of 3 beating", i, n)
		}
	}
	srv.Kill()
	srv.Restart() // empty: the heartbeat set is gone
	// The first beat on the old connection may see it reset; the next
	// one reconnects (each beat is one call, as Run makes them).
	for i := 0; ; i++ {
		n, err := reps[0].Beat(t.Context())
		if err == nil {
			t.Logf("first beat after the restart: %d; counts %d %d %d", n, reps[0].Replicas(), reps[1].Replicas(), reps[2].Replicas())
			break
		}
		if i == 3 {
			t.Fatalf("no beat succeeded after the restart: %v", err)
		}
	}
	srv.Kill() // and down again before the others beat
	admitted := 0
	for _, l := range lims {
		for range 5 {
			d, err := l.Allow(t.Context(), "fresh")
			if err == nil {
				t.Fatal("a decision from a dead Redis")
			}
			if d.Allowed {
				admitted++
			}
		}
	}
	if bound := 3 * (5 / 3); admitted > bound {
		t.Fatalf("3 fail-local replicas admitted %d of a burst of 5 during an outage, over the bound R·⌊B/R⌋ = %d: the replica that beat first after the restart counted %d and took a share of %d",
			admitted, bound, reps[0].Replicas(), p.Limit/int64(reps[0].Replicas()))
	}
}
