// SPDX-License-Identifier: Apache-2.0

package sluice

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/internal/storeeq"
)

// Binder is a Store that can prepare a policy once for the many decisions
// a Limiter asks of it (memstore skips finding the policy on every call).
// NewLimiter binds its policy with Bound; the bound policy gives the
// decisions and errors Store.Take would.
//
// A wrapper store that embeds a Binder and overrides Take must also
// override Bind (and may return an error: the Limiter then calls its Take).
// As a guard, a BoundPolicy with a method Store() Store is used only when
// that is the store that was asked to bind.
type Binder interface {
	// Bind prepares p, which is valid. A store that cannot bind p returns
	// an error, and the Limiter uses Store.Take.
	Bind(p Policy) (BoundPolicy, error)
}

// BoundPolicy is a policy a Binder has prepared.
type BoundPolicy interface {
	// Take is the store's Take(ctx, p, key, cost) for the bound policy p.
	Take(ctx context.Context, key string, cost int64) (Decision, error)
}

// Bound returns store's binding of p: its own when store is a Binder that
// binds p to itself, else one that calls store.Take. A nil store's
// binding fails every call with an error wrapping ErrStoreClosed.
func Bound(store Store, p Policy) BoundPolicy {
	if storeeq.Nil(store) {
		return noStore{}
	}
	if b, ok := store.(Binder); ok {
		if bp, err := b.Bind(p); err == nil && bp != nil {
			o, ok := bp.(interface{ Store() Store })
			if !ok || storeeq.Same(o.Store(), store) {
				return bp
			}
		}
	}
	return storeTake{store, p}
}

// storeTake binds p to a store that is no Binder.
type storeTake struct {
	store Store
	p     Policy
}

func (b storeTake) Take(ctx context.Context, key string, cost int64) (Decision, error) {
	return b.store.Take(ctx, b.p, key, cost)
}

// Store returns the store b asks.
func (b storeTake) Store() Store { return b.store }

// noStore is the binding of a nil store.
type noStore struct{}

// errNilStore is every answer of noStore: like a closed store, a missing
// one is never a reason to admit.
var errNilStore = fmt.Errorf("sluice: the store is nil: %w", ErrStoreClosed)

func (noStore) Take(context.Context, string, int64) (Decision, error) {
	return Decision{}, errNilStore
}
