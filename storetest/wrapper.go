// SPDX-License-Identifier: Apache-2.0

package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/shard"
)

// WrapperPolicy is the policy Wrapper decides with: a wrapper under test
// must pass it straight to the store it wraps (neither lease nor shard it).
var WrapperPolicy = sluice.Policy{Name: "wrapper", Algorithm: sluice.GCRA, Limit: 10, Period: time.Second}

// Wrapper checks a store wrapper, wrap(h.Store), as the sluice.Store doc
// asks of one: it is a sluice.Binder, a sluice.Refunder, a lease.Giver, a
// shard.Keyer and an inflight.Semaphore, and each of them answers as
// h.Store does where h.Store has that capability, else with its neutral
// answer: Refund and Give give nothing back, a shard key is key~i, and an
// in-flight call fails with an error. Every check reads the result in
// h.Store itself. To check the neutral answers, give a harness whose Store
// has only the methods of sluice.Store (struct{ sluice.Store }).
func Wrapper(t *testing.T, h Harness, wrap func(sluice.Store) sluice.Store) {
	t.Helper()
	ctx := context.Background()
	p := WrapperPolicy
	h.Clock.Set(time.Unix(1_000_000, 0))
	inner := h.Store
	w := wrap(inner)
	left := func(key string) int64 {
		t.Helper()
		d, err := inner.Take(ctx, p, key, 0)
		if err != nil {
			t.Fatalf("peek at %q in the wrapped store: %v", key, err)
		}
		return d.Remaining
	}

	t.Run("Binder", func(t *testing.T) {
		b, ok := w.(sluice.Binder)
		if !ok {
			t.Fatalf("%T is no sluice.Binder", w)
		}
		bp, err := b.Bind(p)
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := bp.(interface{ Store() sluice.Store }); ok && o.Store() != w {
			t.Errorf("the binding's Store() = %T, want the wrapper (sluice.Bound would not use it)", o.Store())
		}
		if d, err := bp.Take(ctx, "bind", 3); err != nil || !d.Allowed {
			t.Fatalf("the binding's Take(3): %+v %v", d, err)
		}
		if got := left("bind"); got != 7 {
			t.Errorf("after the binding's Take(3) the wrapped store has %d left, want 7", got)
		}
	})

	t.Run("Refunder", func(t *testing.T) {
		if _, ok := w.(sluice.Refunder); !ok {
			t.Fatalf("%T is no sluice.Refunder", w)
		}
		lim, err := sluice.NewLimiter(w, p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := lim.Reserve(ctx, "refund", 8)
		if err != nil || !r.Decision.Allowed {
			t.Fatalf("Reserve(8): %+v %v", r.Decision, err)
		}
		if _, err := r.Commit(ctx, 2); err != nil {
			t.Fatal(err)
		}
		want := int64(2) // nothing given back
		if _, ok := inner.(sluice.Refunder); ok {
			want = 8
		}
		if got := left("refund"); got != want {
			t.Errorf("after Commit(2) of Reserve(8) the wrapped store has %d left, want %d", got, want)
		}
	})

	t.Run("Giver", func(t *testing.T) {
		g, ok := w.(lease.Giver)
		if !ok {
			t.Fatalf("%T is no lease.Giver", w)
		}
		d, stamp, err := g.TakeStamped(ctx, p, "give", 5)
		if err != nil || !d.Allowed {
			t.Fatalf("TakeStamped(5): %+v %v", d, err)
		}
		gave, err := g.Give(ctx, p, "give", stamp, 5)
		if err != nil {
			t.Fatal(err)
		}
		_, giver := inner.(lease.Giver)
		want := int64(5)
		if giver {
			want = 10
		}
		if gave != giver || left("give") != want {
			t.Errorf("Give(5) after TakeStamped(5) = %v, the wrapped store has %d left; want %v and %d", gave, left("give"), giver, want)
		}
	})

	t.Run("Keyer", func(t *testing.T) {
		k, ok := w.(shard.Keyer)
		if !ok {
			t.Fatalf("%T is no shard.Keyer", w)
		}
		for i, q := range shard.Policies(p, 4) {
			if got, want := k.ShardKey(q, "hot", i, 4), ShardKey(inner, q, "hot", i, 4); got != want {
				t.Errorf("ShardKey(hot, %d, 4) = %q, want the wrapped store's %q", i, got, want)
			}
		}
	})

	t.Run("Semaphore", func(t *testing.T) {
		sem, ok := w.(inflight.Semaphore)
		if !ok {
			t.Fatalf("%T is no inflight.Semaphore", w)
		}
		isem, ok := inner.(inflight.Semaphore)
		if !ok {
			if s, err := sem.Acquire(ctx, "c", "k", "a", 1, time.Minute); err == nil || s.Acquired {
				t.Errorf("Acquire over a store that is no Semaphore: %+v %v; want an error", s, err)
			}
			if _, err := sem.Extend(ctx, "c", "k", "a", time.Minute); err == nil {
				t.Error("Extend over a store that is no Semaphore: no error")
			}
			if _, err := sem.Release(ctx, "c", "k", "a"); err == nil {
				t.Error("Release over a store that is no Semaphore: no error")
			}
			return
		}
		step := func(what string, s inflight.Slots, err error, acquired bool, held int64) {
			t.Helper()
			if err != nil || s.Acquired != acquired || s.Held != held {
				t.Errorf("%s: %+v %v; want Acquired %v, Held %d", what, s, err, acquired, held)
			}
		}
		s, err := sem.Acquire(ctx, "c", "k", "a", 1, time.Minute)
		step("Acquire(a) through the wrapper", s, err, true, 1)
		s, err = isem.Acquire(ctx, "c", "k", "b", 1, time.Minute)
		step("Acquire(b) in the wrapped store while a holds the slot", s, err, false, 1)
		s, err = sem.Extend(ctx, "c", "k", "a", time.Minute)
		step("Extend(a) through the wrapper", s, err, true, 1)
		s, err = sem.Release(ctx, "c", "k", "a")
		step("Release(a) through the wrapper", s, err, true, 0)
		s, err = isem.Acquire(ctx, "c", "k", "b", 1, time.Minute)
		step("Acquire(b) in the wrapped store after a's release", s, err, true, 1)
	})

	// Last, as it closes the store: after Close a Refund with no stamp
	// (nothing to give back) still says the store is closed, as every
	// method does, where the wrapped store can say it.
	t.Run("RefundAfterClose", func(t *testing.T) {
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		_, isRefunder := inner.(sluice.Refunder)
		ok, err := w.(sluice.Refunder).Refund(ctx, p, "refund", nil, 1)
		if isRefunder && (ok || !errors.Is(err, sluice.ErrStoreClosed)) {
			t.Errorf("Refund with no stamp after Close: %v %v; want an error wrapping sluice.ErrStoreClosed", ok, err)
		}
	})
}
