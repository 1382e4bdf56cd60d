// SPDX-License-Identifier: Apache-2.0

package lease_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/shard"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/storetest"
)

// The capabilities a lease.Store forwards (see sluice.Store).
var (
	_ sluice.Refunder    = (*lease.Store)(nil)
	_ lease.Giver        = (*lease.Store)(nil)
	_ shard.Keyer        = (*lease.Store)(nil)
	_ inflight.Semaphore = (*lease.Store)(nil)
)

// bare is a store with only the methods of sluice.Store: no capability.
type bare struct{ sluice.Store }

// stores returns the stores the capability tests run over, each on its
// own fake clock: memstore, memstore with no capability, and a real Redis
// (started once for the calling test, a key prefix per store).
func stores(t *testing.T) []struct {
	name string
	new  func(t *testing.T) storetest.Harness
} {
	addr := sluicetest.StartRedis(t)
	n := 0
	mem := func(t *testing.T) storetest.Harness {
		clk := sluicetest.NewClock(time.Unix(0, 0))
		s := memstore.New(memstore.WithClock(clk), memstore.WithSweepInterval(0))
		t.Cleanup(func() { s.Close() })
		return storetest.Harness{Store: s, Clock: clk}
	}
	return []struct {
		name string
		new  func(t *testing.T) storetest.Harness
	}{
		{"mem", mem},
		{"bare", func(t *testing.T) storetest.Harness {
			h := mem(t)
			h.Store = bare{h.Store}
			return h
		}},
		{"redis", func(t *testing.T) storetest.Harness {
			clk := sluicetest.NewClock(time.Unix(0, 0))
			n++
			s, err := redisstore.Open("redis://"+addr, redisstore.WithClock(clk), redisstore.WithPrefix(fmt.Sprintf("t%d:", n)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return storetest.Harness{Store: s, Clock: clk}
		}},
	}
}

// TestWrapper: a lease.Store forwards every capability of the store it
// wraps (Binder, Refunder, lease.Giver, shard.Keyer, inflight.Semaphore)
// for a policy it does not lease, with the neutral answer over a store that
// lacks one (the sluice.Store doc). Before, it was only a Binder: a
// Reservation gave nothing back, shard.New over it named sub-keys key~i
// over Redis, and an in-flight limit found no Semaphore.
func TestWrapper(t *testing.T) {
	notWrapper := lease.WithPolicies(func(p sluice.Policy) bool { return p.Name != storetest.WrapperPolicy.Name })
	for _, st := range stores(t) {
		t.Run(st.name, func(t *testing.T) {
			h := st.new(t)
			storetest.Wrapper(t, h, func(s sluice.Store) sluice.Store {
				return lease.New(s, lease.WithClock(h.Clock), notWrapper)
			})
		})
	}
}

// TestReserveCommitGivesBack: a Reservation committed below its estimate
// through lease.New, for a policy it does not lease, gives the difference
// back as the wrapped store does (sluice.Reservation.Commit, Refunder).
// Before, lease.Store was no Refunder: Remaining after Commit(2) of
// Reserve(8) was 2 instead of 8.
func TestReserveCommitGivesBack(t *testing.T) {
	ctx := context.Background()
	p := sluice.Policy{Name: "est", Algorithm: sluice.GCRA, Limit: 10, Period: time.Second}
	commit := func(store sluice.Store) sluice.Decision {
		lim, err := sluice.NewLimiter(store, p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := lim.Reserve(ctx, "k", 8)
		if err != nil || !r.Decision.Allowed {
			t.Fatalf("Reserve(8): %+v %v", r.Decision, err)
		}
		d, err := r.Commit(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	clk := sluicetest.NewClock(time.Unix(0, 0))
	direct := commit(memstore.New(memstore.WithClock(clk)))
	none := func(sluice.Policy) bool { return false }
	leased := commit(lease.New(memstore.New(memstore.WithClock(clk)), lease.WithClock(clk), lease.WithPolicies(none)))
	if leased != direct || direct.Remaining != 8 {
		t.Errorf("Commit(2) of Reserve(8) through lease.New (policy not leased): %+v\n directly on memstore: %+v", leased, direct)
	}
}

// TestRefundIntoBlock: a Reservation decided from a block and committed
// below its estimate puts the difference back into the block while nothing
// else has spent from it (as if the take had cost less); once another
// request has, it gives nothing back. Counted to the exact limit of a
// fixed window, on memstore and on Redis.
func TestRefundIntoBlock(t *testing.T) {
	ctx := context.Background()
	p := sluice.Policy{Name: "fw", Algorithm: sluice.FixedWindow, Limit: 100, Period: time.Hour}
	for _, st := range stores(t) {
		if st.name == "bare" {
			continue // the same as mem: the block is this package's
		}
		t.Run(st.name, func(t *testing.T) {
			h := st.new(t)
			ls := lease.New(h.Store, lease.WithClock(h.Clock), lease.WithTarget(time.Second))
			lim, err := sluice.NewLimiter(ls, p)
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				key     string
				between bool // an Allow between Reserve and Commit
				left    int
			}{
				{"given", false, 100 - 20 - 2},
				{"spent-since", true, 100 - 20 - 8 - 1},
			} {
				for range 20 { // blocks grow: 1, 2, 4, 8, ...
					h.Clock.Advance(time.Millisecond)
					if d, err := lim.Allow(ctx, tc.key); err != nil || !d.Allowed {
						t.Fatalf("%s: warm-up Allow: %+v %v", tc.key, d, err)
					}
				}
				r, err := lim.Reserve(ctx, tc.key, 8)
				if err != nil || !r.Decision.Allowed {
					t.Fatalf("%s: Reserve(8): %+v %v", tc.key, r.Decision, err)
				}
				if tc.between {
					if d, err := lim.Allow(ctx, tc.key); err != nil || !d.Allowed {
						t.Fatalf("%s: Allow: %+v %v", tc.key, d, err)
					}
				}
				spent := ls.Stats(p).Spent
				if _, err := r.Commit(ctx, 2); err != nil {
					t.Fatal(err)
				}
				if back := spent - ls.Stats(p).Spent; tc.between && back != 0 || !tc.between && back != 6 {
					t.Errorf("%s: Commit(2) of Reserve(8) put %d units back into the block", tc.key, back)
				}
				admitted := 0
				for range 200 {
					if d, err := lim.Allow(ctx, tc.key); err == nil && d.Allowed {
						admitted++
					}
				}
				if admitted != tc.left {
					t.Errorf("%s: %d admitted after the commit, want %d (the window's limit exactly)", tc.key, admitted, tc.left)
				}
			}
		})
	}
}

// TestLeasedGiveNothing: the neutral answers for a policy a lease.Store
// leases. Its TakeStamped is its Take and Give gives nothing back, so a
// lease.Store over another (which takes its blocks with TakeStamped) keeps
// the exact limit; a Refund with a stamp that is not this Store's block's
// gives nothing back.
func TestLeasedGiveNothing(t *testing.T) {
	ctx := context.Background()
	clk := sluicetest.NewClock(time.Unix(0, 0))
	mem := memstore.New(memstore.WithClock(clk))
	defer mem.Close()
	inner := lease.New(mem, lease.WithClock(clk))
	p := sluice.Policy{Name: "tb", Algorithm: sluice.TokenBucket, Limit: 10, Period: time.Second}
	d, stamp, err := inner.TakeStamped(ctx, p, "k", 3)
	if err != nil || !d.Allowed {
		t.Fatalf("TakeStamped(3): %+v %v", d, err)
	}
	if gave, err := inner.Give(ctx, p, "k", stamp, 3); gave || err != nil {
		t.Errorf("Give of a leased take: %v %v; want nothing given back", gave, err)
	}
	if gave, err := inner.Refund(ctx, p, "k", "not a stamp", 3); gave || err != nil {
		t.Errorf("Refund with a foreign stamp: %v %v; want nothing given back", gave, err)
	}
	lim, err := sluice.NewLimiter(lease.New(inner, lease.WithClock(clk)), p)
	if err != nil {
		t.Fatal(err)
	}
	admitted := 0
	for range 20 {
		if d, err := lim.Allow(ctx, "k"); err == nil && d.Allowed {
			admitted++
		}
	}
	if admitted != 7 {
		t.Errorf("a lease over a lease admitted %d of the 7 units left", admitted)
	}
}

// TestInFlightOverLease: an in-flight limit over a lease.Store (the store
// a leasing process has) holds its slots in the wrapped store.
func TestInFlightOverLease(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	defer mem.Close()
	f, err := inflight.New(lease.New(mem), "calls", 1)
	if err != nil {
		t.Fatal(err)
	}
	h, s, err := f.Acquire(ctx, "k", true)
	if err != nil || h == nil || !s.Acquired {
		t.Fatalf("first Acquire: %+v %v", s, err)
	}
	if h2, s, err := f.Acquire(ctx, "k", true); err != nil || h2 != nil || s.Acquired {
		t.Errorf("second Acquire of a limit of 1: %+v %v; want refused", s, err)
	}
	if s, err := mem.Acquire(ctx, "calls", "k", "other", 1, time.Minute); err != nil || s.Acquired {
		t.Errorf("the wrapped store does not see the slot: %+v %v", s, err)
	}
}
