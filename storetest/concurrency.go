// SPDX-License-Identifier: Apache-2.0

package storetest

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

const (
	racers   = 256    // goroutines released together
	attempts = 20_000 // requests they make between them
	hotLimit = 1000   // the capacity they race for
)

// testConcurrency races many goroutines for one key while the clock stands
// still (no refill; for the window kinds, one long window): exactly the
// capacity is admitted, and every admission leaves a different Remaining, so
// the store's read-modify-write is atomic.
func testConcurrency(t *testing.T, newHarness func(t *testing.T) Harness) {
	for _, alg := range sluice.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			r := newRig(t, newHarness, later)
			period := time.Hour
			if !alg.IsBucket() {
				period = 1000 * time.Hour // the clock is far from the window's end
			}
			p := sluice.Policy{Algorithm: alg, Limit: hotLimit, Period: period}
			for _, cost := range []int64{1, 7} {
				key := "hot-" + string(rune('0'+cost))
				remaining := race(t, r.h.Store, p, key, cost)
				admitted := 0
				for _, n := range remaining {
					admitted += n
				}
				if want := int(hotLimit / cost); admitted != want {
					t.Fatalf("cost %d: %d of %d attempts admitted, want exactly %d", cost, admitted, attempts, want)
				}
				for left := int64(0); left+cost <= hotLimit; left += cost {
					// The admissions leave hotLimit%cost, +cost, +2·cost, … up to hotLimit−cost.
					if n := remaining[hotLimit%cost+left]; n != 1 {
						t.Fatalf("cost %d: %d admitted requests report remaining %d, want exactly 1", cost, n, hotLimit%cost+left)
					}
				}
				if d := r.take(p, key, 0); d.Remaining != hotLimit%cost {
					t.Fatalf("cost %d: afterwards a peek reports remaining %d, want %d", cost, d.Remaining, hotLimit%cost)
				}
			}
		})
	}
}

// race makes attempts requests of cost from racers goroutines released
// together, and returns how many admitted decisions reported each Remaining.
func race(t *testing.T, s sluice.Store, p sluice.Policy, key string, cost int64) map[int64]int {
	ctx := t.Context()
	var (
		start = make(chan struct{})
		wg    sync.WaitGroup
		next  atomic.Int64
		mu    sync.Mutex
		seen  = map[int64]int{}
	)
	for range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			var mine []int64
			for next.Add(1) <= attempts {
				d, err := s.Take(ctx, p, key, cost)
				if err != nil {
					t.Errorf("Take: %v", err)
					return
				}
				if d.Allowed {
					mine = append(mine, d.Remaining)
				}
			}
			mu.Lock()
			for _, left := range mine {
				seen[left]++
			}
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return seen
}
