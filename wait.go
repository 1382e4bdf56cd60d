// SPDX-License-Identifier: Apache-2.0

package sluice

import (
	"context"
	"fmt"
	"time"
)

// Wait blocks until n units for key are admitted, or ctx ends, and returns
// the admitting decision. Waiters are served in order: the callers of Wait
// on one Limiter and key form a line, and only the first asks the store,
// sleeping for each refusal's RetryAfter until it is admitted; the next
// caller's turn begins then. So a steady rate is shared among waiters in
// arrival order, as golang.org/x/time/rate's WaitN shares it. (Callers of
// other Limiters or processes sharing the key take from the same store
// without waiting in this line.)
//
// Every Wait returns when ctx ends, wherever it is in the line, and
// returns at once, with an error and without taking anything, when ctx's
// deadline comes before the wait it would need. It returns ErrImpossible
// at once if n exceeds the policy's capacity.
//
// What a cancelled Wait consumes: for the window kinds, token-bucket and
// gcra, nothing (a unit is taken only when admitted, and then Wait
// returns). For leaky-bucket an admitted request has a place in the
// store's queue and Wait sleeps for its Delay; cancelling it during that
// delay does not give the place back (the queue has no refunds), and Wait
// returns a rejection with ctx's error: the caller must not proceed. Wait
// first checks that the current queue delay fits before ctx's deadline,
// so that it does not take a place it cannot use.
//
// On a store failure Wait returns at once with the error and the decision
// of the failure mode, as AllowN does.
func (l *Limiter) Wait(ctx context.Context, key string, n int64) (Decision, error) {
	if l == nil || l.bound == nil {
		return Decision{}, errNoLimiter
	}
	if n > l.policy.Capacity() {
		return Decision{Limit: l.policy.Limit, Impossible: true}, fmt.Errorf("sluice: policy %q: key %q: cost %d: %w", l.policy.Name, key, n, ErrImpossible)
	}
	if err := l.lines.enter(ctx, key); err != nil {
		return Decision{Limit: l.policy.Limit}, fmt.Errorf("sluice: policy %q: key %q: waiting in line: %w", l.policy.Name, key, err)
	}
	d, err := l.wait(ctx, key, n)
	l.lines.leave(key)
	if err == nil && d.Delay > 0 {
		// A leaky-bucket place: the next waiter may take the place
		// behind it while this one waits for its release.
		if err = sleep(ctx, d.Delay); err != nil {
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
				return p, err
			}
			if !fits(ctx, p.Delay) {
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
		if !fits(ctx, d.RetryAfter) {
			return Decision{Limit: l.policy.Limit}, fmt.Errorf("sluice: policy %q: key %q: waiting %v would exceed the context deadline", l.policy.Name, key, d.RetryAfter)
		}
		if err := sleep(ctx, d.RetryAfter); err != nil {
			return Decision{Limit: l.policy.Limit}, err
		}
	}
}

// enter waits for key's line to reach the caller, or for ctx to end.
func (ls *lines) enter(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ls.mu.Lock()
	if ls.m == nil {
		ls.m = make(map[string]*line)
	}
	q := ls.m[key]
	if q == nil {
		q = &line{}
		ls.m[key] = q
	}
	if !q.busy {
		q.busy = true
		ls.mu.Unlock()
		return nil
	}
	turn := make(chan struct{}, 1)
	q.waiting = append(q.waiting, turn)
	ls.mu.Unlock()
	select {
	case <-turn:
		return nil
	case <-ctx.Done():
		ls.mu.Lock()
		for i, w := range q.waiting {
			if w == turn {
				q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
				ls.mu.Unlock()
				return ctx.Err()
			}
		}
		ls.mu.Unlock()
		// The turn came as ctx ended: pass it on.
		ls.leave(key)
		return ctx.Err()
	}
}

// leave ends the current turn of key's line: the next waiter's begins.
func (ls *lines) leave(key string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	q := ls.m[key]
	if len(q.waiting) > 0 {
		next := q.waiting[0]
		q.waiting[0] = nil
		q.waiting = q.waiting[1:]
		next <- struct{}{}
		return
	}
	delete(ls.m, key)
}

// fits reports whether waiting d ends before ctx's deadline.
func fits(ctx context.Context, d time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return !ok || !time.Now().Add(d).After(deadline)
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
