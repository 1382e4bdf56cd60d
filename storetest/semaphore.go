// SPDX-License-Identifier: Apache-2.0

package storetest

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/sluicetest"
)

// SemaphoreHarness is one fresh, empty inflight.Semaphore under test, with
// the clock it reads.
type SemaphoreHarness struct {
	// Semaphore is the store under test. It must read the time from Clock
	// on every call.
	Semaphore inflight.Semaphore
	// Clock is the store's clock; the suite moves it.
	Clock *sluicetest.Clock
	// Len returns the number of semaphores the store holds at the clock's
	// current instant, not counting those whose holders have all expired.
	// Optional.
	Len func() int
}

// RunSemaphore runs the in-flight conformance suite: the contract of
// inflight.Semaphore, checked at fixed instants and under concurrent use.
func RunSemaphore(t *testing.T, newHarness func(t *testing.T) SemaphoreHarness) {
	t.Run("Limit", func(t *testing.T) { testSemLimit(t, newHarness(t)) })
	t.Run("Expiry", func(t *testing.T) { testSemExpiry(t, newHarness(t)) })
	t.Run("Extend", func(t *testing.T) { testSemExtend(t, newHarness(t)) })
	t.Run("Keys", func(t *testing.T) { testSemKeys(t, newHarness(t)) })
	t.Run("Limits", func(t *testing.T) { testSemLimits(t, newHarness(t)) })
	t.Run("Concurrent", func(t *testing.T) { testSemConcurrent(t, newHarness(t)) })
	t.Run("TTLs", func(t *testing.T) { testSemTTLs(t, newHarness(t)) })
}

// testSemTTLs: Acquire and Extend refuse a ttl ≤ 0 or past
// sluice.MaxPeriod with an error naming it, and hold nothing for it (a ttl
// that overflowed the expiry dropped the holders before it).
func testSemTTLs(t *testing.T, h SemaphoreHarness) {
	r := newSemRig(t, h)
	r.acquire("n", "k", "a", 1, time.Second, true, 1)
	for _, ttl := range []time.Duration{0, -time.Second, sluice.MaxPeriod + 1, math.MaxInt64} {
		if s, err := h.Semaphore.Acquire(r.ctx, "n", "k", "b", 1, ttl); err == nil || !strings.Contains(err.Error(), "ttl "+ttl.String()) || s.Acquired {
			t.Errorf("Acquire with ttl %v: %+v, %v; want an error naming it", ttl, s, err)
		}
		if _, err := h.Semaphore.Extend(r.ctx, "n", "k", "a", ttl); err == nil || !strings.Contains(err.Error(), "ttl "+ttl.String()) {
			t.Errorf("Extend with ttl %v: %v; want an error naming it", ttl, err)
		}
	}
	r.acquire("n", "k", "c", 1, sluice.MaxPeriod, false, 1) // the first holder still holds the one slot
}

// semRig drives one semaphore harness and fails the test on any error.
type semRig struct {
	t   *testing.T
	h   SemaphoreHarness
	ctx context.Context
	t0  time.Time
}

func newSemRig(t *testing.T, h SemaphoreHarness) *semRig {
	t.Helper()
	if h.Semaphore == nil || h.Clock == nil {
		t.Fatal("storetest: the semaphore harness has no Semaphore or no Clock")
	}
	t0 := time.Unix(1_700_000_000, 0)
	h.Clock.Set(t0)
	return &semRig{t: t, h: h, ctx: t.Context(), t0: t0}
}

func (r *semRig) at(d time.Duration) { r.h.Clock.Set(r.t0.Add(d)) }

func (r *semRig) acquire(name, key, holder string, limit int64, ttl time.Duration, want bool, held int64) inflight.Slots {
	r.t.Helper()
	s, err := r.h.Semaphore.Acquire(r.ctx, name, key, holder, limit, ttl)
	if err != nil {
		r.t.Fatalf("Acquire(%q, %q, %q, %d, %v): %v", name, key, holder, limit, ttl, err)
	}
	if s.Acquired != want || s.Held != held {
		r.t.Fatalf("Acquire(%q, %q, %q, %d, %v) at +%v = %+v, want Acquired %v Held %d", name, key, holder, limit, ttl, r.h.Clock.Now().Sub(r.t0), s, want, held)
	}
	return s
}

