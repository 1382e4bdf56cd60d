// SPDX-License-Identifier: Apache-2.0

package sluice

import "context"

// WithObserver calls o with every decision the Limiter's store makes, for
// metrics (Prometheus, OpenTelemetry) without wrapping every call: those
// of Allow, AllowN, Wait, Reserve and, per check, AllowAll; and every
// Charge (a commit's included), whose cost is the units charged and whose
// decision is the state after it. o sees d and err as the store returned
// them, before the failure mode turns an error into the caller's
// Decision; cost 0 is a peek. It runs on the caller's goroutine, in the
// request's path: it must be quick and safe for concurrent use. A Limiter
// without an observer pays one nil check per call (per check, in
// AllowAll).
//
// In a refused AllowAll batch, the checks that would have admitted are
// observed as the store reports them: Allowed, with nothing consumed.
// Requests refused before the store is asked are not observed: a negative
// cost, and a Wait whose cost exceeds the policy's capacity.
func WithObserver(o func(ctx context.Context, p Policy, key string, cost int64, d Decision, err error)) Option {
	return func(l *Limiter) { l.observe = o }
}

// observer is the type of WithObserver's function.
type observer = func(ctx context.Context, p Policy, key string, cost int64, d Decision, err error)
