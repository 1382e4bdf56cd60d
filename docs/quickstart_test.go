// SPDX-License-Identifier: Apache-2.0

package docs_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
)

// README's Quick start program, as an Example: TestQuickStartIsExample
// checks that README's main body is this function's body, word for word.
func Example() {
	store := memstore.New() // or a redisstore.Store shared by a fleet
	defer store.Close()

	lim, err := sluice.NewLimiter(store, sluice.Policy{
		Name:      "rider-api",
		Algorithm: sluice.TokenBucket,
		Limit:     60, // a sustained 60 per minute (one a second)...
		Period:    time.Minute,
		Burst:     10, // ...and up to 10 at once
	})
	if err != nil {
		log.Fatal(err) // the policy is invalid: the error names the field
	}

	// During a store outage every request fails: log it once a second.
	storeErrors := rate.Sometimes{Interval: time.Second}
	admitted, refused := 0, 0
	var last sluice.Decision
	for range 12 {
		d, err := lim.Allow(context.Background(), "rider-42")
		if err != nil {
			storeErrors.Do(func() { log.Printf("rate limiter store: %v", err) })
		}
		if d.Allowed {
			admitted++
		} else {
			refused++
		}
		last = d
	}
	fmt.Printf("%d admitted, %d refused; retry in %v\n", admitted, refused, last.RetryAfter.Round(time.Second))
	// Output: 10 admitted, 2 refused; retry in 1s
}
