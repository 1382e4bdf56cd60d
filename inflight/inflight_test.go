// SPDX-License-Identifier: Apache-2.0

package inflight_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/memstore"
)

func newInFlight(t *testing.T, store inflight.Semaphore, limit int64, opts ...inflight.Option) *inflight.Limiter {
	t.Helper()
	f, err := inflight.New(store, "api", limit, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestInFlightReserve drives the reserve to its edges: with limit L and
// fraction f, non-critical requests get exactly L − ⌊L·f⌋ slots and
// critical ones exactly L; ⌊L·f⌋ is taken of the decimal f (100 at 0.29
// reserves 29, where the float product 28.999999999999996 gives 28).
func TestInFlightReserve(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		limit       int64
		frac        float64
		nonCritical int64
	}{{10, 0.2, 8}, {10, 0.25, 8}, {4, 0.25, 3}, {3, 0.34, 2}, {1, 0.5, 1}, {5, 0, 5}, {2, 0.99, 1},
		{100, 0.29, 71}, {100, 0.57, 43}, {90, 0.7, 27}, {50, 0.58, 21}} {
		t.Run(fmt.Sprintf("%d/%v", tc.limit, tc.frac), func(t *testing.T) {
			store := memstore.New(memstore.WithSweepInterval(0))
			defer store.Close()
			f := newInFlight(t, store, tc.limit, inflight.WithReserve(tc.frac))
			for n := range tc.nonCritical {
				if h, _, err := f.Acquire(ctx, "k", false); h == nil || err != nil {
					t.Fatalf("non-critical %d refused (%v)", n, err)
				}
			}
			if h, _, _ := f.Acquire(ctx, "k", false); h != nil {
				t.Fatalf("non-critical %d admitted beyond %d", tc.nonCritical, tc.nonCritical)
			}
			for n := tc.nonCritical; n < tc.limit; n++ {
				if h, _, err := f.Acquire(ctx, "k", true); h == nil || err != nil {
					t.Fatalf("critical request at %d held refused (%v)", n, err)
				}
			}
			if h, _, _ := f.Acquire(ctx, "k", true); h != nil {
				t.Fatalf("critical request admitted beyond the limit %d", tc.limit)
			}
		})
	}
}

// TestReservedIsExactFloor: Reserved(L) is ⌊L·f⌋ for the shortest decimal
// f that reads back as the fraction given to WithReserve, computed exactly
// (here against math/big) for every L up to math.MaxInt64, for short
// decimals whose float products fall just below a whole number (100·0.29 =
// 28.999999999999996), fractions of many digits, and the largest float64
// below 1.
func TestReservedIsExactFloor(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	for _, frac := range []float64{0, 0.29, 0.57, 0.7, 0.58, 0.1 + 0.2, 1.0 / 3, 0.5,
		1.2345678901234567e-5, 5e-324, math.Nextafter(1, 0)} {
		f := newInFlight(t, store, 1, inflight.WithReserve(frac))
		exact, _ := new(big.Rat).SetString(strconv.FormatFloat(frac, 'f', -1, 64))
		for _, l := range []int64{-1, 0, 1, 2, 7, 50, 90, 100, 1000, 1e9, 1<<53 + 1, 1e18, math.MaxInt64 - 1, math.MaxInt64} {
			want := int64(0)
			if l > 0 {
				n := new(big.Int).Mul(big.NewInt(l), exact.Num())
				want = n.Quo(n, exact.Denom()).Int64()
			}
			if got := f.Reserved(l); got != want {
				t.Errorf("reserve %v: Reserved(%d) = %d, want ⌊%d·%s⌋ = %d", frac, l, got, l, exact.RatString(), want)
			}
		}
	}
}

// failing is a Semaphore whose every call fails.
type failing struct{}

var errDown = errors.New("down")

func (failing) Acquire(context.Context, string, string, string, int64, time.Duration) (inflight.Slots, error) {
	return inflight.Slots{}, errDown
}
func (failing) Release(context.Context, string, string, string) (inflight.Slots, error) {
	return inflight.Slots{}, errDown
}
func (failing) Extend(context.Context, string, string, string, time.Duration) (inflight.Slots, error) {
	return inflight.Slots{}, errDown
}

func TestInFlightFailureModes(t *testing.T) {
	ctx := t.Context()
	open := newInFlight(t, failing{}, 1)
	h, _, err := open.Acquire(ctx, "k", false)
	if h == nil || !errors.Is(err, errDown) {
		t.Fatalf("fail open: holder %v, error %v; want a holder and the error", h, err)
	}
	if err := h.Release(ctx, false); err != nil {
		t.Fatalf("releasing a fail-open holder: %v", err)
	}
	closed := newInFlight(t, failing{}, 1, inflight.WithFailureMode(sluice.FailClosed))
	if h, _, err := closed.Acquire(ctx, "k", false); h != nil || !errors.Is(err, errDown) {
		t.Fatalf("fail closed: holder %v, error %v; want none and the error", h, err)
	}
	if _, err := inflight.New(failing{}, "api", 5, inflight.WithFailureMode(sluice.FailLocal)); err == nil {
		t.Fatal("fail local without WithLocal: no error")
	}
	// Fail local, 2 replicas, limit 5: this replica's share is ⌊5/2⌋ = 2
	// slots on the local store, released there.
	local := memstore.New()
	defer local.Close()
	loc := newInFlight(t, failing{}, 5, inflight.WithFailureMode(sluice.FailLocal), inflight.WithLocal(local, sluice.FixedReplicas(2)))
	var held []*inflight.Holder
	for i := range 2 {
		h, _, err := loc.Acquire(ctx, "k", false)
		if h == nil || !errors.Is(err, errDown) {
			t.Fatalf("fail local, slot %d of the share of 2: holder %v, error %v; want a holder and the error", i, h, err)
		}
		held = append(held, h)
	}
	if h, _, err := loc.Acquire(ctx, "k", false); h != nil || !errors.Is(err, errDown) {
		t.Fatalf("fail local, beyond the share: holder %v, error %v; want none and the error", h, err)
	}
	if err := held[0].Release(ctx, false); err != nil {
		t.Fatalf("releasing a local holder: %v", err)
	}
	if h, _, _ := loc.Acquire(ctx, "k", false); h == nil {
		t.Fatal("fail local: no slot after a local holder was released")
	}
	tiny := newInFlight(t, failing{}, 1, inflight.WithFailureMode(sluice.FailLocal), inflight.WithLocal(local, sluice.FixedReplicas(3)))
	if h, _, _ := tiny.Acquire(ctx, "k2", false); h != nil {
		t.Fatal("fail local with a share of ⌊1/3⌋ = 0: a slot was given")
	}
}

func TestInFlightOptionErrors(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	for _, tc := range []struct {
		limit int64
		opt   inflight.Option
		want  string
	}{
		{0, nil, "limit 0: must be at least 1"},
		{1, inflight.WithTTL(time.Microsecond), "WithTTL: 1µs"},
		{1, inflight.WithTTL(math.MaxInt64), "WithTTL: 2562047h47m16.854775807s: must be at least 1ms and at most"},
		{1, inflight.WithReserve(1), "WithReserve: 1"},
		{1, inflight.WithController(nil), "nil Controller"},
	} {
		var opts []inflight.Option
		if tc.opt != nil {
			opts = append(opts, tc.opt)
		}
		_, err := inflight.New(store, "api", tc.limit, opts...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one containing %q", err, tc.want)
		}
	}
}

// TestHolderTTL: on memstore's default clock inside a synctest bubble, a
// holder not released is reclaimed exactly at its TTL, Extend renews it,
// KeepAlive keeps it for as long as the work runs, and Release is
// idempotent.
func TestHolderTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		store := memstore.New(memstore.WithSweepInterval(0))
		defer store.Close()
		f := newInFlight(t, store, 1, inflight.WithTTL(3*time.Second))
		h, _, _ := f.Acquire(ctx, "k", false)
		if h == nil {
			t.Fatal("first acquire refused")
		}
		time.Sleep(3*time.Second - time.Nanosecond)
		if g, _, _ := f.Acquire(ctx, "k", false); g != nil {
			t.Fatal("admitted while the first holder's TTL runs")
		}
		if ok, err := h.Extend(ctx); !ok || err != nil {
			t.Fatalf("Extend before the TTL: %v %v", ok, err)
		}
		time.Sleep(3 * time.Second)
		if ok, _ := h.Extend(ctx); ok {
			t.Fatal("Extend after the TTL passed reported the slot held")
		}
		g, _, _ := f.Acquire(ctx, "k", false)
		if g == nil {
			t.Fatal("the expired holder's slot was not reclaimed")
		}
		if err := h.Release(ctx, false); err != nil { // late: changes nothing
			t.Fatal(err)
		}
		if x, _, _ := f.Acquire(ctx, "k", false); x != nil {
			t.Fatal("a late release of a reclaimed slot freed another holder's slot")
		}
		g.KeepAlive(ctx)
		time.Sleep(time.Minute)
		if x, _, _ := f.Acquire(ctx, "k", false); x != nil {
			t.Fatal("a kept-alive holder lost its slot")
		}
		g.Release(ctx, false)
		g.Release(ctx, false)
		if x, _, _ := f.Acquire(ctx, "k", false); x == nil {
			t.Fatal("released slot not free")
		} else {
			x.Release(ctx, false)
		}
		synctest.Wait() // no KeepAlive timer left running
	})
}

