package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

func Example() {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock), memstore.WithMaxKeys(100_000))
	defer store.Close()

	// A rider may make 10 requests at once, refilled at 5 per second.
	p := sluice.Policy{Name: "rider", Algorithm: sluice.TokenBucket, Limit: 5, Period: time.Second, Burst: 10}
	ctx := context.Background()
	for range 10 {
		store.Take(ctx, p, "rider-42", 1)
	}
	d, err := store.Take(ctx, p, "rider-42", 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("11th request:", d.Allowed, "retry after", d.RetryAfter)

	clock.Advance(200 * time.Millisecond)
	d, _ = store.Take(ctx, p, "rider-42", 1)
	fmt.Println("200ms later:", d.Allowed, "remaining", d.Remaining)

	// Once the bucket is full again the key is forgotten.
	clock.Advance(2 * time.Second)
	store.Sweep()
	fmt.Println("keys held:", store.Len())
	// Output:
	// 11th request: false retry after 200ms
	// 200ms later: true remaining 0
	// keys held: 0
}
