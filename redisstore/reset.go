// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
)

var _ sluice.Store = (*Store)(nil)

// Reset forgets key under policy p at once (one DEL of its keys, which
// share a slot), as if it had never been seen.
func (s *Store) Reset(ctx context.Context, p sluice.Policy, key string) error {
	if s.closed.Load() {
		return fmt.Errorf("redisstore: reset %q: %w", key, errClosed)
	}
	c, err := s.compile(p)
	if err != nil {
		return fmt.Errorf("redisstore: reset %q: %w", key, err)
	}
	state, log := stateKey(s.prefix, s.slot, c.tag, key)
	cn, err := s.connection(ctx)
	if err != nil {
		return fmt.Errorf("redisstore: reset %q: %w", key, err)
	}
	err = s.call(ctx, func(ctx context.Context) error {
		return cn.client.Do(ctx, cn.client.B().Del().Key(state, log).Build()).Error()
	})
	if err != nil {
		return fmt.Errorf("redisstore: reset %q: %w", key, err)
	}
	return nil
}
