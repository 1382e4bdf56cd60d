// SPDX-License-Identifier: Apache-2.0

package shard

import (
	"context"

	"github.com/sluicehq/sluice"
)

// shardsCharge reports whether reqs holds a charge of a sharded policy.
func (s *Store) shardsCharge(reqs []sluice.Request) bool {
	for _, r := range reqs {
		if r.Force && s.set(r.Policy) != nil {
			return true
		}
	}
	return false
}

// takeCharges is TakeAll for a batch with a charge of a sharded policy:
// that charge becomes one charge per shard, of its part of the cost, in
// the same atomic batch. Its decision is the peek after it that a Take of
// cost 1 would meet first: the first shard that admits one unit, or else
// the one that will soonest.
func (s *Store) takeCharges(ctx context.Context, reqs []sluice.Request, out []sluice.Decision) error {
	var batch []sluice.Request
	from := make([]int, len(reqs)+1) // request i is batch[from[i]:from[i+1]]
	for i, r := range reqs {
		from[i] = len(batch)
		ss := s.set(r.Policy)
		switch {
		case ss == nil:
			batch = append(batch, r)
		case r.Force:
			n := len(ss.policies)
			for j, q := range ss.policies {
				batch = append(batch, sluice.Request{Policy: q, Key: ss.key(r.Key, j), Cost: split(r.Cost, n, j), Force: true})
			}
		default:
			j := int(ss.next.Add(1) % uint64(len(ss.policies)))
			batch = append(batch, sluice.Request{Policy: ss.policies[j], Key: ss.key(r.Key, j), Cost: r.Cost})
		}
	}
	from[len(reqs)] = len(batch)
	got := make([]sluice.Decision, len(batch))
	err := s.next.TakeAll(ctx, batch, got)
	for i, r := range reqs {
		ds := got[from[i]:from[i+1]]
		d := ds[0]
		for _, e := range ds[1:] {
			if !d.Allowed && (e.Allowed || e.RetryAfter < d.RetryAfter) {
				d = e
			}
		}
		d.Limit = r.Policy.Limit
		out[i] = d
	}
	return err
}

var _ sluice.Refunder = (*Store)(nil)

// TakeRefundable implements sluice.Refunder: the wrapped store's for a
// policy that is not sharded; a sharded policy's take has no stamp, as
// with TakeStamped.
func (s *Store) TakeRefundable(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, any, error) {
	if s.next == nil {
		return sluice.Decision{}, nil, errZero
	}
	if r, ok := s.next.(sluice.Refunder); ok && s.set(p) == nil {
		return r.TakeRefundable(ctx, p, key, cost)
	}
	d, err := s.Take(ctx, p, key, cost)
	return d, nil, err
}

// Refund implements sluice.Refunder: the wrapped store's for a policy that
// is not sharded, and nothing given back otherwise.
func (s *Store) Refund(ctx context.Context, p sluice.Policy, key string, stamp any, units int64) (bool, error) {
	if s.next == nil {
		return false, errZero
	}
	if r, ok := s.next.(sluice.Refunder); ok {
		if s.set(p) != nil {
			stamp = nil // a sharded take holds no stamp of the wrapped store
		}
		// With no stamp the wrapped store gives nothing back, and says
		// whether it is closed (ErrStoreClosed) as every method does.
		return r.Refund(ctx, p, key, stamp, units)
	}
	return false, nil
}
