// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"

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
// gives nothing back.
func (s *Store) Refund(ctx context.Context, p sluice.Policy, key string, stamp any, units int64) (bool, error) {
	st, ok := stamp.(model.State)
	if !ok {
		return false, nil
	}
	return s.Give(ctx, p, key, st, units)
}
