// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
)

var _ sluice.Refunder = (*Store)(nil)

// TakeRefundable is TakeStamped with the stamp as a sluice.Refunder hands
// it around. Its errors are Take's.
func (s *Store) TakeRefundable(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, any, error) {
	d, st, err := s.TakeStamped(ctx, p, key, cost)
	if err != nil {
		return d, nil, err
	}
	return d, st, nil
}

// Refund is Give for a stamp from TakeRefundable; a stamp of another kind
// (or none) gives nothing back. After Close, and on the zero Store, it
// fails as Give does, whatever the stamp.
func (s *Store) Refund(ctx context.Context, p sluice.Policy, key string, stamp any, units int64) (bool, error) {
	st, ok := stamp.(model.State)
	switch {
	case ok:
	case s.closed.Load():
		return false, fmt.Errorf("redisstore: refund %q: %w", key, errClosed)
	case s.dial == nil && s.conn.Load() == nil:
		return false, fmt.Errorf("redisstore: refund %q: %w", key, errZero)
	default:
		return false, nil
	}
	return s.Give(ctx, p, key, st, units)
}
