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
func (s *Store) Reset(ctx context.Context, p sluice.Policy, key string) error {
	if s.closed.Load() {
		return fmt.Errorf("memstore: reset %q: %w", key, ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: reset %q: %w", key, err)
	}
	c, err := s.compile(p)
	if err != nil {
		return fmt.Errorf("memstore: reset %q: %w", key, err)
	}
	h := maphash.String(s.seed, key)
	sh := s.shardOf(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if t := sh.table(c.pt.id); t != nil {
		if slot, e := t.find(h, key); e >= 0 {
			sh.remove(t, slot, e)
		}
	}
	return nil
}
