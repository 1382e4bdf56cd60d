// SPDX-License-Identifier: Apache-2.0

package decide_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/decide"
	"github.com/sluicehq/sluice/memstore"
)

// A front end compiles a request's checks, asks Decide, and renders the
// Verdict: here, two requests against a limit of one per hour, then one
// whose caller has gone.
func ExampleDecide() {
	store := memstore.New()
	defer store.Close()
	l, _ := sluice.NewLimiter(store, sluice.Policy{Name: "hourly", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Hour})
	q := decide.Request{Checks: []sluice.Check{{Limiter: l, Key: "alice", Cost: 1}}, Enforced: 1}
	for range 2 {
		v := decide.Decide(context.Background(), q)
		fmt.Println(v.Outcome, v.Violated(q.Checks, 0))
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	fmt.Println(decide.Decide(gone, q).Outcome)
	// Output:
	// admit false
	// refuse true
	// gone
}
