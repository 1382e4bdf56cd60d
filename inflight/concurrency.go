// SPDX-License-Identifier: Apache-2.0

package inflight

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Concurrency limits how many requests per key are in flight at once, in
// this process. Unlike a rate, it bounds work in progress: a slow backend
// holds its slots longer and so is sent less.
//
// Every Acquire must be paired with a call of the release function it
// returns. Release with defer, so that a holder that panics still releases
// its slot while the panic unwinds:
//
//	release, err := c.Acquire(ctx, key)
//	if err != nil {
//		return err
//	}
//	defer release()
//
// Do does exactly that around a function. For a limit shared by many
// processes, with slots that outlive no process by more than a TTL, see
// Limiter.
//
// Make one with NewConcurrency: the zero Concurrency (and a nil
// *Concurrency) has no slots, and refuses every request (Acquire with an
// error).
type Concurrency struct {
	limit int
	mu    sync.Mutex
	keys  map[string]*inflight
}

// errNoConcurrency is Acquire's error on a Concurrency NewConcurrency did
// not make.
var errNoConcurrency = errors.New("inflight: Concurrency has no slots (make it with NewConcurrency)")

// inflight is one key's slots in use and the goroutines waiting for one,
// first come first served.
type inflight struct {
	n       int
	waiters []chan struct{}
}

// NewConcurrency returns a limiter that lets at most limit requests per key
// be in flight at once.
func NewConcurrency(limit int) (*Concurrency, error) {
	if limit < 1 {
		return nil, fmt.Errorf("inflight: NewConcurrency: limit %d: must be at least 1", limit)
	}
	return &Concurrency{limit: limit, keys: make(map[string]*inflight)}, nil
}

// Limit returns the most requests per key in flight at once: 0 for the
// zero or a nil Concurrency.
func (c *Concurrency) Limit() int {
	if c == nil {
		return 0
	}
	return c.limit
}

// InFlight returns the number of slots of key in use (0 for the zero or a
// nil Concurrency).
func (c *Concurrency) InFlight(key string) int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.keys[key]; f != nil {
		return f.n
	}
	return 0
}

// TryAcquire takes a slot of key if one is free now. When ok, release must
// be called once the work is done; calling it again does nothing.
func (c *Concurrency) TryAcquire(key string) (release func(), ok bool) {
	if c == nil || c.limit < 1 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.keys[key]
	if f == nil {
		f = &inflight{}
		c.keys[key] = f
	}
	if f.n >= c.limit || len(f.waiters) > 0 {
		return nil, false
	}
	f.n++
	return c.releaser(key), true
}

// Acquire takes a slot of key, waiting for one to be released if all are in
// use, until ctx ends. Waiters are served in arrival order. A cancelled
// Acquire holds nothing.
func (c *Concurrency) Acquire(ctx context.Context, key string) (release func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c == nil || c.limit < 1 {
		return nil, errNoConcurrency
	}
	c.mu.Lock()
	f := c.keys[key]
	if f == nil {
		f = &inflight{}
		c.keys[key] = f
	}
	if f.n < c.limit && len(f.waiters) == 0 {
		f.n++
		c.mu.Unlock()
		return c.releaser(key), nil
	}
	ready := make(chan struct{}, 1)
	f.waiters = append(f.waiters, ready)
	c.mu.Unlock()

	select {
	case <-ready:
		return c.releaser(key), nil
	case <-ctx.Done():
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, w := range f.waiters {
			if w == ready {
				f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
				return nil, ctx.Err()
			}
		}
		// The slot was handed over as ctx ended: pass it on.
		c.handOff(key, f)
		return nil, ctx.Err()
	}
}

// Do runs fn holding a slot of key, waiting for one as Acquire does. The
// slot is released when fn returns or panics.
func (c *Concurrency) Do(ctx context.Context, key string, fn func() error) error {
	release, err := c.Acquire(ctx, key)
	if err != nil {
		return err
	}
	defer release()
	return fn()
}

// releaser returns an idempotent release function for one slot of key.
func (c *Concurrency) releaser(key string) func() {
	var done atomic.Bool
	return func() {
		if done.Swap(true) {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.handOff(key, c.keys[key])
	}
}

// handOff frees one slot of key: it goes to the first waiter if any, else
// back to the pool. c.mu is held.
func (c *Concurrency) handOff(key string, f *inflight) {
	if len(f.waiters) > 0 {
		w := f.waiters[0]
		f.waiters[0] = nil
		f.waiters = f.waiters[1:]
		w <- struct{}{}
		return
	}
	f.n--
	if f.n == 0 {
		delete(c.keys, key)
	}
}
