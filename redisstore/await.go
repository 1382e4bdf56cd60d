// SPDX-License-Identifier: Apache-2.0

package redisstore

import "context"

// await returns f's result, or parent's error as soon as parent ends,
// whichever comes first: a caller that has gone (a client that hung up, a
// cancelled Wait) stops waiting for Redis at once. f is a call to Redis
// bounded by a context of its own (begin's), so when the caller stops
// waiting f still ends within that bound; its result is then dropped, and
// the request may or may not have been applied (the Store contract's
// ctx.Err()). f must not write anything the caller reads after an error.
// A parent that can never end (context.Background) runs f in the caller's
// goroutine; any other runs it in a goroutine of its own.
func await[T any](parent context.Context, f func() (T, error)) (T, error) {
	done := parent.Done()
	if done == nil {
		return f()
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-done:
		var zero T
		return zero, parent.Err()
	}
}

// callV is call for an f with a result: the result comes back through
// await, so an f its caller stopped waiting for writes nothing the caller
// reads (f must not assign the caller's variables).
func callV[T any](s *Store, parent context.Context, f func(ctx context.Context) (T, error)) (T, error) {
	return callNow(s, parent, func(ctx context.Context) (T, error) {
		return await(parent, func() (T, error) { return f(ctx) })
	})
}

// callNow is callV for a call on the decision path (Override): the caller
// waits for it in its own goroutine, as for a Take sent alone, since a
// goroutine per call costs the client more than the call (BENCHMARKS.md,
// round 6); a cancellation is seen before the call.
func callNow[T any](s *Store, parent context.Context, f func(ctx context.Context) (T, error)) (T, error) {
	ctx, c, err := s.begin(parent)
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := f(ctx)
	return v, s.end(parent, c, err)
}
