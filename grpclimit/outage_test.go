// SPDX-License-Identifier: Apache-2.0

package grpclimit

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

// unreachable is an in-flight store (inflight.Semaphore) whose every call
// fails, as an unreachable Redis does.
type unreachable struct{}

func (unreachable) Acquire(context.Context, string, string, string, int64, time.Duration) (inflight.Slots, error) {
	return inflight.Slots{}, errOutage
}

func (unreachable) Release(context.Context, string, string, string) (inflight.Slots, error) {
	return inflight.Slots{}, errOutage
}

func (unreachable) Extend(context.Context, string, string, string, time.Duration) (inflight.Slots, error) {
	return inflight.Slots{}, errOutage
}
