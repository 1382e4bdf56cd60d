// SPDX-License-Identifier: Apache-2.0

package shard

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
)

// errNoStore is every answer of a Store made over a nil store. It wraps
// sluice.ErrStoreClosed, on which no failure mode admits: a missing store
// is a programming error, as a closed one is.
var errNoStore = fmt.Errorf("shard: the wrapped store is nil: %w", sluice.ErrStoreClosed)

// noStore stands in for a nil store given to New: every call fails.
type noStore struct{}

func (noStore) Take(context.Context, sluice.Policy, string, int64) (sluice.Decision, error) {
	return sluice.Decision{}, errNoStore
}

func (noStore) TakeAll(context.Context, []sluice.Request, []sluice.Decision) error {
	return errNoStore
}

func (noStore) Reset(context.Context, sluice.Policy, string) error { return errNoStore }

func (noStore) Close() error { return nil }
