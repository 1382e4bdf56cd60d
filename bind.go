// SPDX-License-Identifier: Apache-2.0

package sluice

import "context"

// Binder is an optional interface of a Store that can prepare a policy once
// for the many decisions a Limiter asks of it. When its store is a Binder,
// NewLimiter binds the limiter's policy, and AllowN (and so Allow and Wait)
// asks the bound policy instead of Store.Take: the decisions and errors are
// the same, the store only skips finding the policy on every call. memstore
// implements it.
//
// A BoundPolicy that has a method Store() Store names the store it asks;
// NewLimiter uses it only when that is the limiter's own store. So a type
// that embeds a Binder store and overrides Take is not bypassed by the
// promoted Bind: its limiters call its Take.
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

// bind returns store's binding of p: its own when store is a Binder that
// can bind p, else one that calls store.Take.
func bind(store Store, p Policy) BoundPolicy {
	if b, ok := store.(Binder); ok {
		if bp, err := b.Bind(p); err == nil && bindsTo(bp, store) {
			return bp
		}
	}
	return storeTake{store, p}
}

// bindsTo reports whether bp asks store itself, as far as bp tells: a
// bound policy with no Store method is taken at its word.
func bindsTo(bp BoundPolicy, store Store) (same bool) {
	o, ok := bp.(interface{ Store() Store })
	if !ok {
		return true
	}
	// == panics on two values of one non-comparable type: not provably
	// the same store then.
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return o.Store() == store
}

// storeTake binds p to a store that is no Binder.
type storeTake struct {
	store Store
	p     Policy
}

func (b storeTake) Take(ctx context.Context, key string, cost int64) (Decision, error) {
	return b.store.Take(ctx, b.p, key, cost)
}

// setTaker chooses, once leases and shards are set up, what take asks: the
// bound policy itself, or the limiter's leases or shards (shard.go). Chosen
// once, take is one interface call that the compiler inlines into AllowN.
func (l *Limiter) setTaker() {
	if l.leases == nil && l.shardSet == nil {
		l.taker = l.bound
	} else {
		l.taker = spread{l}
	}
}

// take asks the store for one decision on the limiter's policy: through
// the bound policy, or through the limiter's leases or shards.
func (l *Limiter) take(ctx context.Context, key string, n int64) (Decision, error) {
	return l.taker.Take(ctx, key, n)
}

// spread is the taker of a limiter with leases or shards.
type spread struct{ l *Limiter }

func (s spread) Take(ctx context.Context, key string, n int64) (Decision, error) {
	return s.l.takeSpread(ctx, key, n)
}
