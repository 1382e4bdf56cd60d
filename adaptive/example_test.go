// SPDX-License-Identifier: Apache-2.0

package adaptive_test

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/memstore"
)

// An in-flight limit that a gradient controller moves between 2 and 100.
func Example() {
	store := memstore.New()
	defer store.Close()
	g, err := adaptive.NewGradient(adaptive.GradientConfig{Floor: 2, Ceiling: 100, Initial: 10})
	if err != nil {
		panic(err)
	}
	backend, err := inflight.New(store, "backend", 0, inflight.WithController(g))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	h, _, err := backend.Acquire(ctx, "all", false)
	if err != nil || h == nil {
		panic("no slot")
	}
	// ... call the backend ...
	if err := h.Release(ctx, false); err != nil {
		panic(err)
	}
	fmt.Println("limit", backend.Limit())
	// Output: limit 10
}
