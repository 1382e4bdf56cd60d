// SPDX-License-Identifier: Apache-2.0

package redisstore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redisstore"
)

// This example needs a Redis server on 127.0.0.1:6379, so it is compiled
// but not run; the package's tests start their own servers.
func Example() {
	store, err := redisstore.Open("redis://127.0.0.1:6379")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	lim, err := sluice.NewLimiter(store, sluice.Policy{
		Name: "api", Algorithm: sluice.GCRA, Limit: 100, Period: time.Minute,
	}, sluice.WithFailureMode(sluice.FailOpen))
	if err != nil {
		log.Fatal(err)
	}
	d, err := lim.Allow(context.Background(), "203.0.113.7")
	if err != nil {
		log.Print(err) // Redis failed; d follows the failure mode
	}
	fmt.Println(d.Allowed, d.Remaining)
}
