// SPDX-License-Identifier: Apache-2.0

package httplimit

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/inflight"
)

// outage is a store that fails every call while down is set, as an
// unreachable Redis does. (A closed store is no outage: a Limiter never
// admits because of sluice.ErrStoreClosed.)
type outage struct {
	sluice.Store
	down atomic.Bool
}

var errOutage = errors.New("dial tcp: connection refused")

func (o *outage) Take(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, error) {
	if o.down.Load() {
		return sluice.Decision{}, errOutage
	}
	return o.Store.Take(ctx, p, key, cost)
}

func (o *outage) TakeAll(ctx context.Context, reqs []sluice.Request, out []sluice.Decision) error {
	if o.down.Load() {
		return errOutage
	}
	return o.Store.TakeAll(ctx, reqs, out)
}

// outage is an in-flight store too (inflight.Semaphore), failing while down
// is set; its Store must be one.
func (o *outage) Acquire(ctx context.Context, name, key, id string, limit int64, ttl time.Duration) (inflight.Slots, error) {
	if o.down.Load() {
		return inflight.Slots{}, errOutage
	}
	return o.Store.(inflight.Semaphore).Acquire(ctx, name, key, id, limit, ttl)
}

func (o *outage) Release(ctx context.Context, name, key, id string) (inflight.Slots, error) {
	if o.down.Load() {
		return inflight.Slots{}, errOutage
	}
	return o.Store.(inflight.Semaphore).Release(ctx, name, key, id)
}

func (o *outage) Extend(ctx context.Context, name, key, id string, ttl time.Duration) (inflight.Slots, error) {
	if o.down.Load() {
		return inflight.Slots{}, errOutage
	}
	return o.Store.(inflight.Semaphore).Extend(ctx, name, key, id, ttl)
}
