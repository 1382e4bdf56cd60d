// SPDX-License-Identifier: Apache-2.0

package memstore

import (
	"context"
	"fmt"
	"hash/maphash"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/model"
)

var _ lease.Giver = (*Store)(nil)

// TakeStamped is Take that also returns the key's state after the take,
// for Give. Its errors are Take's.
func (s *Store) TakeStamped(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, model.State, error) {
	if s.closed.Load() || ctx.Err() != nil || cost < 0 {
		return sluice.Decision{}, model.State{}, s.refused(ctx, key, cost)
	}
	c, err := s.pin(p)
	if err != nil {
		return sluice.Decision{}, model.State{}, fmt.Errorf("memstore: take %q: %w", key, err)
	}
	defer s.unpin(c)
	h := maphash.String(s.seed, key)
	sh := s.shardOf(h)
	now := s.now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	k := headOf(key)
	var d sluice.Decision
	if sh.take(c, s.seed, h, &k, key, cost, c.arg(&p), now, &d) != took { // pinned: never stale
		return sluice.Decision{}, model.State{}, fmt.Errorf("memstore: take %q: %w", key, errFull)
	}
	var st model.State
	if t := sh.table(c.pt); t != nil {
		if _, e := t.find(h, key); e >= 0 {
			st = t.stateOn(e, c)
			st.Log = nil
		}
	}
	return d, st, nil
}

// Give gives back units of a take whose stamp (from TakeStamped) is given,
// where model.Model.Give says it is safe, and reports whether it did. Its
// errors: ErrClosed after Close; the context's error if it is already done;
// an invalid policy. Under a policy the store does not hold, there is
// nothing to give back to.
func (s *Store) Give(ctx context.Context, p sluice.Policy, key string, stamp model.State, units int64) (bool, error) {
	if s.closed.Load() {
		return false, fmt.Errorf("memstore: give %q: %w", key, ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("memstore: give %q: %w", key, err)
	}
	c, err := s.pinHeld(p)
	if err != nil {
		return false, fmt.Errorf("memstore: give %q: %w", key, err)
	}
	if c == nil {
		return false, nil
	}
	defer s.unpin(c) // pinned: if it has no table in the shard, the key has no state
	h := maphash.String(s.seed, key)
	sh := s.shardOf(h)
	now := s.now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	t := sh.table(c.pt)
	if t == nil {
		return false, nil
	}
	slot, e := t.find(h, key)
	if e < 0 {
		return false, nil
	}
	// A stamp is of c's grid (1/c.den ns): on another, the key was last
	// written under other parameters of c's name, and nothing is given back
	// (as on Redis). Nothing is written then either.
	next, ok := c.model.GiveBurst(t.stateOn(e, c), stamp, units, p.Burst)
	if !ok || t.kind == bucketKind && t.den != c.den {
		return false, nil
	}
	sh.retireIf(t, e) // its row changes
	if exp := c.model.ExpiresAt(next); exp <= now && !t.outlives(c, next, now) {
		sh.remove(t, slot, e)
		sh.expired.Add(1)
	} else {
		t.set(e, next)
		sh.wrote(exp) // the expiry moved earlier: the sweeper's bound follows
	}
	return true, nil
}
