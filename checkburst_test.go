// SPDX-License-Identifier: Apache-2.0

package sluice_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestCheckBurst: a Check with a Burst is decided with that burst on the
// policy's own state: on a bucket of 10 (1 per second) with 6 taken, a
// check with Burst 7 admits 1 more, and the limiter sees all of them.
func TestCheckBurst(t *testing.T) {
	store := memstore.New(memstore.WithClock(sluicetest.NewClock(time.Unix(0, 0))), memstore.WithSweepInterval(0))
	defer store.Close()
	l, err := sluice.NewLimiter(store, sluice.Policy{Name: "b", Algorithm: sluice.TokenBucket, Limit: 1, Period: time.Second, Burst: 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if d, err := l.AllowN(ctx, "k", 6); err != nil || !d.Allowed {
		t.Fatalf("AllowN(6): %+v, %v", d, err)
	}
	check := sluice.Check{Limiter: l, Key: "k", Burst: 7}
	for i, want := range []bool{true, false} {
		res, err := sluice.AllowAll(ctx, check)
		if err != nil || res.Allowed != want {
			t.Fatalf("check %d with Burst 7: %+v, %v; want allowed %v", i, res, err, want)
		}
	}
	if d, err := l.AllowN(ctx, "k", 3); err != nil || !d.Allowed || d.Remaining != 0 {
		t.Fatalf("the limiter after 7 taken: %+v, %v; want 3 more admitted, none left", d, err)
	}
}

// A Check's Burst must suit its policy: a bucket kind, between 1 and the
// capacity, and a Name unless it is the capacity. A bad one refuses the
// batch with an error naming it.
func TestCheckBurstInvalid(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	limiter := func(p sluice.Policy) *sluice.Limiter {
		l, err := sluice.NewLimiter(store, p)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	bucket := limiter(sluice.Policy{Name: "b", Algorithm: sluice.LeakyBucket, Limit: 1, Period: time.Second, Burst: 10})
	unnamed := limiter(sluice.Policy{Algorithm: sluice.LeakyBucket, Limit: 1, Period: time.Second, Burst: 10})
	window := limiter(sluice.Policy{Name: "w", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Second})
	for _, c := range []struct {
		check sluice.Check
		want  string
	}{
		{sluice.Check{Limiter: bucket, Burst: 11}, `check 0: policy "b": burst 11: must be between 1 and the policy's capacity 10`},
		{sluice.Check{Limiter: bucket, Burst: -1}, `policy "b": burst -1: must be between 1`},
		{sluice.Check{Limiter: window, Burst: 5}, `policy "w": burst 5: fixed-window has no burst`},
		{sluice.Check{Limiter: unnamed, Burst: 5}, `burst 5: an unnamed policy shares its state only with identical ones`},
	} {
		res, err := sluice.AllowAll(context.Background(), c.check)
		if err == nil || !strings.Contains(err.Error(), c.want) || res.Allowed {
			t.Errorf("%+v: %+v, %v; want refused, an error containing %q", c.check, res, err, c.want)
		}
	}
	if res, err := sluice.AllowAll(context.Background(), sluice.Check{Limiter: unnamed, Burst: 10}); err != nil || !res.Allowed {
		t.Errorf("an unnamed policy with its own capacity as Burst: %+v, %v; want admitted", res, err)
	}
}

// While the store fails, a FailLocal check with a Burst decides on its
// local share of that burst, ⌊Burst/r⌋: a bucket of 30 over 2 replicas
// has a share of 15, and a Burst of 10 a share of 5.
func TestCheckBurstLocalShare(t *testing.T) {
	local := memstore.New(memstore.WithClock(sluicetest.NewClock(time.Unix(0, 0))), memstore.WithSweepInterval(0))
	defer local.Close()
	l, err := sluice.NewLimiter(failingStore{local}, sluice.Policy{Name: "b", Algorithm: sluice.TokenBucket, Limit: 2, Period: time.Second, Burst: 30},
		sluice.WithFailureMode(sluice.FailLocal), sluice.WithLocalStore(local, sluice.FixedReplicas(2)))
	if err != nil {
		t.Fatal(err)
	}
	admitted := 0
	for range 20 {
		res, err := sluice.AllowAll(context.Background(), sluice.Check{Limiter: l, Key: "k", Burst: 10})
		if !errors.Is(err, errDown) {
			t.Fatalf("AllowAll: %v; want the store's error", err)
		}
		if res.Allowed {
			admitted++
		}
	}
	if admitted != 5 {
		t.Errorf("%d admitted on the local share; want 5 (⌊10/2⌋)", admitted)
	}
}
