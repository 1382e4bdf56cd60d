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

// Two processes share one fixed-window limit of 5000 per second with
// leases: a steady 1000 requests per second at each, well under the limit,
// is decided mostly from local budgets, blocks lasting about the 100 ms
// target (and never past their window).
func ExampleWithLease() {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock)) // stands for a shared Redis
	defer store.Close()
	p := sluice.Policy{Name: "api", Algorithm: sluice.FixedWindow, Limit: 5000, Period: time.Second}
	var replicas []*sluice.Limiter
	for range 2 {
		l, err := sluice.NewLimiter(store, p, sluice.WithLease(100*time.Millisecond), sluice.WithClock(clock))
		if err != nil {
			fmt.Println(err)
			return
		}
		replicas = append(replicas, l)
	}
	ctx := context.Background()
	admitted := 0
	for range 2000 { // two seconds
		clock.Advance(time.Millisecond)
		for _, l := range replicas {
			if d, _ := l.Allow(ctx, "hot"); d.Allowed {
				admitted++
			}
		}
	}
	var calls, decisions uint64
	for _, l := range replicas {
		s := l.LeaseStats()
		calls += s.StoreCalls
		decisions += s.Spent
	}
	fmt.Println("admitted:", admitted)
	fmt.Println("decisions:", decisions)
	fmt.Println("fewer store calls than decisions by more than 20×:", 20*calls < decisions)
	// Output:
	// admitted: 4000
	// decisions: 4000
	// fewer store calls than decisions by more than 20×: true
}

// A hot key split over 3 shards: each takes a third of the limit (the
// remainder to the first), and together they admit exactly the limit.
func ExampleWithShards() {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	p := sluice.Policy{Name: "api", Algorithm: sluice.FixedWindow, Limit: 100, Period: time.Second}
	var limits []int64
	for _, s := range sluice.ShardPolicies(p, 3) {
		limits = append(limits, s.Limit)
	}
	fmt.Println(limits)
	lim, err := sluice.NewLimiter(store, p, sluice.WithShards(3))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	admitted := 0
	for range 150 {
		if d, _ := lim.Allow(ctx, "hot"); d.Allowed {
			admitted++
		}
	}
	fmt.Println("admitted:", admitted)
	// Output:
	// [34 33 33]
	// admitted: 100
}
