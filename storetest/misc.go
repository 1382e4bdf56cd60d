// SPDX-License-Identifier: Apache-2.0

package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// small returns the policy Peek, Impossible and Errors use for alg: 3 per
// second, and for the bucket kinds a burst of 5.
func small(alg sluice.Algorithm) sluice.Policy { return policyFor(alg, 3, time.Second, 5) }

// testPeek checks cost-0 requests: admitted iff a request of cost 1 would
// be admitted now, they report the state and change nothing.
func testPeek(t *testing.T, newHarness func(t *testing.T) Harness) {
	for _, alg := range sluice.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			r := newRig(t, newHarness, later)
			p := small(alg)
			d := r.peek(p, "fresh")
			if !d.Allowed || d.Remaining != capacity(p) || d.ResetAfter != 0 || d.RetryAfter != 0 || d.Delay != 0 {
				t.Fatalf("a peek at a fresh key: %s, want admitted with remaining %d and nothing else", fmtDecision(d), capacity(p))
			}
			r.wantLen(0, "after peeks at a fresh key")
			for admitted := true; admitted; {
				admitted = r.check(p, "k", 1).Allowed
			}
			for range 3 {
				d := r.peek(p, "k")
				if one := r.check(p, "k", 1); d.Allowed || d.Remaining != 0 || d.RetryAfter != one.RetryAfter {
					t.Fatalf("a peek at an exhausted key: %s, want refused with remaining 0 and the RetryAfter of cost 1 (%s)", fmtDecision(d), fmtDecision(one))
				}
			}
			for _, step := range []time.Duration{0, 100 * time.Millisecond, 300 * time.Millisecond, 400 * time.Millisecond, time.Second} {
				r.at(r.now + int64(step))
				r.peek(p, "k")
				r.check(p, "k", 1)
				r.peek(p, "k")
			}
		})
	}
	// Envoy's check-then-debit (hits_addend 0 on the request, the debit
	// when the stream is done) limits: on 2 a minute, 2 of 20 pass.
	for _, alg := range sluice.Algorithms() {
		t.Run(string(alg)+"/check-then-debit", func(t *testing.T) {
			r := newRig(t, newHarness, later)
			p := policyFor(alg, 2, time.Minute, 0)
			passed := 0
			for range 20 {
				if r.peek(p, "k").Allowed {
					passed++
					r.check(p, "k", 1)
				}
				r.at(r.now + int64(time.Millisecond))
			}
			if passed != 2 {
				t.Fatalf("%d of 20 peeks passed on %v, want 2", passed, p)
			}
		})
	}
}

// testImpossible checks costs above the capacity: rejected as impossible,
// with no RetryAfter, consuming nothing.
func testImpossible(t *testing.T, newHarness func(t *testing.T) Harness) {
	for _, alg := range sluice.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			r := newRig(t, newHarness, later)
			policies := []sluice.Policy{small(alg)}
			if alg.IsBucket() {
				policies = append(policies, policyFor(alg, 5, time.Second, 2)) // burst below the limit
			}
			for _, p := range policies {
				impossible := func(key string) {
					t.Helper()
					for _, cost := range []int64{capacity(p) + 1, 1 << 62} {
						if d := r.check(p, key, cost); d.Allowed || !d.Impossible || d.RetryAfter != 0 {
							t.Fatalf("%v cost %d: %s, want impossible, no retry", p, cost, fmtDecision(d))
						}
					}
				}
				impossible("fresh")
				r.wantLen(0, "after impossible requests at a fresh key")
				if d := r.check(p, "fresh", capacity(p)); !d.Allowed {
					t.Fatalf("%v: a full-capacity request at a fresh key: %s", p, fmtDecision(d))
				}
				r.at(r.now + int64(100*time.Millisecond))
				impossible("fresh")
				r.peek(p, "fresh")
				r.at(r.now + int64(time.Hour))
				impossible("fresh")
				r.check(p, "fresh", capacity(p))
				r.at(r.now + int64(time.Hour))
			}
		})
	}
}

