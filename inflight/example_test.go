// SPDX-License-Identifier: Apache-2.0

package inflight_test

import (
	"fmt"

	"github.com/sluicehq/sluice/inflight"
)

// Concurrency bounds requests in flight per key.
func ExampleConcurrency() {
	c, _ := inflight.NewConcurrency(2)
	r1, _ := c.TryAcquire("tenant-a")
	_, _ = c.TryAcquire("tenant-a")
	_, ok := c.TryAcquire("tenant-a")
	fmt.Println(ok, c.InFlight("tenant-a"))
	r1()
	r1() // idempotent
	fmt.Println(c.InFlight("tenant-a"))
	// Output:
	// false 2
	// 1
}
