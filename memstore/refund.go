// SPDX-License-Identifier: Apache-2.0

package memstore

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
// (or none) gives nothing back. Its errors are Give's: after Close, and on
// the zero Store, whatever the stamp.
func (s *Store) Refund(ctx context.Context, p sluice.Policy, key string, stamp any, units int64) (bool, error) {
	st, ok := stamp.(model.State)
	if !ok {
		return false, s.ready(ctx, "refund", key)
	}
	return s.Give(ctx, p, key, st, units)
}