// recorder is a Controller that records its samples.
type recorder struct {
	limit   int64
	samples []inflight.Sample
}

func (r *recorder) Limit() int64              { return r.limit }
func (r *recorder) Observe(s inflight.Sample) { r.samples = append(r.samples, s) }

func TestInFlightController(t *testing.T) {
	now := time.Unix(100, 0)
	rec := &recorder{limit: 2}
	store := memstore.New(memstore.WithSweepInterval(0))
	defer store.Close()
	f := newInFlight(t, store, 0, inflight.WithController(rec), inflight.WithClock(func() time.Time { return now }))
	ctx := t.Context()
	a, _, _ := f.Acquire(ctx, "k", false)
	b, _, _ := f.Acquire(ctx, "k", false)
	if a == nil || b == nil {
		t.Fatal("refused under the controller's limit 2")
	}
	if c, _, _ := f.Acquire(ctx, "k", false); c != nil {
		t.Fatal("admitted beyond the controller's limit 2")
	}
	now = now.Add(250 * time.Millisecond)
	b.Release(ctx, true)
	b.Release(ctx, true) // idempotent: one sample
	want := []inflight.Sample{{At: now, RTT: 250 * time.Millisecond, InFlight: 2, Dropped: true}}
	if fmt.Sprint(rec.samples) != fmt.Sprint(want) {
		t.Fatalf("samples %v, want %v", rec.samples, want)
	}
	rec.limit = 1
	if c, _, _ := f.Acquire(ctx, "k", false); c != nil {
		t.Fatal("admitted beyond the lowered limit 1")
	}
	a.Release(ctx, false)
	if len(rec.samples) != 2 {
		t.Fatalf("%d samples after a's release, want 2", len(rec.samples))
	}
	a, _, _ = f.Acquire(ctx, "k", false)
	if a == nil {
		t.Fatal("refused with every slot free")
	}
	a.Cancel(ctx) // never ran: no sample, the slot back
	a.Release(ctx, true)
	if len(rec.samples) != 2 {
		t.Fatalf("samples %v after Cancel, want none added", rec.samples[2:])
	}
	if c, _, _ := f.Acquire(ctx, "k", false); c == nil {
		t.Fatal("a cancelled holder's slot is not free")
	}
}

