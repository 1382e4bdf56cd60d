// SPDX-License-Identifier: Apache-2.0

package sluice_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// o14Down is a store whose backend cannot be reached: every call fails
// with an ordinary store error.
type o14Down struct{}

var errO14Down = errors.New("dial tcp: connection refused")

func (o14Down) Take(context.Context, sluice.Policy, string, int64) (sluice.Decision, error) {
	return sluice.Decision{}, errO14Down
}
func (o14Down) TakeAll(context.Context, []sluice.Request, []sluice.Decision) error {
	return errO14Down
}
func (o14Down) Reset(context.Context, sluice.Policy, string) error { return errO14Down }
func (o14Down) Close() error                                       { return nil }

// TestWaitLeakyFailLocalTakesShare: under FailLocal, Wait on a leaky-bucket
// limiter whose store is down answers as AllowN does, taking from the local
// share (its queue peek's decision, a cost-0 one on the local store, was
// returned as is: every caller was admitted).
func TestWaitLeakyFailLocalTakesShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		local := memstore.New()
		defer local.Close()
		p := sluice.Policy{Name: "o14", Algorithm: sluice.LeakyBucket, Limit: 1, Period: time.Hour, Burst: 2}
		lim, err := sluice.NewLimiter(o14Down{}, p, sluice.WithFailureMode(sluice.FailLocal), sluice.WithLocalStore(local, nil))
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		admitted := 0
		for range 10 {
			d, err := lim.Wait(ctx, "k", 1)
			if err == nil {
				t.Fatal("Wait on a failing store returned no error")
			}
			if d.Allowed {
				admitted++
			}
		}
		// AllowN, for comparison, admits at most the burst of the local share.
		if admitted > int(p.Burst) {
			t.Errorf("FailLocal leaky-bucket Wait admitted %d of 10 requests during an outage; the local share (burst %d, 1/hour) admits at most %d", admitted, p.Burst, p.Burst)
		}
	})
}

// TestWaitLeakyShortDeadlineAtOnce: a leaky-bucket Wait whose deadline
// comes before its RetryAfter plus the queue delay after it returns at
// once, taking nothing (it slept the RetryAfter first, then found the
// delay would not fit).
func TestWaitLeakyShortDeadlineAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New()
		defer s.Close()
		p := sluice.Policy{Algorithm: sluice.LeakyBucket, Limit: 10, Period: time.Second, Burst: 10}
		lim, err := sluice.NewLimiter(s, p)
		if err != nil {
			t.Fatal(err)
		}
		if d, err := lim.AllowN(t.Context(), "k", 10); err != nil || !d.Allowed {
			t.Fatalf("filling the queue: %+v, %v", d, err)
		}
		// The queue is full: one more unit is released after 100 ms (a
		// place frees) + 900 ms (the queue ahead) = 1 s > 500 ms.
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		d, err := lim.Wait(ctx, "k", 1)
		if err == nil || d.Allowed {
			t.Fatalf("Wait with a 500 ms deadline for a 1 s release: %+v, %v", d, err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("Wait returned after %v, want at once (the release needs 1 s, the deadline is 500 ms): %v", waited, err)
		}
	})
}

// TestNewLimiterNilMemstore: a nil *memstore.Store is a nil store:
// NewLimiter refuses it with an error (it panicked in memstore's Bind).
func TestNewLimiterNilMemstore(t *testing.T) {
	var store *memstore.Store // e.g. left nil by a config branch
	p := sluice.Policy{Algorithm: sluice.TokenBucket, Limit: 1, Period: time.Second}
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("NewLimiter over a nil *memstore.Store panicked: %v", r)
		}
	}()
	lim, err := sluice.NewLimiter(store, p)
	if err != nil {
		return // refusing the nil store is fine
	}
	d, err := lim.Allow(context.Background(), "k")
	if d.Allowed || !errors.Is(err, sluice.ErrStoreClosed) {
		t.Errorf("Allow over a nil *memstore.Store: %+v, %v; want a refusal wrapping ErrStoreClosed", d, err)
	}
}

// TestAllowAllFailLocalFallbackConsumesNothing: when the store fails and
// the FailLocal checks' local TakeAll fails too, the batch is refused and
// consumes nothing (the checks were taken one by one, so a refused batch
// spent a local share).
func TestAllowAllFailLocalFallbackConsumesNothing(t *testing.T) {
	ctx := context.Background()
	local := memstore.New(memstore.WithMaxPolicies(1), memstore.WithSweepInterval(0), memstore.WithClock(sluicetest.NewClock(time.Unix(0, 0))))
	defer local.Close()
	pa := sluice.Policy{Name: "a", Algorithm: sluice.TokenBucket, Limit: 1, Period: time.Hour}
	pb := sluice.Policy{Name: "b", Algorithm: sluice.TokenBucket, Limit: 1, Period: time.Hour}
	a, err := sluice.NewLimiter(o14Down{}, pa, sluice.WithFailureMode(sluice.FailLocal), sluice.WithLocalStore(local, nil))
	if err != nil {
		t.Fatal(err)
	}
	b, err := sluice.NewLimiter(o14Down{}, pb, sluice.WithFailureMode(sluice.FailLocal), sluice.WithLocalStore(local, nil))
	if err != nil {
		t.Fatal(err)
	}
	// The local store holds policy a (held while it has a key), so it
	// has no room for b: its TakeAll of [a, b] fails with ErrStoreFull.
	if _, err := local.Take(ctx, pa, "warm", 1); err != nil {
		t.Fatal(err)
	}
	res, _ := sluice.AllowAll(ctx, sluice.Check{Limiter: a, Key: "k"}, sluice.Check{Limiter: b, Key: "k"})
	if res.Allowed {
		t.Skip("the batch was admitted; the local store had room")
	}
	d, err := local.Take(ctx, pa, "k", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Allowed {
		t.Errorf("refused AllowAll batch (Refused=%d) consumed check 0's local share: a peek on it now %+v", res.Refused, d)
	}
}