func (r *semRig) release(name, key, holder string, want bool, held int64) {
	r.t.Helper()
	s, err := r.h.Semaphore.Release(r.ctx, name, key, holder)
	if err != nil {
		r.t.Fatalf("Release(%q, %q, %q): %v", name, key, holder, err)
	}
	if s.Acquired != want || s.Held != held {
		r.t.Fatalf("Release(%q, %q, %q) = %+v, want Acquired %v Held %d", name, key, holder, s, want, held)
	}
}

func (r *semRig) extend(name, key, holder string, ttl time.Duration, want bool, held int64) {
	r.t.Helper()
	s, err := r.h.Semaphore.Extend(r.ctx, name, key, holder, ttl)
	if err != nil {
		r.t.Fatalf("Extend(%q, %q, %q, %v): %v", name, key, holder, ttl, err)
	}
	if s.Acquired != want || s.Held != held {
		r.t.Fatalf("Extend(%q, %q, %q, %v) at +%v = %+v, want Acquired %v Held %d", name, key, holder, ttl, r.h.Clock.Now().Sub(r.t0), s, want, held)
	}
}

func (r *semRig) wantLen(n int) {
	r.t.Helper()
	if r.h.Len == nil {
		return
	}
	if got := r.h.Len(); got != n {
		r.t.Fatalf("at +%v the store holds %d semaphores, want %d", r.h.Clock.Now().Sub(r.t0), got, n)
	}
}

// testSemLimit: at most limit holders; release is idempotent and frees a
// slot; a retried Acquire of a holder is admitted even at the limit.
func testSemLimit(t *testing.T, h SemaphoreHarness) {
	r := newSemRig(t, h)
	const ttl = 10 * time.Second
	r.acquire("p", "k", "h1", 3, ttl, true, 1)
	r.acquire("p", "k", "h2", 3, ttl, true, 2)
	r.acquire("p", "k", "h3", 3, ttl, true, 3)
	r.acquire("p", "k", "h4", 3, ttl, false, 3)
	r.acquire("p", "k", "h2", 3, ttl, true, 3) // retried: idempotent
	r.release("p", "k", "h2", true, 2)
	r.release("p", "k", "h2", false, 2) // again: nothing
	r.release("p", "k", "nobody", false, 2)
	r.acquire("p", "k", "h4", 3, ttl, true, 3)
	r.acquire("p", "k", "h5", 3, ttl, false, 3)
	r.acquire("p", "k", "h6", 0, ttl, false, 3) // limit 0 admits nothing
	r.wantLen(1)
	r.release("p", "k", "h1", true, 2)
	r.release("p", "k", "h3", true, 1)
	r.release("p", "k", "h4", true, 0)
	r.wantLen(0)
	r.acquire("p", "k", "h7", 1, ttl, true, 1)
	r.acquire("p", "k", "h8", 0, ttl, false, 1)
}

// testSemExpiry: a holder holds its slot until exactly its expiry, and the
// slot is free from that instant; NextExpiry is the time to the earliest.
func testSemExpiry(t *testing.T, h SemaphoreHarness) {
	r := newSemRig(t, h)
	r.acquire("p", "k", "a", 2, 10*time.Second, true, 1)
	r.at(2 * time.Second)
	s := r.acquire("p", "k", "b", 2, 10*time.Second, true, 2)
	if s.NextExpiry != 8*time.Second {
		t.Fatalf("NextExpiry = %v, want 8s", s.NextExpiry)
	}
	r.at(10*time.Second - time.Millisecond)
	s = r.acquire("p", "k", "c", 2, 10*time.Second, false, 2)
	if s.NextExpiry != time.Millisecond {
		t.Fatalf("NextExpiry = %v, want 1ms", s.NextExpiry)
	}
	r.at(10 * time.Second) // a's expiry: its slot is free
	r.acquire("p", "k", "c", 2, 10*time.Second, true, 2)
	r.release("p", "k", "a", false, 2) // a late release of a reclaimed slot
	r.at(20 * time.Second)             // c expires now too; b at 12s
	r.wantLen(0)
	r.acquire("p", "k", "d", 2, time.Second, true, 1)
	r.at(21 * time.Second)
	r.wantLen(0)
	r.acquire("p", "k", "e", 1, time.Second, true, 1)
}

