// SPDX-License-Identifier: Apache-2.0

package sluicetest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// A manual clock makes time-dependent limits testable at fixed instants,
// without sleeping.
func ExampleClock() {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	p := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Minute}
	ctx := context.Background()

	d, _ := store.Take(ctx, p, "k", 1)
	fmt.Println(d.Allowed)
	d, _ = store.Take(ctx, p, "k", 1)
	fmt.Println(d.Allowed, d.RetryAfter)
	clock.Advance(d.RetryAfter)
	d, _ = store.Take(ctx, p, "k", 1)
	fmt.Println(d.Allowed)
	// Output:
	// true
	// false 1m0s
	// true
}
