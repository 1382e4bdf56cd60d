// SPDX-License-Identifier: Apache-2.0

// Package sluice is a rate limiter: for any key it answers "allow, reject,
// or wait how long?", exactly, on one machine or across a fleet that shares
// a store.
//
// # Shape
//
// A Policy is an Algorithm with a Limit per Period (and, for the bucket
// kinds, a Burst). A Store holds per-key state and applies the policy's
// Model to it atomically: package memstore keeps it in process, and the Redis
// store runs the same model as a Lua script so that many replicas share one
// limit. A Limiter binds a policy to a store and adds what sits above the
// store: failure modes, Wait, and all-or-nothing checks of several limits
// (AllowAll). Concurrency limits in-flight requests per key.
//
//	store := memstore.New()
//	lim, err := sluice.NewLimiter(store, sluice.Policy{
//		Name: "rider-api", Algorithm: sluice.TokenBucket,
//		Limit: 5, Period: time.Second, Burst: 10,
//	})
//	...
//	d, err := lim.Allow(ctx, riderID)
//	if !d.Allowed {
//		// 429, Retry-After: d.RetryAfter
//	}
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
// # Semantics
//
// Every algorithm is exact, on every store, and follows the same rules:
// rejected requests consume nothing; a cost of 0 peeks without changing
// anything; a cost that can never be admitted (more than the burst, or the
// limit for the window kinds) is rejected with Decision.Impossible and no
// RetryAfter; RetryAfter is the shortest wait after which the same request
// is admitted if nothing else arrives (never too early); ResetAfter is the
// time until the key is idle again; a store forgets a key exactly when its
// state becomes equivalent to none.
//
// Time is integer nanoseconds. With the emission interval T = Period/Limit,
// token-bucket and gcra admit a request of cost c at t iff
// max(TAT, t) + c·T − t ≤ Burst·T and then set TAT = max(TAT, t) + c·T, where
// TAT (the theoretical arrival time) is the one timestamp stored per key. T
// is kept as an exact fraction (and the TAT with it, as whole nanoseconds and
// a fraction of one), so no drift accumulates and a request that arrives at
// the exact instant enough capacity exists is admitted.
//
// # Token bucket = GCRA = leaky bucket as a meter
//
// A token bucket holding Burst tokens that refills Limit per Period holds
// Burst − (TAT−t)/T tokens at t: the bucket's deficit, measured in time, is
// how far the theoretical arrival time runs ahead of now. Taking c tokens is
// pushing the TAT c·T further; the bucket overflows exactly when the TAT would
// run more than Burst·T ahead. That is the Generic Cell Rate Algorithm, and it
// is also the leaky bucket used as a meter (a bucket that drains at Limit per
// Period and may not overflow Burst). So token-bucket, gcra and leaky-bucket
// admit exactly the same requests. The leaky bucket as a queue adds only the
// Delay: an admitted request waits max(0, TAT−t), with the TAT before it, so
// that the downstream sees a constant rate.
//
// The windows count instead: fixed-window counts units per window aligned to
// multiples of Period since the Unix epoch; sliding-log keeps every admitted
// request of the last Period (an entry exactly Period old has left);
// sliding-window weighs the previous aligned window by how much of it the
// sliding window still overlaps: prev·(P−e)/P + cur + c ≤ Limit, compared
// exactly in integers.
//
// # When the store fails
//
// A Limiter's failure mode decides a request its store could not decide (an
// error, a timeout, an open circuit breaker): FailOpen admits it, FailClosed
// refuses it, and FailLocal decides it on an in-process store
// (WithLocalStore) with this replica's share of the policy, Policy.Share(R):
// Limit N_r = ⌊N/R⌋ and, for the bucket kinds, Burst B_r = ⌊B/R⌋, where R is
// the replica count (WithReplicas; redisstore.Replicas counts replicas by
// heartbeats in Redis and keeps the last count while Redis is unreachable).
// Rounding down keeps R·N_r ≤ N and R·B_r ≤ B; a share that rounds down to
// nothing (R > N, or R > B) admits nothing. When the store answers again it
// is the truth again: nothing decided locally is written back.
//
// The bound. Let an outage last D (from the first failed call to the first
// call answered again) and R be the count every replica knew. The requests
// admitted for one key during the outage by all replicas together, A, are
// at most
//
//	token-bucket, gcra, leaky-bucket:  A ≤ R·(B_r + ⌊N_r·D/P⌋)  ≤ B + N·D/P
//	fixed-window, sliding-window:      A ≤ R·N_r·(⌈D/P⌉ + 1)   ≤ N·(⌈D/P⌉ + 1)
//	sliding-log:                       A ≤ R·N_r·(⌊D/P⌋ + 1)   ≤ N·(⌊D/P⌋ + 1)
//
// (a local bucket starts at most full and refills N_r per P; an interval of
// length D meets at most ⌈D/P⌉ + 1 aligned windows, and a sliding-window
// admits at most N_r per aligned window; a sliding log admits at most N_r in
// any (t−P, t]). The store never sees those admissions, so over any span the
// fleet admits at most what the exact limit admits plus A: for an outage
// much shorter than P, over the limit by at most about B (bucket kinds), N
// (sliding-log, or a window kind outage within one window) or 2N (a window
// kind outage across a window boundary). A store that loses its data (a
// Redis restarted empty) forgets what it admitted before the outage, which
// no failure mode can make up for. A replica that knows a count R_i smaller
// than the real one (one started during the outage, before any heartbeat,
// counts itself alone) takes the larger share Share(R_i): the bound is then
// the sum of each replica's own term, which a fixed count (WithReplicas,
// sluice serve --replicas) avoids.
//
// # In-flight limits
//
// A rate bounds how often; InFlight bounds how much work is open at once,
// across every process sharing a store that is a Semaphore (memstore,
// redisstore). Each request holds a slot with a TTL (DefaultHolderTTL): a
// holder with expiry e holds a slot at t iff t < e, and Acquire admits iff
// fewer than the limit hold slots at the store's clock, so the holders of
// one limit never exceed it, in any number of processes; the slots of a
// process that dies are back once their TTL has passed. The limit is fixed
// or moved by a Controller (package adaptive); a reserve keeps
// ⌊limit·fraction⌋ slots for critical requests.
package sluice