// An in-flight limit of 2 per key over memstore.
func ExampleLimiter() {
	store := memstore.New()
	defer store.Close()
	reports, err := inflight.New(store, "reports", 2)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	var held []*inflight.Holder
	for i := range 3 {
		h, slots, err := reports.Acquire(ctx, "acme", false)
		if err != nil {
			panic(err)
		}
		fmt.Printf("request %d: admitted %v, %d held\n", i, h != nil, slots.Held)
		if h != nil {
			held = append(held, h)
		}
	}
	for _, h := range held {
		h.Release(ctx, false)
	}
	h, _, _ := reports.Acquire(ctx, "acme", false)
	fmt.Println("after release: admitted", h != nil)
	// Output:
	// request 0: admitted true, 1 held
	// request 1: admitted true, 2 held
	// request 2: admitted false, 2 held
	// after release: admitted true
}

// hanging is a Semaphore whose Acquire fails and whose Release hangs
// until its context ends: a store that has stopped answering.
type hanging struct{ releasing *atomic.Int64 }

func (hanging) Acquire(context.Context, string, string, string, int64, time.Duration) (inflight.Slots, error) {
	return inflight.Slots{}, errDown
}
func (s hanging) Release(ctx context.Context, _, _, _ string) (inflight.Slots, error) {
	s.releasing.Add(1)
	defer s.releasing.Add(-1)
	<-ctx.Done()
	return inflight.Slots{}, ctx.Err()
}
func (hanging) Extend(context.Context, string, string, string, time.Duration) (inflight.Slots, error) {
	return inflight.Slots{}, errDown
}

// TestFailedAcquiresCostNoGoroutines: a failing store costs no goroutine
// per failed Acquire (on 1b40f8a each started one to release its slot, so
// 100 failures against a hanging store left 100 goroutines waiting): the
// releases are retried one at a time, and their number is bounded.
func TestFailedAcquiresCostNoGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var releasing atomic.Int64
		f, err := inflight.New(hanging{&releasing}, "api", 5, inflight.WithTTL(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for range 100 {
			if _, _, err := f.Acquire(context.Background(), "k", false); !errors.Is(err, errDown) {
				t.Fatalf("Acquire on a failing store: %v", err)
			}
		}
		synctest.Wait()
		if n := releasing.Load(); n > 1 {
			t.Errorf("%d releases in flight at once after 100 failed acquires, want at most 1", n)
		}
		time.Sleep(time.Hour) // the retries give up, each after the TTL
		synctest.Wait()
		if n := releasing.Load(); n != 0 {
			t.Errorf("%d releases still in flight after an hour", n)
		}
	})
}

// TestClosedStoreNeverAdmits: a closed store is never a reason to admit,
// whatever the failure mode (on 1b40f8a a FailOpen in-flight limit over a
// closed store handed out holders).
func TestClosedStoreNeverAdmits(t *testing.T) {
	local := memstore.New()
	defer local.Close()
	for _, mode := range []sluice.FailureMode{sluice.FailOpen, sluice.FailClosed, sluice.FailLocal} {
		store := memstore.New()
		f := newInFlight(t, store, 5, inflight.WithFailureMode(mode), inflight.WithLocal(local, nil))
		store.Close()
		h, _, err := f.Acquire(t.Context(), "k", false)
		if h != nil || !errors.Is(err, sluice.ErrStoreClosed) {
			t.Errorf("fail-%v: Acquire on a closed store: holder %v, %v; want none and ErrStoreClosed", mode, h, err)
		}
	}
}
