// SPDX-License-Identifier: Apache-2.0

package memstore

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestSweeper runs the background sweeper on a fake-time ticker: it drops
// expired keys a bounded number per shard per tick, judging expiry by the
// store's clock, and Close stops it (synctest fails the test if a goroutine
// of the bubble is left).
func TestSweeper(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := sluicetest.NewClock(t0)
		s := New(WithClock(clock), WithSweepInterval(time.Second), withShards(1))
		p := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Minute}
		const n = 3*sweepBudget + 10
		for i := range n {
			if _, err := s.Take(context.Background(), p, fmt.Sprint("k", i), 1); err != nil {
				t.Fatal(err)
			}
		}
		// Ticks before the keys expire drop nothing, and skip the shard
		// without scanning it.
		s.Sweep() // makes the shard's expiry bound exact
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if s.Len() != n {
			t.Fatalf("before expiry: Len() = %d, want %d", s.Len(), n)
		}
		s.shards[0].mu.Lock()
		cur := s.shards[0].curEnt
		s.shards[0].mu.Unlock()
		if cur != 0 {
			t.Errorf("the sweeper scanned %d entries of a shard with nothing expired", cur)
		}
		clock.Set(t0.Add(time.Minute))
		for _, want := range []int{n - sweepBudget, n - 2*sweepBudget, n - 3*sweepBudget, 0} {
			time.Sleep(time.Second)
			synctest.Wait()
			if s.Len() != want {
				t.Fatalf("after a tick: Len() = %d, want %d", s.Len(), want)
			}
		}
		if st := s.Stats(); st.Expired != n {
			t.Errorf("Stats() = %+v, want %d expired", st, n)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestNoSweeperStartsNoGoroutine: with WithSweepInterval(0) the store
// starts no goroutine, so one that is never closed leaves nothing behind
// (synctest fails the test if a goroutine of the bubble is left blocked);
// and Close returns only once the sweeper has stopped.
func TestNoSweeperStartsNoGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(WithSweepInterval(0))
		if _, err := s.Take(context.Background(), sluice.Policy{Algorithm: sluice.GCRA, Limit: 1, Period: time.Second}, "k", 1); err != nil {
			t.Fatal(err)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		s := New(WithSweepInterval(time.Millisecond))
		time.Sleep(10 * time.Millisecond) // fake time: a few ticks
		s.Close()
	})
}

// TestSweepSomeCoversAll: examinations from the cursor, as many as there
// were entries, drop every expired entry even though each removal moves the
// last entry into the removed one's place.
func TestSweepSomeCoversAll(t *testing.T) {
	clock := sluicetest.NewClock(t0)
	s := New(WithClock(clock), WithSweepInterval(0), withShards(1))
	defer s.Close()
	p := sluice.Policy{Algorithm: sluice.GCRA, Limit: 10, Period: time.Second}
	const n = 3000
	for i := range n {
		s.Take(context.Background(), p, fmt.Sprint("k", i), 1+int64(i%3)*4) // expire at 100ms or 500ms or 900ms
	}
	clock.Set(t0.Add(500 * time.Millisecond))
	sh := &s.shards[0]
	sh.mu.Lock()
	sh.sweepSome(s.now(), n/2)
	sh.sweepSome(s.now(), n/2)
	sh.mu.Unlock()
	if s.Len() != n/3 {
		t.Errorf("Len() = %d, want the %d keys expiring at 900ms", s.Len(), n/3)
	}
}

// TestGiveMovesExpiryBound: a Give moves a key's expiry earlier, and the
// sweeper still drops the key once it expires (the shard's expiry bound
// must follow the give, or the sweeper skips the shard until the key's
// old expiry).
func TestGiveMovesExpiryBound(t *testing.T) {
	clock := sluicetest.NewClock(t0)
	s := New(WithClock(clock), WithSweepInterval(0), withShards(1))
	defer s.Close()
	ctx := context.Background()
	p := sluice.Policy{Algorithm: sluice.GCRA, Limit: 10, Period: time.Second}
	_, stamp, err := s.TakeStamped(ctx, p, "k", 10) // expires at 1s
	if err != nil {
		t.Fatal(err)
	}
	s.Sweep() // the shard's expiry bound is now exactly 1s
	if ok, err := s.Give(ctx, p, "k", stamp, 9); err != nil || !ok {
		t.Fatalf("Give = %v, %v; want true", ok, err)
	}
	clock.Set(t0.Add(200 * time.Millisecond)) // the key expired at 100ms
	sh := &s.shards[0]
	sh.mu.Lock()
	sh.sweepSome(s.now(), sweepBudget)
	sh.mu.Unlock()
	if s.Len() != 0 {
		t.Errorf("Len() = %d after a sweep past the given-back key's expiry, want 0", s.Len())
	}
}

// TestUnclosedStoresLeaveNoGoroutine: 1,000 stores made with the defaults
// (a sweeper every second) and dropped without Close leave no goroutine once
// a collection has found them unreachable. On the old code each left its
// sweeper running: 1,000 goroutines.
func TestUnclosedStoresLeaveNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	dones := make([]chan struct{}, 1000)
	for i := range dones {
		dones[i] = New().sweep.done // the store itself is dropped at once
	}
	// The collection queues each store's cleanup, which stops its
	// sweeper; the loop only waits for them. The deadline bounds a failure.
	deadline := time.Now().Add(30 * time.Second)
	for _, done := range dones {
		for !isClosed(done) {
			if time.Now().After(deadline) {
				t.Fatalf("the sweepers of dropped stores are still running after 30s; %d goroutines, %d before", runtime.NumGoroutine(), before)
			}
			runtime.GC()
			runtime.Gosched()
		}
	}
	for n := runtime.NumGoroutine(); n > before; n = runtime.NumGoroutine() {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after the stores were collected, %d before", n, before)
		}
		runtime.Gosched() // a sweeper between close(done) and its exit
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