// testSemExtend: Extend renews a holder's expiry from now and reports
// false, changing nothing, for a holder that holds no slot.
func testSemExtend(t *testing.T, h SemaphoreHarness) {
	r := newSemRig(t, h)
	r.acquire("p", "k", "a", 1, 10*time.Second, true, 1)
	r.at(9 * time.Second)
	r.extend("p", "k", "a", 10*time.Second, true, 1) // now expires at 19s
	r.at(18 * time.Second)
	r.acquire("p", "k", "b", 1, 10*time.Second, false, 1)
	r.at(19 * time.Second)
	r.extend("p", "k", "a", 10*time.Second, false, 0) // reclaimed at 19s
	r.wantLen(0)
	r.acquire("p", "k", "b", 1, 10*time.Second, true, 1)
	r.extend("p", "k", "nobody", 10*time.Second, false, 1)
	r.release("p", "k", "b", true, 0)
	r.extend("p", "k", "b", 10*time.Second, false, 0)
	r.wantLen(0)
}

// testSemKeys: names and keys are independent and cannot collide.
func testSemKeys(t *testing.T, h SemaphoreHarness) {
	r := newSemRig(t, h)
	const ttl = time.Minute
	r.acquire("a:b", "c", "x", 1, ttl, true, 1)
	r.acquire("a", "b:c", "y", 1, ttl, true, 1)
	r.acquire("a", "b", "z", 1, ttl, true, 1)
	r.acquire("b", "b", "z", 1, ttl, true, 1)
	r.acquire("a", "b{c}", "z", 1, ttl, true, 1)
	r.acquire("a", "", "z", 1, ttl, true, 1)
	r.acquire("a", "b", "w", 1, ttl, false, 1)
	r.wantLen(6)
}

// testSemLimits: each call applies its own limit to the holders present,
// as an adaptive limit or a critical reserve does.
func testSemLimits(t *testing.T, h SemaphoreHarness) {
	r := newSemRig(t, h)
	const ttl = time.Minute
	for i := range 3 {
		r.acquire("p", "k", fmt.Sprint("h", i), 4, ttl, true, int64(i+1))
	}
	r.acquire("p", "k", "low", 3, ttl, false, 3) // non-critical: 4 − 1 reserved
	r.acquire("p", "k", "crit", 4, ttl, true, 4) // critical: the reserve
	r.acquire("p", "k", "crit2", 4, ttl, false, 4)
	r.acquire("p", "k", "more", 6, ttl, true, 5) // the limit rose
	r.acquire("p", "k", "fewer", 2, ttl, false, 5)
}

// testSemConcurrent: many goroutines acquiring one key never hold more
// than the limit at once, and all of it is used.
func testSemConcurrent(t *testing.T, h SemaphoreHarness) {
	r := newSemRig(t, h)
	const (
		limit   = 5
		workers = 16
		rounds  = 40
	)
	var held, peak, admitted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				id := fmt.Sprintf("w%d-%d", w, i)
				s, err := h.Semaphore.Acquire(r.ctx, "p", "k", id, limit, time.Minute)
				if err != nil {
					errs <- err
					return
				}
				if !s.Acquired {
					continue
				}
				admitted.Add(1)
				n := held.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				held.Add(-1)
				if _, err := h.Semaphore.Release(r.ctx, "p", "k", id); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if p := peak.Load(); p > limit {
		t.Fatalf("%d holders at once, limit %d", p, limit)
	}
	if admitted.Load() < rounds {
		t.Fatalf("only %d of %d acquires admitted", admitted.Load(), workers*rounds)
	}
	r.wantLen(0)
}
