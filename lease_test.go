// SPDX-License-Identifier: Apache-2.0

package sluice_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestLeaseUnitDeadline drives a token-bucket block to the edge of its
// validity: a unit of a block taken from the TAT A is good until A + (i−1)·T
// (here less the 1 ns ResetAfter may be rounded up by), and not after.
func TestLeaseUnitDeadline(t *testing.T) {
	t0 := time.Unix(0, 0)
	clock := sluicetest.NewClock(t0)
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	// T = 100 ms.
	p := sluice.Policy{Name: "edge", Algorithm: sluice.TokenBucket, Limit: 10, Period: time.Second}
	l, err := sluice.NewLimiter(store, p, sluice.WithLease(50*time.Millisecond), sluice.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	allow := func(at time.Duration) (sluice.Decision, uint64) {
		t.Helper()
		clock.Set(t0.Add(at))
		calls := l.LeaseStats().StoreCalls
		d, err := l.Allow(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		return d, l.LeaseStats().StoreCalls - calls
	}
	// The first block is one unit: the TAT moves to 100 ms.
	if d, calls := allow(0); !d.Allowed || calls != 1 {
		t.Fatalf("t=0: %+v, %d store calls", d, calls)
	}
	// 1 ms later the rate (1 per ms) asks for more: a block of 2 (twice
	// the last), A = 100 ms, the TAT 300 ms; one unit spent now.
	if d, calls := allow(time.Millisecond); !d.Allowed || calls != 1 {
		t.Fatalf("t=1ms: %+v, %d store calls", d, calls)
	}
	if s := l.LeaseStats(); s.Taken != 3 || s.Spent != 2 {
		t.Fatalf("after the second block: %+v, want 3 taken, 2 spent", s)
	}
	// The block's second unit is good until A + T = 200 ms.
	if d, calls := allow(200*time.Millisecond - time.Nanosecond); !d.Allowed || calls != 0 {
		t.Errorf("1 ns before the unit's deadline: %+v, %d store calls; want a local admission", d, calls)
	}
	// A second block, spent to its last unit, then one past it.
	clock.Set(t0)
	store2 := memstore.New(memstore.WithClock(clock))
	defer store2.Close()
	l, _ = sluice.NewLimiter(store2, p, sluice.WithLease(50*time.Millisecond), sluice.WithClock(clock))
	allow(0)
	allow(time.Millisecond)
	if d, calls := allow(200 * time.Millisecond); calls == 0 {
		t.Errorf("at the unit's deadline: %+v decided locally; want the store asked", d)
	}
}

// TestLeaseRefused: algorithms where a lease cannot keep the exact limit
// are refused with an error naming them, and shards reject bad counts.
func TestLeaseRefused(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	for _, a := range []sluice.Algorithm{sluice.SlidingLog, sluice.SlidingWindow, sluice.LeakyBucket} {
		_, err := sluice.NewLimiter(store, sluice.Policy{Name: "x", Algorithm: a, Limit: 10, Period: time.Second}, sluice.WithLease(0))
		if err == nil || !strings.Contains(err.Error(), "lease: not supported for algorithm "+string(a)) {
			t.Errorf("%s with a lease: %v", a, err)
		}
	}
	for _, tc := range []struct {
		p    sluice.Policy
		n    int
		want string
	}{
		{sluice.Policy{Algorithm: sluice.GCRA, Limit: 10, Period: time.Second}, -1, "shards -1: must be between 1 and 64"},
		{sluice.Policy{Algorithm: sluice.GCRA, Limit: 100, Period: time.Second}, 65, "shards 65: must be between 1 and 64"},
		{sluice.Policy{Algorithm: sluice.GCRA, Limit: 10, Period: time.Second, Burst: 2}, 3, "shards 3: more than the limit 10 or burst 2"},
		{sluice.Policy{Algorithm: sluice.LeakyBucket, Limit: 10, Period: time.Second}, 2, "not supported for leaky-bucket"},
	} {
		if _, err := sluice.NewLimiter(store, tc.p, sluice.WithShards(tc.n)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v with %d shards: %v, want %q", tc.p, tc.n, err, tc.want)
		}
	}
	_, err := sluice.NewLimiter(store, sluice.Policy{Algorithm: sluice.GCRA, Limit: 10, Period: time.Second}, sluice.WithLease(0), sluice.WithShards(2))
	if err == nil || !strings.Contains(err.Error(), "cannot be combined with leases") {
		t.Errorf("leases and shards: %v", err)
	}
}

// TestShardsAllowAll: in an AllowAll batch a sharded limit offers one shard,
// all-or-nothing with the others, and reports the whole policy's limit.
func TestShardsAllowAll(t *testing.T) {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	sharded, _ := sluice.NewLimiter(store, sluice.Policy{Name: "s", Algorithm: sluice.FixedWindow, Limit: 6, Period: time.Second}, sluice.WithShards(3))
	other, _ := sluice.NewLimiter(store, sluice.Policy{Name: "o", Algorithm: sluice.FixedWindow, Limit: 4, Period: time.Second})
	ctx := context.Background()
	admitted := 0
	for range 10 {
		res, err := sluice.AllowAll(ctx, sluice.Check{Limiter: sharded, Key: "k"}, sluice.Check{Limiter: other, Key: "k", Cost: 1})
		if err != nil {
			t.Fatal(err)
		}
		if res.Decisions[0].Limit != 6 {
			t.Errorf("the sharded check reports limit %d, want 6", res.Decisions[0].Limit)
		}
		if res.Allowed {
			admitted++
		}
	}
	if admitted != 4 {
		t.Errorf("admitted %d, want 4 (the other limit)", admitted)
	}
	// What was refused consumed nothing: the shards hold 4 of 6 units.
	d, err := sharded.AllowN(ctx, "k", 1)
	if err != nil || !d.Allowed {
		t.Errorf("the sharded limit after the batch: %+v %v", d, err)
	}
	if _, err := sharded.Wait(ctx, "k", 3); !errors.Is(err, sluice.ErrImpossible) {
		t.Errorf("Wait for 3 units, more than any of the 3 shards of 6 holds: %v, want ErrImpossible", err)
	}
}

// TestReleaseLeases: a retired limiter gives its unspent block back, and
// another process can take those units at once.
func TestReleaseLeases(t *testing.T) {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	p := sluice.Policy{Name: "rel", Algorithm: sluice.FixedWindow, Limit: 100, Period: time.Hour}
	a, _ := sluice.NewLimiter(store, p, sluice.WithLease(time.Second), sluice.WithClock(clock))
	b, _ := sluice.NewLimiter(store, p, sluice.WithLease(time.Second), sluice.WithClock(clock))
	ctx := context.Background()
	for range 20 { // a grows blocks: 1, 2, 4, 8, 16, ...
		clock.Advance(time.Millisecond)
		if d, err := a.Allow(ctx, "k"); err != nil || !d.Allowed {
			t.Fatalf("a: %+v %v", d, err)
		}
	}
	held := a.LeaseStats().Taken - a.LeaseStats().Spent
	if held == 0 {
		t.Fatal("a holds nothing: the test needs a live block")
	}
	if err := a.ReleaseLeases(ctx); err != nil {
		t.Fatal(err)
	}
	if s := a.LeaseStats(); s.Returned != held {
		t.Errorf("a returned %d of the %d units it held", s.Returned, held)
	}
	admitted := 0
	for range 100 {
		if d, err := b.Allow(ctx, "k"); err != nil {
			t.Fatal(err)
		} else if d.Allowed {
			admitted++
		}
	}
	if admitted != 80 {
		t.Errorf("b admitted %d after a released its block, want the 80 a did not spend", admitted)
	}
}

// TestLeaseManyKeys: a leasing limiter over many keys, from many goroutines,
// sweeps idle keys from its table while others are being decided: every
// key still gets exactly its limit.
func TestLeaseManyKeys(t *testing.T) {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	p := sluice.Policy{Name: "many", Algorithm: sluice.FixedWindow, Limit: 3, Period: time.Hour}
	l, _ := sluice.NewLimiter(store, p, sluice.WithLease(0), sluice.WithClock(clock))
	ctx := context.Background()
	const keys, workers = 3000, 8
	var wg sync.WaitGroup
	admitted := make([]atomic.Int64, keys)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range keys {
				k := (i*7 + w*131) % keys
				d, err := l.Allow(ctx, "key-"+strconv.Itoa(k))
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted[k].Add(1)
				}
			}
		}()
	}
	wg.Wait()
	for k := range admitted {
		if n := admitted[k].Load(); n != 3 {
			t.Fatalf("key %d: admitted %d of %d requests, want exactly the limit 3", k, n, workers)
		}
	}
}

