// SPDX-License-Identifier: Apache-2.0

package sluice

import (
	"errors"
	"fmt"
)

// The errors of the Store contract and the Limiter. Stores wrap them with
// context (fmt.Errorf("memstore: take %q: %w", key, ErrStoreClosed)), so
// test for them with errors.Is.
var (
	// ErrStoreClosed is returned by every Store method called after Close,
	// and wrapped by every method of a Limiter without a store (the zero
	// Limiter, a nil *Limiter) and by AllowAll for a Check holding one. A
	// Limiter never admits on it, whatever its failure mode: a closed or
	// missing store is a programming error, not an outage to ride out.
	ErrStoreClosed = errors.New("sluice: store is closed")

	// ErrStoreFull is returned by a Store that refuses to create state for
	// a new key or a new policy because it holds as many as it was
	// configured to (memstore.WithMaxKeys, its policy bound). It is a store
	// failure: the Limiter's failure mode decides the request.
	ErrStoreFull = errors.New("sluice: store is full")

	// ErrImpossible is returned by Limiter.Wait for a cost that can never be
	// admitted: it exceeds the policy's capacity (Policy.Capacity), so
	// waiting would never end.
	ErrImpossible = errors.New("sluice: cost exceeds the policy's capacity and can never be admitted")
)

// errNoLimiter is every answer of a Limiter that has no store.
var errNoLimiter = fmt.Errorf("sluice: the Limiter has no store (make it with NewLimiter): %w", ErrStoreClosed)

// errNoLocalStore is NewLimiter's error for FailLocal without a local store.
var errNoLocalStore = errors.New("sluice: NewLimiter: FailLocal needs a local store (WithLocalStore, e.g. memstore.New())")
