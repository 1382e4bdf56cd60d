// SPDX-License-Identifier: Apache-2.0

package clock_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/memstore"
)

// A store on a clock that never steps back, whatever happens to the
// system time: two readings in a row never go backwards.
func ExampleMonotonic() {
	c := clock.Monotonic()
	store := memstore.New(memstore.WithClock(c))
	defer store.Close()
	a := c.UnixNano()
	b := c.Now()
	fmt.Println(!b.Before(time.Unix(0, a)))
	// Output: true
}