// testErrors checks that bad input and a cancelled context are errors, not
// decisions, and consume nothing.
func testErrors(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Run("NegativeCost", func(t *testing.T) {
		r := newRig(t, newHarness, later)
		for _, alg := range sluice.Algorithms() {
			p := small(alg)
			r.check(p, "k", 1)
			if d, err := r.h.Store.Take(r.ctx, p, "k", -1); err == nil {
				t.Fatalf("%v: cost -1 returned %s and no error", p, fmtDecision(d))
			}
			out := make([]sluice.Decision, 2)
			if err := r.h.Store.TakeAll(r.ctx, []sluice.Request{{Policy: p, Key: "k", Cost: 1}, {Policy: p, Key: "k", Cost: -1}}, out); err == nil {
				t.Fatalf("%v: a batch with cost -1 returned no error", p)
			}
			r.peek(p, "k")
		}
	})
	t.Run("InvalidPolicy", func(t *testing.T) {
		r := newRig(t, newHarness, later)
		good := small(sluice.TokenBucket)
		r.check(good, "k", 1)
		bad := []sluice.Policy{
			{Algorithm: "", Limit: 1, Period: time.Second},
			{Algorithm: "token_bucket", Limit: 1, Period: time.Second},
			{Algorithm: sluice.TokenBucket, Limit: 0, Period: time.Second},
			{Algorithm: sluice.GCRA, Limit: -1, Period: time.Second},
			{Algorithm: sluice.GCRA, Limit: sluice.MaxLimit + 1, Period: time.Second},
			{Algorithm: sluice.FixedWindow, Limit: 1, Period: 0},
			{Algorithm: sluice.SlidingLog, Limit: 1, Period: -time.Second},
			{Algorithm: sluice.SlidingWindow, Limit: 1, Period: sluice.MaxPeriod + 1},
			{Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Second, Burst: 5},
			{Algorithm: sluice.LeakyBucket, Limit: 1, Period: time.Second, Burst: -1},
			{Algorithm: sluice.TokenBucket, Limit: 1, Period: sluice.MaxPeriod, Burst: sluice.MaxLimit}, // overflows
		}
		for _, p := range bad {
			if p.Validate() == nil {
				t.Fatalf("storetest: %v is valid", p)
			}
			for _, cost := range []int64{0, 1} {
				if d, err := r.h.Store.Take(r.ctx, p, "k", cost); err == nil {
					t.Fatalf("invalid %v, cost %d: returned %s and no error", p, cost, fmtDecision(d))
				}
			}
			out := make([]sluice.Decision, 3)
			reqs := []sluice.Request{{Policy: good, Key: "k", Cost: 1}, {Policy: p, Key: "k", Cost: 1}, {Policy: good, Key: "j", Cost: 1}}
			if err := r.h.Store.TakeAll(r.ctx, reqs, out); err == nil {
				t.Fatalf("a batch with invalid %v returned no error", p)
			}
			r.peek(good, "k")
			r.peek(good, "j")
		}
		r.wantLen(1, "after invalid requests")
	})
	t.Run("CancelledContext", func(t *testing.T) {
		r := newRig(t, newHarness, later)
		ctx, cancel := context.WithCancel(r.ctx)
		cancel()
		for _, alg := range sluice.Algorithms() {
			p := small(alg)
			if d, err := r.h.Store.Take(ctx, p, "k", 1); !errors.Is(err, context.Canceled) {
				t.Fatalf("%v with a cancelled context: %s, error %v, want context.Canceled", p, fmtDecision(d), err)
			}
			out := make([]sluice.Decision, 1)
			if err := r.h.Store.TakeAll(ctx, []sluice.Request{{Policy: p, Key: "k", Cost: 1}}, out); !errors.Is(err, context.Canceled) {
				t.Fatalf("%v: TakeAll with a cancelled context: error %v, want context.Canceled", p, err)
			}
			r.peek(p, "k")
		}
		r.wantLen(0, "after requests with a cancelled context")
	})
	t.Run("BatchLength", func(t *testing.T) {
		r := newRig(t, newHarness, later)
		p := small(sluice.SlidingWindow)
		reqs := []sluice.Request{{Policy: p, Key: "k", Cost: 1}, {Policy: p, Key: "j", Cost: 1}}
		for _, n := range []int{0, 1, 3} {
			if err := r.h.Store.TakeAll(r.ctx, reqs, make([]sluice.Decision, n)); err == nil {
				t.Fatalf("TakeAll of 2 requests into %d decisions returned no error", n)
			}
		}
		r.peek(p, "k")
		r.peek(p, "j")
		r.wantLen(0, "after refused batches")
	})
}

