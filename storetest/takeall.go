// SPDX-License-Identifier: Apache-2.0

package storetest

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// checkAll runs a TakeAll batch on the store and on the model and fails
// unless every decision is equal. It returns the decisions and whether the
// model admitted the batch.
func (r *rig) checkAll(reqs []sluice.Request) ([]sluice.Decision, bool) {
	r.t.Helper()
	want, admitted := r.o.takeAll(reqs, r.now)
	got := make([]sluice.Decision, len(reqs))
	if err := r.h.Store.TakeAll(r.ctx, reqs, got); err != nil {
		r.t.Fatalf("TakeAll at %s: %v\n%s", fmtTime(r.now), err, fmtBatch(reqs, nil, nil))
	}
	for i := range reqs {
		if got[i] != want[i] {
			r.t.Fatalf("TakeAll at %s (the model %s the batch): decision %d differs:\n%s", fmtTime(r.now),
				map[bool]string{true: "admits", false: "refuses"}[admitted], i, fmtBatch(reqs, got, want))
		}
	}
	return got, admitted
}

func fmtBatch(reqs []sluice.Request, got, want []sluice.Decision) string {
	var b strings.Builder
	for i, q := range reqs {
		fmt.Fprintf(&b, "  [%d] %v key %q cost %d", i, q.Policy, q.Key, q.Cost)
		if got != nil {
			fmt.Fprintf(&b, "\n      got  %s\n      want %s", fmtDecision(got[i]), fmtDecision(want[i]))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// req returns one request of a batch.
func req(p sluice.Policy, key string, cost int64) sluice.Request {
	return sluice.Request{Policy: p, Key: key, Cost: cost}
}

var (
	batchTB = sluice.Policy{Name: "batch-tb", Algorithm: sluice.TokenBucket, Limit: 5, Period: time.Second}
	batchLB = sluice.Policy{Name: "batch-lb", Algorithm: sluice.LeakyBucket, Limit: 2, Period: time.Second, Burst: 3}
	batchFW = sluice.Policy{Name: "batch-fw", Algorithm: sluice.FixedWindow, Limit: 3, Period: time.Minute}
	batchSL = sluice.Policy{Name: "batch-sl", Algorithm: sluice.SlidingLog, Limit: 4, Period: time.Minute}
	batchSW = sluice.Policy{Name: "batch-sw", Algorithm: sluice.SlidingWindow, Limit: 4, Period: time.Minute}
	batchGC = sluice.Policy{Algorithm: sluice.GCRA, Limit: 3, Period: time.Second, Burst: 4}
)

func testTakeAll(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Run("AllOrNothing", func(t *testing.T) {
		r := newRig(t, newHarness, later)
		out, ok := r.checkAll([]sluice.Request{req(batchTB, "a", 2), req(batchFW, "b", 1), req(batchSL, "c", 1)})
		if !ok || !out[0].Allowed || !out[1].Allowed || !out[2].Allowed {
			t.Fatalf("the first batch should be admitted")
		}
		r.wantLen(3, "after an admitted batch over three keys")
		// b has 2 left in its window: the middle request is refused, so
		// nothing is consumed, and the others report their state unconsumed.
		out, ok = r.checkAll([]sluice.Request{req(batchTB, "a", 1), req(batchFW, "b", 3), req(batchSL, "c", 1), req(batchSW, "d", 2)})
		if ok || !out[0].Allowed || out[1].Allowed || !out[2].Allowed || !out[3].Allowed {
			t.Fatalf("the second batch should be refused by its second request only")
		}
		for i, q := range []sluice.Request{req(batchTB, "a", 0), req(batchFW, "b", 0), req(batchSL, "c", 0), req(batchSW, "d", 0)} {
			if i != 1 && r.peek(q.Policy, q.Key) != out[i] {
				t.Fatalf("request %d of a refused batch did not report what a peek reports", i)
			}
		}
		r.wantLen(3, "after a refused batch")
		// Several refusals, an impossible cost among them.
		out, ok = r.checkAll([]sluice.Request{req(batchLB, "e", 4), req(batchTB, "a", 4), req(batchGC, "f", 1)})
		if ok || out[0].Allowed || !out[0].Impossible || out[1].Allowed || !out[2].Allowed {
			t.Fatalf("the third batch should be refused by its first two requests")
		}
		r.wantLen(3, "after a refused batch")
		// Time passes; the same batch as before now fits.
		r.at(r.now + int64(time.Minute))
		r.checkAll([]sluice.Request{req(batchTB, "a", 1), req(batchFW, "b", 3), req(batchSL, "c", 1), req(batchSW, "d", 2)})
		for _, q := range []sluice.Request{req(batchTB, "a", 0), req(batchFW, "b", 0), req(batchSL, "c", 0), req(batchSW, "d", 0)} {
			r.peek(q.Policy, q.Key)
		}
	})

	t.Run("SameKeyTwice", func(t *testing.T) {
		r := newRig(t, newHarness, epoch)
		// 5 tokens: 3 + 3 does not fit; the second sees the first's effect.
		out, _ := r.checkAll([]sluice.Request{req(batchTB, "k", 3), req(batchTB, "k", 3)})
		if !out[0].Allowed || out[0].Remaining != 5 || out[1].Allowed || out[1].Remaining != 2 {
			t.Fatalf("3+3 of 5: got %s and %s, want a peek (remaining 5) and a rejection seeing remaining 2", fmtDecision(out[0]), fmtDecision(out[1]))
		}
		out, _ = r.checkAll([]sluice.Request{req(batchTB, "k", 2), req(batchTB, "k", 3)})
		if !out[0].Allowed || !out[1].Allowed || out[1].Remaining != 0 {
			t.Fatalf("2+3 of 5: got %s and %s, want both admitted, remaining 0", fmtDecision(out[0]), fmtDecision(out[1]))
		}
		// The same key under another policy is another state.
		other := batchTB
		other.Name = "batch-tb-2"
		r.checkAll([]sluice.Request{req(other, "k", 5), req(batchTB, "k", 0), req(batchSL, "k", 4), req(batchSL, "k", 0)})
		r.peek(other, "k")
		r.peek(batchTB, "k")
	})

	t.Run("Random", func(t *testing.T) {
		r := newRig(t, newHarness, epoch)
		rng := rand.New(rand.NewPCG(3, 3))
		policies := []sluice.Policy{batchTB, batchLB, batchFW, batchSL, batchSW, batchGC}
		for range 1500 {
			switch x := rng.IntN(10); {
			case x < 5:
			case x < 8:
				r.at(r.now + rng.Int64N(int64(time.Second)))
			default:
				r.at((r.now/int64(time.Second) + 1) * int64(time.Second))
			}
			reqs := make([]sluice.Request, 1+rng.IntN(4))
			for i := range reqs {
				p := policies[rng.IntN(len(policies))]
				reqs[i] = sluice.Request{Policy: p, Key: fmt.Sprint("k", rng.IntN(3)), Cost: rng.Int64N(capacity(p) + 2)}
			}
			r.checkAll(reqs)
		}
	})

	t.Run("Empty", func(t *testing.T) {
		r := newRig(t, newHarness, epoch)
		if err := r.h.Store.TakeAll(r.ctx, nil, nil); err != nil {
			t.Fatalf("an empty batch: %v", err)
		}
		r.wantLen(0, "after an empty batch")
	})

	t.Run("Concurrent", func(t *testing.T) { testTakeAllConcurrent(t, newHarness) })
}

// testTakeAllConcurrent runs batches over overlapping keys, in opposite
// orders, from many goroutines at once: no deadlock, no overshoot, no lost
// update.
func testTakeAllConcurrent(t *testing.T, newHarness func(t *testing.T) Harness) {
	r := newRig(t, newHarness, later)
	long := 1000 * time.Hour // no refill while the clock stands still
	type key struct {
		p   sluice.Policy
		key string
	}
	keys := []key{
		{sluice.Policy{Algorithm: sluice.TokenBucket, Limit: 300, Period: long}, "x"},
		{sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 200, Period: long}, "y"},
		{sluice.Policy{Algorithm: sluice.SlidingLog, Limit: 250, Period: long}, "z"},
		{sluice.Policy{Algorithm: sluice.GCRA, Limit: 300, Period: long}, "x"},
	}
	// Every batch takes 1 from each of two keys; every pair appears in both
	// orders. Keys 0 and 3 (x under token-bucket and gcra) form a pair of
	// their own, with the same capacity.
	pairs := [][2]int{{0, 1}, {1, 0}, {1, 2}, {2, 1}, {2, 0}, {0, 2}, {0, 3}, {3, 0}}
	var (
		start    = make(chan struct{})
		wg       sync.WaitGroup
		next     atomic.Int64
		admitted [8]atomic.Int64
	)
	const batches = 6000
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out := make([]sluice.Decision, 2)
			for i := next.Add(1); i <= batches; i = next.Add(1) {
				pi := (int(i) + g) % len(pairs)
				a, b := keys[pairs[pi][0]], keys[pairs[pi][1]]
				reqs := []sluice.Request{{Policy: a.p, Key: a.key, Cost: 1}, {Policy: b.p, Key: b.key, Cost: 1}}
				if err := r.h.Store.TakeAll(r.ctx, reqs, out); err != nil {
					t.Errorf("TakeAll: %v", err)
					return
				}
				if out[0].Allowed && out[1].Allowed {
					admitted[pi].Add(1)
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	consumed := make([]int64, len(keys))
	for pi, pair := range pairs {
		consumed[pair[0]] += admitted[pi].Load()
		consumed[pair[1]] += admitted[pi].Load()
	}
	for i, k := range keys {
		d := r.take(k.p, k.key, 0)
		if consumed[i] > k.p.Limit {
			t.Errorf("%v key %q: the admitted batches took %d, over the limit %d", k.p, k.key, consumed[i], k.p.Limit)
		}
		if d.Remaining != k.p.Limit-consumed[i] {
			t.Errorf("%v key %q: the admitted batches took %d of %d, but %d remain", k.p, k.key, consumed[i], k.p.Limit, d.Remaining)
		}
	}
}
