// SPDX-License-Identifier: Apache-2.0

// Package sluice is a rate limiter: for any key it answers "allow, reject,
// or wait how long?", exactly, on one machine or across a fleet that shares
// a store.
//
// Make a store, a Limiter for a Policy over it, and ask:
//
//	store := memstore.New() // or redisstore.Open("redis://..."), shared by a fleet
//	defer store.Close()
//	lim, err := sluice.NewLimiter(store, sluice.Policy{
//		Name: "rider-api", Algorithm: sluice.TokenBucket,
//		Limit: 5, Period: time.Second, Burst: 10,
//	})
//	if err != nil {
//		return err // the policy is invalid: the error names the field
//	}
//	d, err := lim.Allow(ctx, riderID)
//	if !d.Allowed {
//		// 429, Retry-After: d.RetryAfter
//	}
//
// Allow and AllowN take units now or refuse; Wait blocks until the units
// are admitted, serving waiters in order; AllowAll checks several limits
// (per IP, per API key, per organisation) all-or-nothing; Charge, and
// Reserve with Commit, record costs known only after the response (LLM
// tokens), even past the limit: the key is then in debt. A Decision
// carries what a client needs to pace itself: Remaining, RetryAfter,
// ResetAfter, and Delay for a leaky-bucket queue.
//
// # Errors and failure modes
//
// An error from a Limiter means the request could not be decided, never
// "limited". When the store fails, the Limiter's FailureMode decides:
// FailOpen (the default) admits, FailClosed refuses, FailLocal decides on
// an in-process store with this replica's share of the limit
// (WithLocalStore; the bound it keeps is in docs/design.md).
// Two errors are never a reason to admit, whatever the mode: the caller's
// context ended, and ErrStoreClosed. Every waiting call (Wait, a lease
// waiting for its key, an in-flight acquire) returns when its context ends.
// Zero values are safe: a Check with no Cost asks for one unit; a peek
// (cost 0: changes nothing, admitted iff a request of cost 1 would be) is
// asked for explicitly, with AllowN(ctx, key, 0) or Check.Peek.
//
// # Which algorithm?
//
//	Algorithm       What a burst gets                       State per key       Use it for
//	token-bucket    up to Burst at once, then Limit/Period  1 timestamp         user-facing APIs (a rider app opening fires 6 calls at once)
//	gcra            exactly what token-bucket gets          1 timestamp         the same; the name many gateways use
//	leaky-bucket    queued up to Burst, released evenly     1 timestamp         protecting a backend that needs a steady rate (GPS ingestion into a spatial index)
//	fixed-window    Limit per aligned window; up to 2×Limit 1 window + count    low-traffic internal endpoints (admin dashboards), envoy-ratelimit compatibility
//	                around a window boundary
//	sliding-log     exactly Limit in any Period             one entry per       contractual limits for few clients (partner SLAs)
//	                                                        admitted request
//	sliding-window  Limit per Period, previous window       2 windows' counts   millions of keys needing better accuracy than fixed windows (trip history)
//	                weighted by its overlap
//
// Every algorithm is exact and identical on every store; the semantics,
// and why token-bucket, gcra and leaky-bucket admit the same requests, are
// in package model. The two window kinds can count calendar days, weeks,
// months or years in a time zone instead of fixed lengths (Policy.Calendar,
// package calendar: a monthly quota that renews on a tenant's billing day).
//
// # Around the Limiter
//
// Stores: memstore (in process) and redisstore (Redis, Sentinel, Cluster);
// Store is the contract, storetest its conformance suite, and package model
// the oracle. Stores compose: lease.New decides hot keys from local budgets
// taken in blocks, shard.New splits each key over sub-keys; a Limiter over
// such a store works as over any. In-flight (concurrency) limits are in
// package inflight; httplimit and grpclimit are middleware.
package sluice
