// SPDX-License-Identifier: Apache-2.0

package sluice_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
)

// TestClosedStoreNeverAdmits: after Close, no failure mode admits (on
// 1b40f8a a FailOpen limiter at 1/hour admitted 100 of 100), and the
// error is ErrStoreClosed.
func TestClosedStoreNeverAdmits(t *testing.T) {
	p := sluice.Policy{Name: "p", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Hour}
	local := memstore.New()
	defer local.Close()
	for _, mode := range []sluice.FailureMode{sluice.FailOpen, sluice.FailClosed, sluice.FailLocal} {
		store := memstore.New()
		l, err := sluice.NewLimiter(store, p, sluice.WithFailureMode(mode), sluice.WithLocalStore(local, nil))
		if err != nil {
			t.Fatal(err)
		}
		store.Close()
		admitted := 0
		for range 100 {
			d, err := l.Allow(context.Background(), "k")
			if !errors.Is(err, sluice.ErrStoreClosed) {
				t.Fatalf("fail-%v: error %v, want ErrStoreClosed", mode, err)
			}
			if d.Allowed {
				admitted++
			}
		}
		res, err := sluice.AllowAll(context.Background(), sluice.Check{Limiter: l, Key: "a"}, sluice.Check{Limiter: l, Key: "b"})
		if !errors.Is(err, sluice.ErrStoreClosed) || res.Allowed {
			t.Errorf("fail-%v AllowAll: %+v %v, want refused with ErrStoreClosed", mode, res, err)
		}
		if admitted != 0 {
			t.Errorf("fail-%v: a closed store admitted %d of 100", mode, admitted)
		}
	}
}

// TestAllowAllResultConsistent: whatever happens, a refused Result's
// Refused indexes its Decisions (on 1b40f8a a cancelled context with two
// checks gave Refused = -1, and Decisions[Refused] panicked).
func TestAllowAllResultConsistent(t *testing.T) {
	store := newTestStore()
	l, _ := sluice.NewLimiter(store, sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 5, Period: time.Second})
	other, _ := sluice.NewLimiter(newTestStore(), sluice.Policy{Name: "o", Algorithm: sluice.GCRA, Limit: 5, Period: time.Second})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for name, tc := range map[string]struct {
		ctx    context.Context
		checks []sluice.Check
	}{
		"cancelled, 2 checks": {cancelled, []sluice.Check{{Limiter: l, Key: "a"}, {Limiter: l, Key: "b"}}},
		"cancelled, 1 check":  {cancelled, []sluice.Check{{Limiter: l, Key: "a"}}},
		"nil limiter":         {context.Background(), []sluice.Check{{Limiter: l, Key: "a"}, {Key: "b"}}},
		"nil first limiter":   {context.Background(), []sluice.Check{{Key: "b"}}},
		"other store":         {context.Background(), []sluice.Check{{Limiter: l, Key: "a"}, {Limiter: other, Key: "b"}}},
		"negative cost":       {context.Background(), []sluice.Check{{Limiter: l, Key: "a", Cost: -1}}},
	} {
		res, err := sluice.AllowAll(tc.ctx, tc.checks...)
		if err == nil || res.Allowed {
			t.Errorf("%s: %+v %v, want refused with an error", name, res, err)
			continue
		}
		if len(res.Decisions) != len(tc.checks) || res.Refused < 0 || res.Refused >= len(res.Decisions) {
			t.Errorf("%s: Refused %d with %d decisions for %d checks", name, res.Refused, len(res.Decisions), len(tc.checks))
			continue
		}
		if res.Decisions[res.Refused].Allowed {
			t.Errorf("%s: the refusing decision is allowed", name)
		}
	}
}

// TestZeroCheckIsNoPeek: a Check with no Cost asks for one unit (on
// 1b40f8a it was a silent peek: 100 of 100 admitted at 1/hour); a peek is
// asked for with Peek, and changes nothing.
func TestZeroCheckIsNoPeek(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := sluice.NewLimiter(newTestStore(), sluice.Policy{Name: "p", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Hour})
		ctx := context.Background()
		if res, err := sluice.AllowAll(ctx, sluice.Check{Limiter: l, Key: "k", Peek: true}); err != nil || !res.Allowed || res.Decisions[0].Remaining != 1 {
			t.Fatalf("a peek at a fresh key: %+v %v, want admitted with 1 remaining", res, err)
		}
		admitted := 0
		for range 100 {
			if res, _ := sluice.AllowAll(ctx, sluice.Check{Limiter: l, Key: "k"}); res.Allowed {
				admitted++
			}
		}
		if admitted != 1 {
			t.Errorf("zero-cost Checks at 1/hour: %d of 100 admitted, want 1", admitted)
		}
	})
}

