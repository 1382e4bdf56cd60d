// SPDX-License-Identifier: Apache-2.0

// Package nostore is the sluice.Store a store wrapper (lease, shard) puts in
// place of a nil store it is given: every call fails with an error wrapping
// sluice.ErrStoreClosed, on which no failure mode admits, since a missing
// store is a programming error, as a closed one is.
package nostore

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
)

// Store fails every call with its error.
type Store struct{ err error }

var _ sluice.Store = Store{}

// New returns the Store that stands in for the nil store given to who
// ("lease", "shard"), naming who in its errors.
func New(who string) Store {
	return Store{fmt.Errorf("%s: the wrapped store is nil: %w", who, sluice.ErrStoreClosed)}
}

// Take fails.
func (s Store) Take(context.Context, sluice.Policy, string, int64) (sluice.Decision, error) {
	return sluice.Decision{}, s.err
}

// TakeAll fails.
func (s Store) TakeAll(context.Context, []sluice.Request, []sluice.Decision) error { return s.err }

// Reset fails.
func (s Store) Reset(context.Context, sluice.Policy, string) error { return s.err }

// Close does nothing: there is nothing to release.
func (Store) Close() error { return nil }
