// SPDX-License-Identifier: Apache-2.0

package inflight

import (
	"context"
	"time"
)

// Semaphore is implemented by stores that hold in-flight (concurrency)
// limits across processes: memstore and redisstore. A semaphore is a set of
// holders of one (name, key), each with an expiry; a holder counts until it
// is released or its expiry passes, so the slots of a process that died come
// back once their TTL has passed.
//
// The contract, at the store's clock t (memstore: its injected clock;
// redisstore: Redis TIME):
//
//   - a holder with expiry e holds a slot at t iff t < e;
//   - Acquire admits a new holder iff fewer than limit holders hold a slot
//     at t, and then gives it the expiry t + ttl; so at no instant do more
//     than limit holders (of calls with that limit) hold slots, whatever
//     the number of processes;
//   - Acquire of a holder that already holds a slot refreshes its expiry
//     and admits it, whatever the limit: a retried Acquire is idempotent;
//   - Release of a holder that holds no slot (released, expired, unknown) is
//     not an error and changes nothing;
//   - Extend sets a holding holder's expiry to t + ttl and reports true, or
//     reports false and changes nothing for one that holds no slot;
//   - a key whose holders have all expired or been released takes no memory
//     (memstore: dropped when touched or swept; Redis: the key is deleted
//     or expires with its last holder).
//
// An error means the store failed, never "no slot".
type Semaphore interface {
	// Acquire adds holder to the holders of (name, key) for ttl if fewer
	// than limit hold slots now. limit ≥ 0 and ttl > 0.
	Acquire(ctx context.Context, name, key, holder string, limit int64, ttl time.Duration) (Slots, error)
	// Release removes holder from the holders of (name, key).
	Release(ctx context.Context, name, key, holder string) (Slots, error)
	// Extend gives a holding holder the expiry now + ttl; Slots.Acquired
	// reports whether it held a slot.
	Extend(ctx context.Context, name, key, holder string, ttl time.Duration) (Slots, error)
}

// Slots is the outcome of a Semaphore call.
type Slots struct {
	// Acquired reports, for Acquire, whether the holder holds a slot now;
	// for Extend, whether it held one and was extended; for Release,
	// whether it held one and gave it back.
	Acquired bool
	// Held is the number of holders holding slots after the call.
	Held int64
	// NextExpiry is the time until the earliest expiry among the holders
	// after the call (0 when there are none): the longest a refused caller
	// waits for a slot if no holder releases one.
	NextExpiry time.Duration
}
