// SPDX-License-Identifier: Apache-2.0

package sluice

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/emission"
	"github.com/sluicehq/sluice/internal/line"
)

// Wait blocks until n units for key are admitted, or ctx ends, and returns
// the admitting decision. Waiters are served in order, as by
// golang.org/x/time/rate's WaitN: the callers of Wait on one Limiter and
// key form a line, and only its head asks the store, sleeping for each
// refusal's RetryAfter. (Callers of other Limiters or processes take from
// the same store without waiting in this line.)
//
// Wait returns when ctx ends, wherever it is in the line, and at once,
// with an error and taking nothing, when ctx's deadline comes before the
// wait it would need (its own, or that of the caller ahead of it). It
// returns ErrImpossible at once if n exceeds the policy's capacity, and on
// a store failure the error and the failure mode's decision, as AllowN.
//
// A cancelled Wait consumes nothing, except for leaky-bucket: there an
// admitted request has a place in the store's queue and Wait sleeps for
// its Delay; cancelled then, the place is not given back (the queue has
// no refunds) and Wait returns a rejection with ctx's error: the caller
// must not proceed. So Wait first checks that the queue delay fits before
// ctx's deadline, and takes no place it cannot use.
func (l *Limiter) Wait(ctx context.Context, key string, n int64) (Decision, error) {
	if l == nil || l.bound == nil {
		return Decision{}, errNoLimiter
	}
	if n > l.policy.Capacity() {
		return Decision{Limit: l.policy.Limit, Impossible: true}, fmt.Errorf("sluice: policy %q: key %q: cost %d: %w", l.policy.Name, key, n, ErrImpossible)
	}
	if err := l.lines.Enter(ctx, key); err != nil {
		return Decision{Limit: l.policy.Limit}, fmt.Errorf("sluice: policy %q: key %q: waiting in line: %w", l.policy.Name, key, err)
	}
	d, err := l.wait(ctx, key, n)
	l.lines.Leave(key)
	if err == nil && d.Delay > 0 {
		// A leaky-bucket place: the next waiter may take the place
		// behind it while this one waits for its release.
		if err = line.Sleep(ctx, d.Delay); err != nil {
			// The caller has gone before its release: it must not
			// proceed (the place stays taken; see above).
			return Decision{Limit: l.policy.Limit}, fmt.Errorf("sluice: policy %q: key %q: waiting for the release: %w", l.policy.Name, key, err)
		}
	}
	return d, err
}

// wait is Wait for the head of key's line.
func (l *Limiter) wait(ctx context.Context, key string, n int64) (Decision, error) {
	for {
		if err := ctx.Err(); err != nil {
			return Decision{Limit: l.policy.Limit}, err
		}
		if l.policy.Algorithm == LeakyBucket {
			// Peek at the queue: don't take a place that can't be
			// released before the deadline.
			p, err := l.AllowN(ctx, key, 0)
			if err != nil {
				// The store failed: the request's own decision by the
				// failure mode (a peek's would take nothing from a local
				// share), as AllowN gives it.
				return l.AllowN(ctx, key, n)
			}
			if !line.Fits(ctx, p.Delay) {
				return Decision{Limit: l.policy.Limit}, fmt.Errorf("sluice: policy %q: key %q: the queue delay %v would exceed the context deadline", l.policy.Name, key, p.Delay)
			}
		}
		d, err := l.AllowN(ctx, key, n)
		switch {
		case err != nil:
			return d, err
		case d.Impossible:
			return d, fmt.Errorf("sluice: policy %q: key %q: cost %d: %w", l.policy.Name, key, n, ErrImpossible)
		case d.Allowed:
			return d, nil
		}
		need := d.RetryAfter
		if l.policy.Algorithm == LeakyBucket {
			// then its place in the queue, rounded down so that a
			// wait that fits is never refused
			need += emission.Span(max(l.policy.Capacity()-n, 0), l.policy.Limit, l.policy.Period)
		}
		if !line.Fits(ctx, need) {
			return Decision{Limit: l.policy.Limit}, fmt.Errorf("sluice: policy %q: key %q: waiting %v would exceed the context deadline", l.policy.Name, key, need)
		}
		// The callers behind can begin no sooner: those whose deadline
		// comes first leave the line now.
		l.lines.Hold(key, time.Now().Add(d.RetryAfter))
		if err := line.Sleep(ctx, d.RetryAfter); err != nil {
			return Decision{Limit: l.policy.Limit}, err
		}
	}
}
