// SPDX-License-Identifier: Apache-2.0

package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

func Example() {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock), memstore.WithMaxKeys(100_000))
	defer store.Close()

	// A rider may make 10 requests at once, refilled at 5 per second.
	p := sluice.Policy{Name: "rider", Algorithm: sluice.TokenBucket, Limit: 5, Period: time.Second, Burst: 10}
	ctx := context.Background()
	for range 10 {
		store.Take(ctx, p, "rider-42", 1)
	}
	d, err := store.Take(ctx, p, "rider-42", 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("11th request:", d.Allowed, "retry after", d.RetryAfter)

	clock.Advance(200 * time.Millisecond)
	d, _ = store.Take(ctx, p, "rider-42", 1)
	fmt.Println("200ms later:", d.Allowed, "remaining", d.Remaining)

	// Once the bucket is full again the key is forgotten.
	clock.Advance(2 * time.Second)
	store.Sweep()
	fmt.Println("keys held:", store.Len())
	// Output:
	// 11th request: false retry after 200ms
	// 200ms later: true remaining 0
	// keys held: 0
}

func ExampleStore_TakeAll() {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()

	// Per-IP and per-organisation limits, all or nothing.
	perIP := sluice.Policy{Name: "ip", Algorithm: sluice.FixedWindow, Limit: 100, Period: time.Minute}
	perOrg := sluice.Policy{Name: "org", Algorithm: sluice.GCRA, Limit: 2, Period: time.Minute}
	reqs := []sluice.Request{
		{Policy: perIP, Key: "203.0.113.7", Cost: 1},
		{Policy: perOrg, Key: "acme", Cost: 1},
	}
	out := make([]sluice.Decision, len(reqs))
	for range 3 {
		if err := store.TakeAll(context.Background(), reqs, out); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("ip: %v (%d left), org: %v (%d left)\n", out[0].Allowed, out[0].Remaining, out[1].Allowed, out[1].Remaining)
	}
	// Output:
	// ip: true (99 left), org: true (1 left)
	// ip: true (98 left), org: true (0 left)
	// ip: true (98 left), org: false (0 left)
}

// Each distinct policy is held while it has keys; WithMaxPolicies bounds
// how many are held at once, and a new one past the bound is an error
// wrapping sluice.ErrStoreFull.
func ExampleWithMaxPolicies() {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock), memstore.WithMaxPolicies(2))
	defer store.Close()
	ctx := context.Background()

	perTenant := func(limit int64) sluice.Policy {
		return sluice.Policy{Algorithm: sluice.FixedWindow, Limit: limit, Period: time.Minute}
	}
	for _, limit := range []int64{10, 20, 30} {
		_, err := store.Take(ctx, perTenant(limit), "tenant", 1)
		fmt.Printf("limit %d: full %v\n", limit, errors.Is(err, sluice.ErrStoreFull))
	}
	// Once their keys expire, the policies are dropped.
	clock.Advance(time.Minute)
	store.Sweep()
	fmt.Println("policies held:", store.Stats().Policies)
	_, err := store.Take(ctx, perTenant(30), "tenant", 1)
	fmt.Println("limit 30 now:", err)
	// Output:
	// limit 10: full false
	// limit 20: full false
	// limit 30: full true
	// policies held: 0
	// limit 30 now: <nil>
}
