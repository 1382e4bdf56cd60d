// SPDX-License-Identifier: Apache-2.0

package lease_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// Two processes share one fixed-window limit of 5000 per second with
// leases: a steady 1000 requests per second at each, well under the limit,
// is decided mostly from local budgets, blocks lasting about the 100 ms
// target (and never past their window).
func ExampleNew() {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock)) // stands for a shared Redis
	defer store.Close()
	p := sluice.Policy{Name: "api", Algorithm: sluice.FixedWindow, Limit: 5000, Period: time.Second}
	var replicas []*sluice.Limiter
	var leases []*lease.Store
	for range 2 {
		ls := lease.New(store, lease.WithTarget(100*time.Millisecond), lease.WithClock(clock))
		l, err := sluice.NewLimiter(ls, p)
		if err != nil {
			fmt.Println(err)
			return
		}
		replicas, leases = append(replicas, l), append(leases, ls)
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
	for _, ls := range leases {
		s := ls.Stats(p)
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
