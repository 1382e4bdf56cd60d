// SPDX-License-Identifier: Apache-2.0

package inflight

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

func TestConcurrencyLimit(t *testing.T) {
	if _, err := NewConcurrency(0); err == nil {
		t.Error("limit 0 accepted")
	}
	c, _ := NewConcurrency(2)
	r1, ok1 := c.TryAcquire("k")
	r2, ok2 := c.TryAcquire("k")
	_, ok3 := c.TryAcquire("k")
	if !ok1 || !ok2 || ok3 {
		t.Fatalf("TryAcquire x3 = %v %v %v, want true true false", ok1, ok2, ok3)
	}
	if _, ok := c.TryAcquire("other"); !ok {
		t.Error("another key is limited by k's slots")
	}
	r1()
	r1() // idempotent: must not free a second slot
	if n := c.InFlight("k"); n != 1 {
		t.Errorf("in flight after a double release: %d, want 1", n)
	}
	r2()
	if n := c.InFlight("k"); n != 0 {
		t.Errorf("in flight after all released: %d", n)
	}
}

func TestConcurrencyPanickingHolderReleases(t *testing.T) {
	c, _ := NewConcurrency(1)
	func() {
		defer func() { _ = recover() }()
		_ = c.Do(context.Background(), "k", func() error { panic("handler bug") })
	}()
	if n := c.InFlight("k"); n != 0 {
		t.Errorf("in flight after a panicking holder: %d, want 0", n)
	}
}

func TestConcurrencyAcquireWaitsInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := NewConcurrency(1)
		ctx := context.Background()
		release, err := c.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		var order []int
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := 0; i < 3; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = c.Do(ctx, "k", func() error {
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
					return nil
				})
			}()
			synctest.Wait() // goroutine i is queued before i+1 starts
		}
		// A cancelled waiter holds nothing.
		cctx, cancel := context.WithCancel(ctx)
		errc := make(chan error)
		go func() { _, err := c.Acquire(cctx, "k"); errc <- err }()
		synctest.Wait()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Acquire: %v", err)
		}
		release()
		wg.Wait()
		if len(order) != 3 || order[0] != 0 || order[1] != 1 || order[2] != 2 {
			t.Errorf("served in order %v, want [0 1 2]", order)
		}
		if n := c.InFlight("k"); n != 0 {
			t.Errorf("in flight at the end: %d", n)
		}
	})
}

func TestConcurrencyNeverExceedsLimit(t *testing.T) {
	c, _ := NewConcurrency(3)
	var in, peak atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				_ = c.Do(context.Background(), "k", func() error {
					n := in.Add(1)
					for {
						p := peak.Load()
						if n <= p || peak.CompareAndSwap(p, n) {
							break
						}
					}
					runtime.Gosched()
					in.Add(-1)
					return nil
				})
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > 3 || p < 1 {
		t.Errorf("peak in flight %d, want 1..3", p)
	}
}