// testPolicies checks which policies share a key's state: those with the
// same non-empty Name and Algorithm, and identical unnamed ones; no others.
func testPolicies(t *testing.T, newHarness func(t *testing.T) Harness) {
	exhaust := func(r *rig, p sluice.Policy, key string) {
		r.t.Helper()
		if d := r.check(p, key, capacity(p)); !d.Allowed {
			r.t.Fatalf("%v key %q: a full-capacity request was rejected: %s", p, key, fmtDecision(d))
		}
	}
	t.Run("Names", func(t *testing.T) {
		r := newRig(t, newHarness, later)
		for _, alg := range sluice.Algorithms() {
			a, b := small(alg), small(alg)
			a.Name, b.Name = "a", "b"
			exhaust(r, a, "k")
			exhaust(r, b, "k")
			r.peek(a, "k")
		}
	})
	t.Run("MaxLimit", func(t *testing.T) {
		// The largest limit, taken whole at one instant: nothing more fits
		// (a count plus a cost would overflow int64 if summed).
		r := newRig(t, newHarness, later)
		for _, alg := range sluice.Algorithms() {
			p := policyFor(alg, sluice.MaxLimit, time.Second, sluice.MaxLimit)
			exhaust(r, p, "k")
			for _, cost := range []int64{capacity(p), 1} {
				if d := r.check(p, "k", cost); d.Allowed {
					t.Fatalf("%v: cost %d after the whole limit was taken: %s, want refused", p, cost, fmtDecision(d))
				}
			}
		}
	})
	t.Run("Algorithms", func(t *testing.T) {
		r := newRig(t, newHarness, later)
		for _, name := range []string{"", "shared"} {
			for _, alg := range sluice.Algorithms() {
				p := policyFor(alg, 4, time.Minute, 0)
				p.Name = name
				exhaust(r, p, "k")
			}
		}
		r.wantLen(12, "after twelve policies used one key")
	})
	t.Run("Unnamed", func(t *testing.T) {
		r := newRig(t, newHarness, later)
		for _, alg := range sluice.Algorithms() {
			p := small(alg)
			exhaust(r, p, "k")
			q := p
			q.Limit++
			exhaust(r, q, "k")
			r.check(p, "k", 1)
			r.check(small(alg), "k", 0) // an identical policy value shares the state
		}
	})
	t.Run("SameName", func(t *testing.T) {
		// A reconfigured policy keeps its state. The change keeps the
		// emission interval (the burst of the bucket kinds, the limit of
		// the window kinds), so the state means the same to both models.
		r := newRig(t, newHarness, later)
		for _, alg := range sluice.Algorithms() {
			before := policyFor(alg, 3, time.Second, 5)
			before.Name = "api"
			after := before
			if alg.IsBucket() {
				after.Burst = 8
			} else {
				after.Limit = 5
			}
			r.check(before, "k", 3)
			if d := r.peek(after, "k"); d.Remaining != capacity(after)-3 {
				t.Fatalf("%v after 3 units under %v: remaining %d, want %d (the state is shared)", after, before, d.Remaining, capacity(after)-3)
			}
			r.at(r.now + int64(400*time.Millisecond))
			r.check(after, "k", 2)
			r.check(before, "k", 1)
			r.check(after, "k", capacity(after))
		}
	})
	t.Run("Tightened", func(t *testing.T) {
		// A named policy whose limit drops below what its keys already
		// used: a peek is refused (as cost 1 is) and reports 0 remaining,
		// and the next request waits for the state to drain under the new
		// parameters. (Both emission intervals are whole nanoseconds, so
		// the state means the same to both models.)
		r := newRig(t, newHarness, later)
		for _, alg := range sluice.Algorithms() {
			before := policyFor(alg, 50, time.Minute, 0)
			before.Name = "tightened"
			after := before
			after.Limit = 10
			r.check(before, "k", 50)
			if d := r.peek(after, "k"); d.Allowed || d.Remaining != 0 || d.RetryAfter <= 0 {
				t.Fatalf("%v, after 50 units under %v: peek %s, want refused with 0 remaining and a RetryAfter", after, before, fmtDecision(d))
			}
			if d := r.check(after, "k", 1); d.Allowed || d.RetryAfter <= 0 {
				t.Fatalf("%v, after 50 units under %v: %s, want a rejection with a RetryAfter", after, before, fmtDecision(d))
			}
		}
	})
}
