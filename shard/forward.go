// SPDX-License-Identifier: Apache-2.0

package shard

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/inflight"
)

// A Store forwards every capability that the packages above a store look
// for by type assertion (see sluice.Store) to the store it wraps, with the
// capability's neutral answer where that store lacks it or where a sharded
// policy's decision is not the wrapped store's: Bind and Give in
// shard.go, Refund in charge.go, ShardKey and the in-flight slots (which
// are not sharded) here.

var (
	_ Keyer              = (*Store)(nil)
	_ inflight.Semaphore = (*Store)(nil)
)

// ShardKey implements Keyer: the wrapped store's, or key~i. A Store over
// another shard.Store (or over a lease.Store over a Keyer) thus places its
// sub-keys where the store at the bottom would.
func (s *Store) ShardKey(p sluice.Policy, key string, i, n int) string {
	if s.keyer != nil {
		return s.keyer.ShardKey(p, key, i, n)
	}
	return key + "~" + strconv.Itoa(i)
}

// errNoSemaphore is the in-flight error over a wrapped store without them.
var errNoSemaphore = errors.New("shard: the wrapped store holds no in-flight slots (not an inflight.Semaphore)")

// Acquire implements inflight.Semaphore: the wrapped store's (in-flight
// slots are not sharded), or an error over a store that is no Semaphore.
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
