// SPDX-License-Identifier: Apache-2.0

package httplimit

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/sluicehq/sluice"
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
