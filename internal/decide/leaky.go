// SPDX-License-Identifier: Apache-2.0

package decide

import (
	"context"
	"fmt"
	"math/bits"
	"time"

	"github.com/sluicehq/sluice"
)

// The longest delay of a leaky-bucket request, decided in the one store
// call that admits it.
//
// With emission interval T = Period/Limit, queue size B (the policy's
// Burst) and the TAT of package model, a request of cost c arriving at t
// meets the queue delay δ = max(TAT, t) − t (exact, in fractions of a
// nanosecond); it is admitted iff δ + c·T ≤ B·T, and its Delay is ⌈δ⌉. A
// maximum delay D (whole nanoseconds) admits it iff also ⌈δ⌉ ≤ D, that is
// δ ≤ D. A policy with the same Name, Algorithm, Limit and Period shares
// the key's TAT and its grid, so the request is decided in one store call
// under the burst
//
//	B_c = min(B, ⌊D/T⌋ + c) = min(B, ⌊D·Limit/Period⌋ + c)
//
// (sluice.Check.Burst): admitted iff δ + c·T ≤ B_c·T, that is iff it fits
// the queue and δ ≤ ⌊D/T⌋·T. That is the bound D rounded down to a whole
// number of emission intervals: exact when D is a multiple of T (then a
// Delay of exactly D is admitted and one a nanosecond longer refused), and
// otherwise conservative: a request whose δ lies in (⌊D/T⌋·T, D], less
// than one interval below the maximum, is refused too. No admitted
// request's Delay ever exceeds D. Its refusal's RetryAfter is the store's,
// exact for that rule (the wait until δ ≤ ⌊D/T⌋·T).
//
// After an admission, Remaining is what still fits within D for a request
// of cost 1: B_1 − ⌈δ'/T⌉ with δ' the queue delay after it, which is the
// store's B_c − ⌈δ'/T⌉ less B_c − B_1. An idle key admits B_1 requests of
// cost 1 within D: front ends advertise that as the queue's capacity
// (Capacity).

// burstWithin returns B_c = min(B, ⌊d/T⌋ + c) for leaky-bucket policy p
// (valid), a delay bound d and a cost c ≥ 1: the burst under which a
// request of cost c is admitted iff it fits p's queue and its queue delay
// is at most ⌊d/T⌋·T ≤ d. A negative d is 0.
func burstWithin(p sluice.Policy, d time.Duration, c int64) int64 {
	b := p.Capacity()
	if c >= b {
		return b // only an empty queue admits it: no delay
	}
	hi, lo := bits.Mul64(uint64(max(d, 0)), uint64(p.Limit))
	if hi >= uint64(p.Period) {
		return b // ⌊d/T⌋ ≥ 2⁶⁴: more than any queue
	}
	f, _ := bits.Div64(hi, lo, uint64(p.Period))
	if f >= uint64(b-c) {
		return b
	}
	return int64(f) + c
}

// Capacity returns the capacity a front end advertises for policy p when
// it holds leaky-bucket requests at most maxDelay: B_1 = min(B, ⌊D/T⌋ + 1),
// the requests of cost 1 an idle key admits within maxDelay (a queue
// place a request may not take is no capacity). It is p's capacity for
// the other algorithms.
func Capacity(p sluice.Policy, maxDelay time.Duration) int64 {
	if p.Algorithm != sluice.LeakyBucket {
		return p.Capacity()
	}
	return burstWithin(p, maxDelay, 1)
}

// boundOf returns the longest delay q's leaky-bucket requests may be held
// for: q.MaxDelay, or less when ctx's deadline comes sooner (a request
// that would wait past its deadline takes no place in the queue: see
// Decide). deadline says the deadline is the bound.
func boundOf(ctx context.Context, maxDelay time.Duration) (bound time.Duration, deadline bool) {
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); left < maxDelay {
			return max(left, 0), true
		}
	}
	return maxDelay, false
}

// bindLeaky sets the Burst of each leaky-bucket check to B_c for bound
// (the policy's own burst when nothing lower is needed). A check whose
// policy has no Name is left alone (Order refuses those that would need
// another burst).
func bindLeaky(checks []sluice.Check, bound time.Duration) {
	for k := range checks {
		c := &checks[k]
		p := c.Limiter.Policy()
		if p.Algorithm != sluice.LeakyBucket || p.Name == "" {
			continue
		}
		c.Burst = burstWithin(p, bound, max(c.Cost, 1))
	}
}

// settleLeaky adjusts the decisions ds of the enforced checks, decided by
// the store with the bursts bindLeaky set for bound: each leaky-bucket
// Remaining becomes what fits within maxDelay for a request of cost 1;
// and when the deadline is the bound (deadline), a refusal the maximum
// alone would have admitted makes the request Gone (err says why), and
// one it would have refused waits for the maximum, not the deadline.
func settleLeaky(checks []sluice.Check, ds []sluice.Decision, maxDelay time.Duration, deadline bool) (err error) {
	for k := range ds {
		c, d := &checks[k], &ds[k]
		p := c.Limiter.Policy()
		if p.Algorithm != sluice.LeakyBucket || p.Name == "" {
			continue
		}
		b := max(c.Burst, 1)
		d.Remaining = max(d.Remaining-(b-burstWithin(p, maxDelay, 1)), 0)
		if !deadline || d.Allowed || d.Impossible || err != nil {
			continue
		}
		cost := max(c.Cost, 1)
		bmax := burstWithin(p, maxDelay, cost)
		if bmax == b {
			continue // the deadline did not lower the burst: the maximum refused
		}
		// The queue delay it met is ⌈δ⌉ = ResetAfter; the maximum admits
		// δ ≤ (B_c − c)·T, whose floor in whole nanoseconds bounds ⌈δ⌉.
		within := drain(p, bmax-cost)
		if d.ResetAfter <= within {
			err = fmt.Errorf("decide: the queue delay %v of %q would pass the request's deadline: %w", d.ResetAfter, p.Name, context.DeadlineExceeded)
			continue
		}
		d.RetryAfter = d.ResetAfter - within
	}
	return err
}

// drain returns ⌊k·T⌋ = ⌊k·Period/Limit⌋ for 0 ≤ k ≤ p's capacity (which
// sluice.Policy.Validate keeps within a Duration).
func drain(p sluice.Policy, k int64) time.Duration {
	hi, lo := bits.Mul64(uint64(k), uint64(p.Period))
	q, _ := bits.Div64(hi, lo, uint64(p.Limit))
	return time.Duration(q)
}

// heldTooLong is the guard of an admission the failure modes decided
// (FailLocal, on a share whose emission interval is not the policy's):
// when a leaky-bucket decision's Delay passes bound, the request is Gone
// if the maximum alone would hold it (the deadline is the bound), and
// otherwise refused, waiting until that delay is back within maxDelay.
func heldTooLong(v *Verdict, bound, maxDelay time.Duration) {
	if v.Outcome != Admit || v.Wait <= bound {
		return
	}
	if v.Wait <= maxDelay {
		*v = Verdict{Outcome: Gone, Err: fmt.Errorf("decide: the queue delay %v would pass the request's deadline: %w", v.Wait, context.DeadlineExceeded)}
		return
	}
	v.Outcome, v.Wait = Refuse, 0
	for k := range v.Decisions {
		d := &v.Decisions[k]
		if d.Delay > maxDelay {
			d.Allowed, d.RetryAfter, d.Remaining = false, d.Delay-maxDelay, 0
			v.Wait = max(v.Wait, d.RetryAfter)
		}
	}
}
