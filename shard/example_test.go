// SPDX-License-Identifier: Apache-2.0

package shard_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/shard"
	"github.com/sluicehq/sluice/sluicetest"
)

// A hot key split over 3 shards: each takes a third of the limit (the
// remainder to the first), and together they admit exactly the limit.
func ExampleNew() {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	p := sluice.Policy{Name: "api", Algorithm: sluice.FixedWindow, Limit: 100, Period: time.Second}
	var limits []int64
	for _, s := range shard.Policies(p, 3) {
		limits = append(limits, s.Limit)
	}
	fmt.Println(limits)
	lim, err := sluice.NewLimiter(shard.New(store, 3), p)
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
