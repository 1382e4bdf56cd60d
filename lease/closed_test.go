// SPDX-License-Identifier: Apache-2.0

package lease_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// stalling is a store whose next Take, once armed, waits for release.
type stalling struct {
	sluice.Store
	armed            bool
	entered, release chan struct{}
}

func (g *stalling) Take(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, error) {
	if g.armed {
		g.armed = false
		close(g.entered)
		<-g.release
	}
	return g.Store.Take(ctx, p, key, cost)
}

// TestClosedLeasesNeverAdmit: after Close, a lease store answers every Take
// with an error wrapping sluice.ErrStoreClosed: a refusal it would reuse,
// and a block that Close could not give back (its key was held by a
// request waiting for the store past Close's second), which kept
// admitting.
func TestClosedLeasesNeverAdmit(t *testing.T) {
	p := sluice.Policy{Name: "fw", Algorithm: sluice.FixedWindow, Limit: 100, Period: time.Minute}
	t.Run("reused refusal", func(t *testing.T) {
		clock := sluicetest.NewClock(time.Unix(0, 0))
		small := sluice.Policy{Name: "fw2", Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Minute}
		ls := lease.New(memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0)), lease.WithClock(clock))
		for range 3 { // the third is refused, and the refusal kept
			if _, err := ls.Take(context.Background(), small, "k", 1); err != nil {
				t.Fatal(err)
			}
		}
		ls.Close()
		if d, err := ls.Take(context.Background(), small, "k", 1); d.Allowed || !errors.Is(err, sluice.ErrStoreClosed) {
			t.Fatalf("Take after Close: %+v, %v; want an error wrapping ErrStoreClosed", d, err)
		}
	})
	t.Run("block not given back", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			clock := sluicetest.NewClock(time.Unix(0, 0))
			g := &stalling{Store: memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0)), entered: make(chan struct{}), release: make(chan struct{})}
			ls := lease.New(g, lease.WithClock(clock))
			take := func(n int64) (sluice.Decision, error) { return ls.Take(context.Background(), p, "k", n) }
			for range 2 { // the second leases a block of 2: 1 unit left here
				if d, err := take(1); err != nil || !d.Allowed {
					t.Fatal(d, err)
				}
				clock.Advance(time.Millisecond)
			}
			g.armed = true
			done := make(chan struct{})
			go func() { take(2); close(done) }() // holds k's lease across a store call
			<-g.entered
			ls.Close() // gives up on k after its second
			close(g.release)
			<-done
			if d, err := take(1); d.Allowed || !errors.Is(err, sluice.ErrStoreClosed) {
				t.Fatalf("Take after Close: %+v, %v; want refused with an error wrapping ErrStoreClosed", d, err)
			}
		})
	})
}
