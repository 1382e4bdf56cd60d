// SPDX-License-Identifier: Apache-2.0

package memstore

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/sluicehq/sluice"
)

var _ sluice.Binder = (*Store)(nil)

// Bind prepares p for many decisions; sluice.NewLimiter calls it. The bound
// policy's Take is Store.Take for p, with Take's errors, without finding p's
// table each time. Binding changes nothing in the store: p is compiled on
// the first Take. Its errors: ErrClosed after Close; an invalid policy.
func (s *Store) Bind(p sluice.Policy) (sluice.BoundPolicy, error) {
	switch {
	case s.closed.Load():
		return nil, fmt.Errorf("memstore: bind: %w", ErrClosed)
	case s.clock == nil:
		return nil, fmt.Errorf("memstore: bind: %w", errZero)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("memstore: bind: %w", err)
	}
	return &bound{s: s, p: p}, nil
}

// bound is a policy compiled once, on its first Take. Another policy of the
// same name and algorithm with other parameters, other than a bucket's
// Burst or a window's Limit (see compiled.decides), recompiles the table (see sluice.Policy); Take
// notices and compiles p again, as Store.Take would.
type bound struct {
	s *Store
	p sluice.Policy
	c atomic.Pointer[compiled] // nil until the first Take
}

// Store returns the store b asks. A type that embeds *Store is not it, so
// sluice.NewLimiter calls that type's own Take (see sluice.Binder).
func (b *bound) Store() sluice.Store { return b.s }

// Take is Store.Take for the bound policy.
func (b *bound) Take(ctx context.Context, key string, cost int64) (sluice.Decision, error) {
	s := b.s
	if s.closed.Load() || ctx.Err() != nil || cost < 0 {
		return sluice.Decision{}, s.refused(ctx, key, cost)
	}
	c := b.c.Load()
	if c == nil || c.pt.cur.Load() != c {
		var err error
		if c, err = s.compile(b.p); err != nil {
			return sluice.Decision{}, fmt.Errorf("memstore: take %q: %w", key, err)
		}
		b.c.Store(c)
	}
	var d sluice.Decision
	return d, s.decide(&b.p, c, key, cost, &d)
}
