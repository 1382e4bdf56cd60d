// SPDX-License-Identifier: Apache-2.0

package sluice_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// A rider app opening fires six requests at once: a token bucket with a
// burst of 10 admits them all, then refills 5 per second.
func ExampleLimiter_Allow() {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	lim, err := sluice.NewLimiter(store, sluice.Policy{
		Name: "rider-api", Algorithm: sluice.TokenBucket,
		Limit: 5, Period: time.Second, Burst: 10,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for i := 0; i < 6; i++ {
		d, _ := lim.Allow(ctx, "rider-42")
		fmt.Print(d.Remaining, " ")
	}
	clock.Advance(100 * time.Millisecond)
	d, _ := lim.Allow(ctx, "rider-42")
	fmt.Println(d.Remaining, d.ResetAfter)
	// Output: 9 8 7 6 5 4 3 1.3s
}

// Per-IP and per-organisation limits compose all-or-nothing: a request
// refused by the organisation's limit consumes nothing of the IP's.
func ExampleAllowAll() {
	store := memstore.New(memstore.WithClock(sluicetest.NewClock(time.Unix(0, 0))))
	defer store.Close()
	perIP, _ := sluice.NewLimiter(store, sluice.Policy{Name: "ip", Algorithm: sluice.SlidingWindow, Limit: 100, Period: time.Minute})
	perOrg, _ := sluice.NewLimiter(store, sluice.Policy{Name: "org", Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Minute})
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		res, _ := sluice.AllowAll(ctx,
			sluice.Check{Limiter: perIP, Key: "203.0.113.7", Cost: 1},
			sluice.Check{Limiter: perOrg, Key: "acme", Cost: 1},
		)
		fmt.Println(res.Allowed, res.Refused, res.Decisions[0].Remaining)
	}
	// Output:
	// true -1 99
	// true -1 98
	// false 1 98
}

// A cost larger than the burst can never be admitted: the decision says so
// instead of giving a RetryAfter.
func ExampleDecision_impossible() {
	store := memstore.New()
	defer store.Close()
	lim, _ := sluice.NewLimiter(store, sluice.Policy{Algorithm: sluice.GCRA, Limit: 10, Period: time.Second, Burst: 3})
	d, _ := lim.AllowN(context.Background(), "k", 4)
	fmt.Println(d.Allowed, d.Impossible, d.RetryAfter)
	// Output: false true 0s
}
