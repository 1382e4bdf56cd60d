// SPDX-License-Identifier: Apache-2.0

package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// A tenant's LLM budget: 100,000 tokens a day. Each request reserves an
// estimate before the model runs and commits the tokens it used; a
// response that used more than the budget had left puts the tenant in
// debt, and the next request is refused until the debt is paid back.
func ExampleLimiter_Reserve() {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	lim, _ := sluice.NewLimiter(store, sluice.Policy{
		Name: "llm-tokens", Algorithm: sluice.FixedWindow,
		Limit: 100_000, Period: 24 * time.Hour,
	})
	ctx := context.Background()
	for _, used := range []int64{30_000, 45_000, 40_000, 1_000} {
		r, _ := lim.Reserve(ctx, "tenant-7", 2_000) // the estimate
		if !r.Decision.Allowed {
			fmt.Println("refused, retry after", r.Decision.RetryAfter)
			continue
		}
		d, _ := r.Commit(ctx, used) // the tokens the response used
		fmt.Println("used", used, "remaining", d.Remaining, "allowed", d.Allowed)
	}
	// Output:
	// used 30000 remaining 70000 allowed true
	// used 45000 remaining 25000 allowed true
	// used 40000 remaining 0 allowed false
	// refused, retry after 24h0m0s
}

// Charge records a cost already spent, past the limit if need be.
func ExampleLimiter_Charge() {
	store := memstore.New(memstore.WithClock(sluicetest.NewClock(time.Unix(0, 0))))
	defer store.Close()
	lim, _ := sluice.NewLimiter(store, sluice.Policy{Algorithm: sluice.TokenBucket, Limit: 1000, Period: time.Minute})
	ctx := context.Background()
	d, _ := lim.Charge(ctx, "tenant", 1300) // 300 tokens of debt
	fmt.Println(d.Allowed, d.Remaining, d.RetryAfter)
	// Output: false 0 18.06s
}