// TestAllowAllOneCheck: a batch of one check is decided as that limiter's
// AllowN decides it: through its leases, and for a sharded limit by every
// shard in turn (the contract: refused only when every shard would refuse).
func TestAllowAllOneCheck(t *testing.T) {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	ctx := context.Background()
	sharded, err := sluice.NewLimiter(store, sluice.Policy{Name: "s", Algorithm: sluice.FixedWindow, Limit: 4, Period: time.Second}, sluice.WithShards(2))
	if err != nil {
		t.Fatal(err)
	}
	for i, cost := range []int64{2, 1, 1} { // 4 units of 4: the last finds one shard empty, the other not
		res, err := sluice.AllowAll(ctx, sluice.Check{Limiter: sharded, Key: "k", Cost: cost})
		if err != nil || !res.Allowed || res.Refused != -1 || res.Decisions[0].Limit != 4 {
			t.Errorf("request %d (cost %d): %+v %v, want admitted", i, cost, res, err)
		}
	}
	leased, err := sluice.NewLimiter(store, sluice.Policy{Name: "l", Algorithm: sluice.TokenBucket, Limit: 100, Period: time.Second},
		sluice.WithLease(0), sluice.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if res, err := sluice.AllowAll(ctx, sluice.Check{Limiter: leased, Key: "k", Cost: 1}); err != nil || !res.Allowed {
			t.Fatalf("leased: %+v %v", res, err)
		}
	}
	if st := leased.LeaseStats(); st.Spent != 10 {
		t.Errorf("LeaseStats() = %+v, want 10 units spent from leases", st)
	}
}

// TestLeaseRemaining: a decision made from a lease reports what the key
// has left, as one without leases would: for one process on a fixed
// window, exactly the limit less what it admitted (not the few units its
// block still holds, which made every leased key look at its limit).
func TestLeaseRemaining(t *testing.T) {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	l, err := sluice.NewLimiter(store, sluice.Policy{Name: "w", Algorithm: sluice.FixedWindow, Limit: 100, Period: time.Second},
		sluice.WithLease(0), sluice.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 80 {
		d, err := l.Allow(ctx, "k")
		if err != nil || !d.Allowed {
			t.Fatalf("request %d: %+v %v", i, d, err)
		}
		if want := int64(100 - (i + 1)); d.Remaining != want {
			t.Errorf("request %d: Remaining %d, want %d", i, d.Remaining, want)
		}
		clock.Advance(time.Millisecond)
	}
	if st := l.LeaseStats(); st.Local == 0 {
		t.Errorf("LeaseStats() = %+v: no local decision, the test tests nothing", st)
	}
}
