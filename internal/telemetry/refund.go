// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"context"

	"github.com/sluicehq/sluice"
)

var _ sluice.Refunder = (*store)(nil)

// TakeRefundable implements sluice.Refunder: the wrapped store's, or its
// Take with no stamp (which Refund never accepts).
func (s *store) TakeRefundable(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, any, error) {
	if r, ok := s.next.(sluice.Refunder); ok {
		return r.TakeRefundable(ctx, p, key, cost)
	}
	d, err := s.Take(ctx, p, key, cost)
	return d, nil, err
}

// Refund implements sluice.Refunder: the wrapped store's, or nothing given
// back.
func (s *store) Refund(ctx context.Context, p sluice.Policy, key string, stamp any, units int64) (bool, error) {
	if r, ok := s.next.(sluice.Refunder); ok {
		return r.Refund(ctx, p, key, stamp, units) // a nil stamp: nothing, or ErrStoreClosed
	}
	return false, nil
}