// TestReserveCommit: a commit below the estimate gives the difference back
// while nothing else changed the key (token-bucket), a commit above it
// charges the difference, and a reservation settles once.
func TestReserveCommit(t *testing.T) {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	lim, _ := sluice.NewLimiter(store, sluice.Policy{Algorithm: sluice.TokenBucket, Limit: 1000, Period: time.Minute})
	ctx := context.Background()
	peek := func() int64 {
		t.Helper()
		d, err := lim.AllowN(ctx, "k", 0)
		if err != nil {
			t.Fatal(err)
		}
		return d.Remaining
	}
	r, err := lim.Reserve(ctx, "k", 500)
	if err != nil || !r.Decision.Allowed || r.Decision.Remaining != 500 {
		t.Fatalf("reserve 500: %+v, %v", r.Decision, err)
	}
	if d, err := r.Commit(ctx, 200); err != nil || d.Remaining != 800 {
		t.Fatalf("commit 200 of 500: %+v, %v; want 300 given back (800 left)", d, err)
	}
	if _, err := r.Commit(ctx, 200); !errors.Is(err, sluice.ErrSettled) {
		t.Fatalf("a second commit: %v, want ErrSettled", err)
	}
	// Something else took from the key since: nothing is given back.
	r, _ = lim.Reserve(ctx, "k", 500)
	if _, err := lim.Allow(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if err := r.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if got := peek(); got != 299 {
		t.Fatalf("after a cancel that could not give back: %d left, want 299", got)
	}
	// More than the estimate: the difference is charged, past the limit.
	r, _ = lim.Reserve(ctx, "k", 200)
	d, err := r.Commit(ctx, 700)
	if err != nil || d.Allowed || d.Remaining != 0 {
		t.Fatalf("commit 700 of 200 with 299 left: %+v, %v; want the key in debt", d, err)
	}
	// 401 units of debt and one unit: 402 units of refill.
	if want := 402 * time.Minute / 1000; d.RetryAfter != want {
		t.Fatalf("RetryAfter %v, want %v", d.RetryAfter, want)
	}
	// A refused reservation holds nothing; its commit charges all.
	r, _ = lim.Reserve(ctx, "k", 1)
	if r.Decision.Allowed {
		t.Fatalf("reserve in debt: %+v", r.Decision)
	}
	if _, err := r.Commit(ctx, 10); err != nil {
		t.Fatal(err)
	}
	clock.Advance(412 * time.Minute / 1000)
	if got := peek(); got != 1 {
		t.Fatalf("after the debt and the refused reservation's 10: %d left, want 1", got)
	}
}

// TestChargeErrors: a negative charge is an error naming it; a closed
// store never admits.
func TestChargeErrors(t *testing.T) {
	store := memstore.New()
	lim, _ := sluice.NewLimiter(store, sluice.Policy{Name: "p", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Minute})
	ctx := context.Background()
	if _, err := lim.Charge(ctx, "k", -1); err == nil || err.Error() != `sluice: policy "p": key "k": charge -1: must be >= 0` {
		t.Fatalf("negative charge: %v", err)
	}
	r, _ := lim.Reserve(ctx, "k", 1)
	if _, err := r.Commit(ctx, -1); err == nil {
		t.Fatal("negative commit: no error")
	}
	store.Close()
	if d, err := lim.Charge(ctx, "k", 1); !errors.Is(err, sluice.ErrStoreClosed) || d.Allowed {
		t.Fatalf("charge on a closed store: %+v, %v", d, err)
	}
	if r, err := lim.Reserve(ctx, "k", 1); !errors.Is(err, sluice.ErrStoreClosed) || r.Decision.Allowed {
		t.Fatalf("reserve on a closed store: %+v, %v", r.Decision, err)
	}
}

// TestReserveCommitConcurrent: reservations committed from many goroutines
// at one instant add up exactly. Every commit (5) exceeds its estimate (3),
// and a refused reservation's commit charges all 5, so the bucket holds
// exactly 16·20·5 units whatever the interleaving, and a unit fits again
// exactly when the model says.
func TestReserveCommitConcurrent(t *testing.T) {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	lim, _ := sluice.NewLimiter(store, sluice.Policy{Algorithm: sluice.TokenBucket, Limit: 1000, Period: time.Hour})
	ctx := context.Background()
	var wg sync.WaitGroup
	var admitted atomic.Int64
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				r, err := lim.Reserve(ctx, "k", 3)
				if err != nil {
					t.Error(err)
					return
				}
				if r.Decision.Allowed {
					admitted.Add(3)
				}
				if _, err := r.Commit(ctx, 5); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if admitted.Load() > 1000 {
		t.Fatalf("%d units reserved, over the burst of 1000", admitted.Load())
	}
	// 1600 units: one more fits after 601 units have refilled.
	d, err := lim.AllowN(ctx, "k", 0)
	if want := 601 * time.Hour / 1000; err != nil || d.Allowed || d.RetryAfter != want {
		t.Fatalf("after 1600 units: %+v, %v; want RetryAfter %v", d, err, want)
	}
}

// TestChargeObserved: Reserve, Commit and Charge are observed, with the
// cost each sent to the store.
func TestChargeObserved(t *testing.T) {
	store := memstore.New(memstore.WithClock(sluicetest.NewClock(time.Unix(0, 0))))
	defer store.Close()
	var seen []int64
	lim, _ := sluice.NewLimiter(store, sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Minute},
		sluice.WithObserver(func(_ context.Context, _ sluice.Policy, _ string, cost int64, _ sluice.Decision, _ error) {
			seen = append(seen, cost)
		}))
	ctx := context.Background()
	r, _ := lim.Reserve(ctx, "k", 3)
	r.Commit(ctx, 5)
	lim.Charge(ctx, "k", 4)
	if fmt.Sprint(seen) != "[3 2 4]" {
		t.Fatalf("observed costs %v, want [3 2 4] (reserve, the commit's charge, a charge)", seen)
	}
}
