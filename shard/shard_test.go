// SPDX-License-Identifier: Apache-2.0

package shard_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/shard"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestAllowAll: in an AllowAll batch over one shard store a sharded policy
// offers one shard, all-or-nothing with the others, and reports the whole
// policy's limit; a policy the store does not shard passes through.
func TestAllowAll(t *testing.T) {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	mem := memstore.New(memstore.WithClock(clock))
	defer mem.Close()
	store := shard.NewFunc(mem, func(p sluice.Policy) int {
		if p.Name == "s" {
			return 3
		}
		return 1
	})
	sharded, _ := sluice.NewLimiter(store, sluice.Policy{Name: "s", Algorithm: sluice.FixedWindow, Limit: 6, Period: time.Second})
	other, _ := sluice.NewLimiter(store, sluice.Policy{Name: "o", Algorithm: sluice.FixedWindow, Limit: 4, Period: time.Second})
	ctx := context.Background()
	admitted := 0
	for range 10 {
		res, err := sluice.AllowAll(ctx, sluice.Check{Limiter: sharded, Key: "k"}, sluice.Check{Limiter: other, Key: "k"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Decisions[0].Limit != 6 {
			t.Errorf("the sharded check reports limit %d, want 6", res.Decisions[0].Limit)
		}
		if res.Allowed {
			admitted++
		}
	}
	if admitted != 4 {
		t.Errorf("admitted %d, want 4 (the other limit)", admitted)
	}
	// What was refused consumed nothing: the shards hold 4 of 6 units.
	if d, err := sharded.AllowN(ctx, "k", 1); err != nil || !d.Allowed {
		t.Errorf("the sharded limit after the batch: %+v %v", d, err)
	}
	if _, err := sharded.Wait(ctx, "k", 3); !errors.Is(err, sluice.ErrImpossible) {
		t.Errorf("Wait for 3 units, more than any of the 3 shards of 6 holds: %v, want ErrImpossible", err)
	}
	// Reset resets every shard.
	if err := store.Reset(ctx, sharded.Policy(), "k"); err != nil {
		t.Fatal(err)
	}
	n := 0
	for range 10 {
		if d, _ := sharded.Allow(ctx, "k"); d.Allowed {
			n++
		}
	}
	if n != 6 {
		t.Errorf("after Reset: %d admitted, want 6", n)
	}
}

// TestCount: a policy is split as far as every shard keeps a unit, and
// leaky-bucket is not split.
func TestCount(t *testing.T) {
	for _, tc := range []struct {
		p    sluice.Policy
		n    int
		want int
	}{
		{sluice.Policy{Algorithm: sluice.GCRA, Limit: 10, Period: time.Second}, 4, 4},
		{sluice.Policy{Algorithm: sluice.GCRA, Limit: 10, Period: time.Second, Burst: 2}, 4, 2},
		{sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 1000, Period: time.Second}, 100, shard.Max},
		{sluice.Policy{Algorithm: sluice.LeakyBucket, Limit: 10, Period: time.Second}, 4, 1},
		{sluice.Policy{Algorithm: sluice.GCRA, Limit: 10, Period: time.Second}, -3, 1},
	} {
		if got := shard.Count(tc.p, tc.n); got != tc.want {
			t.Errorf("Count(%v, %d) = %d, want %d", tc.p, tc.n, got, tc.want)
		}
	}
}

// TestCharge: a charge of a sharded key is split over its shards, so that
// the whole key is in debt: a charge of the whole limit refuses every
// shard until the window ends.
func TestCharge(t *testing.T) {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	mem := memstore.New(memstore.WithClock(clock))
	defer mem.Close()
	store := shard.New(mem, 4)
	lim, err := sluice.NewLimiter(store, sluice.Policy{Name: "tokens", Algorithm: sluice.FixedWindow, Limit: 1000, Period: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d, err := lim.Charge(ctx, "tenant", 999)
	if err != nil || !d.Allowed || d.Limit != 1000 {
		t.Fatalf("charge 999: %+v, %v; want still admitting (one shard has a unit left), limit 1000", d, err)
	}
	if d, _ := lim.Allow(ctx, "tenant"); !d.Allowed {
		t.Fatalf("the last unit: %+v", d)
	}
	d, _ = lim.Charge(ctx, "tenant", 300)
	if d.Allowed || d.RetryAfter != time.Minute {
		t.Fatalf("charge 300 past the limit: %+v, want refused until the window ends", d)
	}
	for range 4 {
		if d, _ := lim.Allow(ctx, "tenant"); d.Allowed {
			t.Fatalf("a shard admits while the key is in debt: %+v", d)
		}
	}
	clock.Advance(time.Minute)
	if d, _ := lim.Allow(ctx, "tenant"); !d.Allowed {
		t.Fatalf("the next window: %+v", d)
	}
}