// TestAlgorithmsIsACopy: changing the slice Algorithms returns changes
// nothing else (on 1b40f8a it was an exported variable, and changing its
// element 0 changed what Policy.Validate accepts).
func TestAlgorithmsIsACopy(t *testing.T) {
	a := sluice.Algorithms()
	a[0] = "made-up"
	if err := (sluice.Policy{Algorithm: "made-up", Limit: 1, Period: time.Second}).Validate(); err == nil {
		t.Error("a changed copy of Algorithms() made Validate accept a made-up algorithm")
	}
	if got := sluice.Algorithms()[0]; got != sluice.TokenBucket {
		t.Errorf("Algorithms()[0] = %q after a caller changed its copy", got)
	}
}

// TestWaitServesInOrder: waiters share a steady rate in arrival order (on
// 1b40f8a, 20 goroutines at 10/s for 3 s: 12 got nothing, one got 10).
func TestWaitServesInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := sluice.NewLimiter(newTestStore(), sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 10, Period: time.Second, Burst: 1})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		const waiters = 20
		got := make([]int, waiters)
		var wg sync.WaitGroup
		for i := range waiters {
			wg.Go(func() {
				for {
					if _, err := l.Wait(ctx, "k", 1); err != nil {
						return
					}
					got[i]++
				}
			})
			time.Sleep(time.Millisecond) // arrive in order
		}
		wg.Wait()
		total, lo, hi := 0, got[0], got[0]
		for _, n := range got {
			total += n
			lo, hi = min(lo, n), max(hi, n)
		}
		// 30 units at 10/s; served in turn, every waiter gets one before
		// any gets a third (the first also had the burst's unit).
		if total < 29 || total > 31 || lo < 1 || hi > 3 {
			t.Errorf("admissions per waiter %v (total %d): want about 30 served in turn (each 1 to 3)", got, total)
		}
	})
}

// TestWaitInLineReturnsWhenCtxEnds: a Wait queued behind another returns
// when its own context ends (here cancelled after 20 ms), having taken
// nothing.
func TestWaitInLineReturnsWhenCtxEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := sluice.NewLimiter(newTestStore(), sluice.Policy{Name: "p", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Hour})
		ctx := context.Background()
		l.Allow(ctx, "k") // the hour's unit
		first, stop := context.WithCancel(ctx)
		defer stop()
		go l.Wait(first, "k", 1)
		synctest.Wait() // the first waiter sleeps at the head of the line
		gone, cancel := context.WithCancel(ctx)
		time.AfterFunc(20*time.Millisecond, cancel)
		start := time.Now()
		_, err := l.Wait(gone, "k", 1)
		if !errors.Is(err, context.Canceled) || time.Since(start) != 20*time.Millisecond {
			t.Errorf("a queued Wait cancelled after 20ms: %v after %v", err, time.Since(start))
		}
		if d, _ := l.AllowN(ctx, "k", 0); d.Remaining != 0 || d.RetryAfter != time.Hour-20*time.Millisecond {
			t.Errorf("after the cancelled Wait: %+v, want the hour's unit still taken and nothing more", d)
		}
	})
}

// TestWaitInLineTooLate: a Wait whose deadline comes before the caller
// ahead of it in line can be served returns at once, without waiting for
// its deadline (before, it waited for its deadline). A waiter whose
// deadline allows it stays in line and is served. (internal/line's
// TestHold covers a waiter already in line when the head learns how long
// it must sleep.)
func TestWaitInLineTooLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := sluice.NewLimiter(newTestStore(), sluice.Policy{Name: "p", Algorithm: sluice.TokenBucket, Limit: 2, Period: time.Second})
		ctx := context.Background()
		l.AllowN(ctx, "k", 2) // empty: the next unit comes in 500 ms
		wait := func(d time.Duration) (time.Duration, error) {
			c, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			start := time.Now()
			_, err := l.Wait(c, "k", 1)
			return time.Since(start), err
		}
		// The head sleeps 500 ms for the next unit: behind it, a Wait with
		// 100 ms leaves at once; one with 2 s stays, and is served after
		// the head.
		type result struct {
			err  error
			took time.Duration
		}
		early, patient := make(chan result, 1), make(chan result, 1)
		head := make(chan error, 1)
		go func() {
			_, err := l.Wait(ctx, "k", 1)
			head <- err
		}()
		synctest.Wait()
		go func() { took, err := wait(2 * time.Second); patient <- result{err, took} }()
		synctest.Wait()
		go func() { took, err := wait(100 * time.Millisecond); early <- result{err, took} }()
		synctest.Wait()
		if r := <-early; r.err == nil || r.took != 0 || errors.Is(r.err, context.DeadlineExceeded) {
			t.Errorf("a Wait with 100ms behind one that needs 500ms: %v after %v, want an error at once", r.err, r.took)
		}
		// Arriving behind the sleeping head: at once too.
		if took, err := wait(300 * time.Millisecond); err == nil || took != 0 {
			t.Errorf("a Wait with 300ms arriving behind one that needs 500ms: %v after %v, want an error at once", err, took)
		}
		if err := <-head; err != nil {
			t.Errorf("the head: %v", err)
		}
		if r := <-patient; r.err != nil || r.took != time.Second {
			t.Errorf("the patient Wait: %v after %v, want served after 1s (the head at 500ms, then itself)", r.err, r.took)
		}
	})
}
