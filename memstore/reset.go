// SPDX-License-Identifier: Apache-2.0

package memstore

import (
	"context"
	"fmt"
	"hash/maphash"

	"github.com/sluicehq/sluice"
)

var _ sluice.Store = (*Store)(nil)

// Reset forgets key under policy p at once, as if it had never been seen.
// Its errors: ErrClosed after Close; the context's error if it is already
// done; an invalid policy. A policy the store does not hold has no keys:
// resetting one is a no-op that leaves nothing behind.
func (s *Store) Reset(ctx context.Context, p sluice.Policy, key string) error {
	if s.closed.Load() {
		return fmt.Errorf("memstore: reset %q: %w", key, ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: reset %q: %w", key, err)
	}
	c, err := s.pinHeld(p)
	if err != nil {
		return fmt.Errorf("memstore: reset %q: %w", key, err)
	}
	if c == nil {
		return nil
	}
	defer s.unpin(c) // pinned: if it has no table in the shard, the key has no state
	h := maphash.String(s.seed, key)
	sh := s.shardOf(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if t := sh.table(c.pt); t != nil {
		if slot, e := t.find(h, key); e >= 0 {
			sh.remove(t, slot, e)
		}
	}
	return nil
}
