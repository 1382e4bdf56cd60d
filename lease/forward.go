// SPDX-License-Identifier: Apache-2.0

package lease

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/model"
)

// A Store forwards every capability that the packages above a store look
// for by type assertion (see sluice.Store) to the store it wraps, with the
// capability's neutral answer where that store lacks it or where a leased
// policy's decision is not the wrapped store's.

// TakeRefundable implements sluice.Refunder. For a policy that is not
// leased it is the wrapped store's (or its Take with no stamp, over a store
// that is no Refunder). For a leased policy it is Take, and a request
// admitted from a block gets a stamp of that block: Refund puts units back
// into the block while nothing else has changed it since (no other spend
// from it, the block neither ended nor replaced), which is exactly as if
// the take had cost that much less, as the wrapped store's own refund
// (model.Model.Give). A request the store decides alone (one larger than
// what is left of a block still valid) gets no stamp: a refund of it would
// change the store's state under the live blocks, which the package's
// Contract does not allow.
func (s *Store) TakeRefundable(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, any, error) {
	if s.next == nil {
		return sluice.Decision{}, nil, errZero
	}
	t := s.table(p)
	if t == nil {
		if r, ok := s.next.(sluice.Refunder); ok {
			return r.TakeRefundable(ctx, p, key, cost)
		}
		d, err := s.next.Take(ctx, p, key, cost)
		return d, nil, err
	}
	if t.s.closed.Load() || cost <= 0 || cost > t.burst {
		d, err := t.Take(ctx, key, cost)
		return d, nil, err
	}
	var st stamp
	d, err := t.allow(ctx, key, cost, &st)
	if err != nil || !d.Allowed || st.e == nil {
		return d, nil, err
	}
	return d, st, nil
}

// Refund implements sluice.Refunder: into the block a leased take came
// from (see TakeRefundable), the wrapped store's for a policy that is not
// leased, and nothing given back otherwise.
func (s *Store) Refund(ctx context.Context, p sluice.Policy, key string, st any, units int64) (bool, error) {
	if s.next == nil {
		return false, errZero
	}
	if bs, ok := st.(stamp); ok {
		if bs.t == nil || bs.t.s != s || bs.t.p != p {
			return false, nil // not a stamp of this Store's take under p
		}
		return bs.t.refund(ctx, key, bs, units)
	}
	if r, ok := s.next.(sluice.Refunder); ok {
		if s.table(p) != nil {
			st = nil // a leased policy's takes hold no stamp of the wrapped store
		}
		// With no stamp the wrapped store gives nothing back, and says
		// whether it is closed (ErrStoreClosed) as every method does.
		return r.Refund(ctx, p, key, st, units)
	}
	return false, nil
}

// TakeStamped implements Giver: the wrapped store's for a policy that is
// not leased; for a leased one, Take with no stamp (a block taken from
// this Store is not given back: Give gives nothing back).
func (s *Store) TakeStamped(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, model.State, error) {
	if s.next == nil {
		return sluice.Decision{}, model.State{}, errZero
	}
	if g, ok := s.next.(Giver); ok && s.table(p) == nil {
		return g.TakeStamped(ctx, p, key, cost)
	}
	d, err := s.Take(ctx, p, key, cost)
	return d, model.State{}, err
}

// Give implements Giver: the wrapped store's for a policy that is not
// leased, and nothing given back otherwise.
func (s *Store) Give(ctx context.Context, p sluice.Policy, key string, stamp model.State, units int64) (bool, error) {
	if s.next == nil {
		return false, errZero
	}
	if g, ok := s.next.(Giver); ok && s.table(p) == nil {
		return g.Give(ctx, p, key, stamp, units)
	}
	return false, nil
}

// ShardKey implements shard.Keyer: the wrapped store's, or key~i (what
// package shard does over a store that is no Keyer).
func (s *Store) ShardKey(p sluice.Policy, key string, i, n int) string {
	if k, ok := s.next.(keyer); ok {
		return k.ShardKey(p, key, i, n)
	}
	return key + "~" + strconv.Itoa(i)
}

// keyer is shard.Keyer, which this package cannot import: package shard's
// own tests import it (through memstore).
type keyer interface {
	ShardKey(p sluice.Policy, key string, i, n int) string
}

// errNoSemaphore is the in-flight error over a wrapped store without them.
var errNoSemaphore = errors.New("lease: the wrapped store holds no in-flight slots (not an inflight.Semaphore)")

// Acquire implements inflight.Semaphore: the wrapped store's (in-flight
// slots are not leased), or an error over a store that is no Semaphore.
func (s *Store) Acquire(ctx context.Context, name, key, holder string, limit int64, ttl time.Duration) (inflight.Slots, error) {
	if s.next == nil {
		return inflight.Slots{}, errZero
	}
	if sem, ok := s.next.(inflight.Semaphore); ok {
		return sem.Acquire(ctx, name, key, holder, limit, ttl)
	}
	return inflight.Slots{}, errNoSemaphore
}

// Release implements inflight.Semaphore, as Acquire.
func (s *Store) Release(ctx context.Context, name, key, holder string) (inflight.Slots, error) {
	if s.next == nil {
		return inflight.Slots{}, errZero
	}
	if sem, ok := s.next.(inflight.Semaphore); ok {
		return sem.Release(ctx, name, key, holder)
	}
	return inflight.Slots{}, errNoSemaphore
}

// Extend implements inflight.Semaphore, as Acquire.
func (s *Store) Extend(ctx context.Context, name, key, holder string, ttl time.Duration) (inflight.Slots, error) {
	if s.next == nil {
		return inflight.Slots{}, errZero
	}
	if sem, ok := s.next.(inflight.Semaphore); ok {
		return sem.Extend(ctx, name, key, holder, ttl)
	}
	return inflight.Slots{}, errNoSemaphore
}
