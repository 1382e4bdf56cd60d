// SPDX-License-Identifier: Apache-2.0

package sluice_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// observed is one call of an Observer.
type observed struct {
	policy  string
	key     string
	cost    int64
	allowed bool
	err     bool
}

func TestObserver(t *testing.T) {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	var got []observed
	obs := sluice.WithObserver(func(ctx context.Context, p sluice.Policy, key string, cost int64, d sluice.Decision, err error) {
		got = append(got, observed{p.Name, key, cost, d.Allowed, err != nil})
	})
	one, err := sluice.NewLimiter(store, sluice.Policy{Name: "one", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Second}, obs)
	if err != nil {
		t.Fatal(err)
	}
	two, err := sluice.NewLimiter(store, sluice.Policy{Name: "two", Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Second}, obs)
	if err != nil {
		t.Fatal(err)
	}
	silent, err := sluice.NewLimiter(store, sluice.Policy{Name: "silent", Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	one.Allow(ctx, "a")      // admitted
	one.Allow(ctx, "a")      // refused
	one.AllowN(ctx, "a", -1) // bad input: not observed
	silent.Allow(ctx, "a")   // no observer
	// A refused batch: two would admit, one refuses; silent is not told.
	sluice.AllowAll(ctx, sluice.Check{Limiter: two, Key: "b", Cost: 1}, sluice.Check{Limiter: silent, Key: "b", Cost: 1}, sluice.Check{Limiter: one, Key: "a", Cost: 1})
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	// The store's error is observed (the caller gets the failure mode's
	// decision).
	if _, err := two.Allow(cancelled, "c"); err == nil {
		t.Fatal("Allow with a cancelled context: no error")
	}
	want := []observed{
		{"one", "a", 1, true, false},
		{"one", "a", 1, false, false},
		{"two", "b", 1, true, false},
		{"one", "a", 1, false, false},
		{"two", "c", 1, false, true},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("observed\n%v\nwant\n%v", got, want)
	}
}

// Count decisions for metrics, without wrapping every call.
func ExampleWithObserver() {
	store := memstore.New()
	defer store.Close()
	var admitted, refused, failed atomic.Int64
	count := func(ctx context.Context, p sluice.Policy, key string, cost int64, d sluice.Decision, err error) {
		switch {
		case err != nil:
			failed.Add(1)
		case d.Allowed:
			admitted.Add(1)
		default:
			refused.Add(1)
		}
	}
	lim, err := sluice.NewLimiter(store, sluice.Policy{Name: "api", Algorithm: sluice.TokenBucket, Limit: 3, Period: time.Minute},
		sluice.WithObserver(count))
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 5 {
		lim.Allow(context.Background(), "client")
	}
	fmt.Println("admitted", admitted.Load(), "refused", refused.Load(), "failed", failed.Load())
	// Output: admitted 3 refused 2 failed 0
}

// BenchmarkAllowObserver measures what an observer costs Limiter.Allow:
// observer=none is the default Limiter, observer=count one that bumps an
// atomic counter.
func BenchmarkAllowObserver(b *testing.B) {
	for _, c := range []struct {
		name string
		opts []sluice.Option
	}{
		{"none", nil},
		{"count", []sluice.Option{sluice.WithObserver(func(context.Context, sluice.Policy, string, int64, sluice.Decision, error) {
			benchObserved.Add(1)
		})}},
	} {
		b.Run("observer="+c.name, func(b *testing.B) {
			store := memstore.New()
			defer store.Close()
			lim, err := sluice.NewLimiter(store, sluice.Policy{Name: "bench", Algorithm: sluice.GCRA, Limit: 1 << 40, Period: time.Second}, c.opts...)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := lim.Allow(ctx, "key"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

var benchObserved atomic.Int64
