// SPDX-License-Identifier: Apache-2.0

package sluice

import "context"

// WithObserver calls o with every decision of the Limiter: those of Allow,
// AllowN, Wait and Reserve, and, for each of its checks, those of
// AllowAll; and with every Charge (a commit's included), whose cost is the
// units charged and whose decision is the state after it. A Limiter
// without an observer pays one nil check per call (per check, in
// AllowAll).
//
// o is told of every decision a Limiter's store makes, for metrics
// (Prometheus, OpenTelemetry) without wrapping every call. It sees what the
// store answered: d and err as Store.Take returned them, before the failure
// mode turns an error into the Decision the caller gets; cost 0 is a peek.
// It runs on the caller's goroutine, in the request's path: it must be
// quick and safe for concurrent use.
//
// In a refused AllowAll batch, the checks that would have admitted their
// request are observed as the store reports them: Allowed, with nothing
// consumed. Requests refused before the store is asked are not observed:
// a negative cost, and a Wait whose cost exceeds the policy's capacity
// (ErrImpossible at once).
func WithObserver(o func(ctx context.Context, p Policy, key string, cost int64, d Decision, err error)) Option {
	return func(l *Limiter) { l.observe = o }
}

// observer is the type of WithObserver's function.
type observer = func(ctx context.Context, p Policy, key string, cost int64, d Decision, err error)
