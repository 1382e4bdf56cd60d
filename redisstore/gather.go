// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"sync"
	"time"
)

// Gathering: concurrent Takes share one call of singles.lua.
//
// A Take that finds no call of singles.lua in flight on the store sends
// its request at once, alone. One that finds a call in flight joins the
// open batch: the requests waiting to go together. The batch goes when the
// call in flight returns, or the store's gather delay after it opened,
// whichever is first; so no request waits to be sent longer than the delay
// (the connection's own write may then add up to its MaxFlushDelay, as for
// any command). Each request in a batch is decided on its own, in order,
// at the batch's one time (Redis TIME, read once): as if the Takes had
// arrived one after another at that instant. The script call, its parsing
// and its reply are then shared by the batch, which is most of what a
// decision costs Redis (BENCHMARKS.md).
//
// On a Redis Cluster (without WithSingleSlot) the keys of a batch would be
// in many slots, and a script may only touch keys of one: there each Take
// is its own call, as before.

// DefaultGatherDelay is how long, by default, a Take that finds a call in
// flight waits for it to return before its batch goes without it (see the
// package doc, "Gathering", and WithGatherDelay). It is longer than a round
// trip to a Redis nearby, so that under load a store has one call in flight
// and each call carries every request that arrived during the last: on
// sluice serve's load that is under half the script calls, and 11-16% less
// of Redis's CPU per request, than at 20 µs (BENCHMARKS.md).
const DefaultGatherDelay = 200 * time.Microsecond

// WithGatherDelay sets the longest a Take that finds a call in flight
// waits for it before its batch goes without it: the default is
// DefaultGatherDelay. Shorter sends more, smaller script calls (more of
// Redis's CPU per decision) for less wait under load; 0 sends every Take at
// once in a call of its own. It must not be negative.
func WithGatherDelay(d time.Duration) Option {
	return func(s *Store) { s.gathering.delay = d }
}

// maxBatch bounds the requests of one batch; a full batch goes at once.
const maxBatch = 256

// gathering is a store's batching state.
type gathering struct {
	mu     sync.Mutex
	flying int           // calls of singles.lua in flight
	open   *batch        // the requests waiting to go together, or nil
	delay  time.Duration // WithGatherDelay; 0: every request goes alone
}

// batch is requests that go together in one call.
type batch struct {
	ms    []*single
	timer *time.Timer
}

// gather decides m (whose ctx is begin's, and quit its caller's Done)
// with singles.lua: alone and at once if no call is in flight, else in the
// open batch. A request in a batch returns when it has its outcome, or
// m.ctx has ended, or the caller's context (parent) has (then m may still
// be in a call in flight). A request sent alone waits for its call, which
// ends by m.ctx: returning at its caller's cancellation would need a
// goroutine per call, which doubled the client's CPU per decision (two
// more wake-ups per call).
func (s *Store) gather(cn *conn, m *single, parent context.Context) error {
	g := &s.gathering
	if g.delay == 0 || (cn.cluster && s.slot == "") {
		s.exec(m.ctx, cn, []*single{m})
		return m.err
	}
	g.mu.Lock()
	if g.flying == 0 && g.open == nil {
		g.flying++
		g.mu.Unlock()
		one := [1]*single{m}
		s.exec(m.ctx, cn, one[:])
		s.landed(cn)
		return m.err
	}
	b := g.open
	if b == nil {
		b = &batch{}
		g.open = b
		b.timer = time.AfterFunc(g.delay, func() { s.timeUp(cn, b) })
	}
	b.ms = append(b.ms, m)
	if len(b.ms) >= maxBatch {
		g.open = nil
		g.flying++
		b.timer.Stop()
		go s.fly(cn, b)
	}
	g.mu.Unlock()
	select {
	case <-m.done:
		return m.err
	case <-m.ctx.Done():
		return m.ctx.Err()
	case <-m.quit:
		return parent.Err()
	}
}

// landed records that a call has returned, and sends the open batch, if
// any, in its place.
func (s *Store) landed(cn *conn) {
	g := &s.gathering
	g.mu.Lock()
	b := g.open
	if b == nil {
		g.flying--
		g.mu.Unlock()
		return
	}
	g.open = nil
	g.mu.Unlock()
	b.timer.Stop()
	go s.fly(cn, b)
}

// timeUp sends b if it is still waiting, the gather delay after it opened.
func (s *Store) timeUp(cn *conn, b *batch) {
	g := &s.gathering
	g.mu.Lock()
	if g.open != b {
		g.mu.Unlock()
		return
	}
	g.open = nil
	g.flying++
	g.mu.Unlock()
	s.fly(cn, b)
}

// fly sends b, hands each request its outcome, and then sends the batch
// that opened meanwhile, if any, until there is none.
func (s *Store) fly(cn *conn, b *batch) {
	for {
		ctx, cancel := batchContext(b.ms)
		s.exec(ctx, cn, b.ms)
		cancel()
		for _, m := range b.ms {
			m.done <- struct{}{}
		}
		g := &s.gathering
		g.mu.Lock()
		b = g.open
		if b == nil {
			g.flying--
			g.mu.Unlock()
			return
		}
		g.open = nil
		g.mu.Unlock()
		b.timer.Stop()
	}
}

// batchContext returns the context of a call for ms: it ends at the latest
// of their bounds (never, if one has none), and a caller's cancellation
// does not end it, since the call decides the others too (each caller stops
// waiting at its own bound or cancellation).
func batchContext(ms []*single) (context.Context, context.CancelFunc) {
	var at time.Time
	for _, m := range ms {
		d, ok := m.ctx.Deadline()
		if !ok {
			return context.Background(), func() {}
		}
		if d.After(at) {
			at = d
		}
	}
	return context.WithDeadline(context.Background(), at)
}
