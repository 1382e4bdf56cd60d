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
// store: failure modes, Wait, all-or-nothing checks of several limits
// (AllowAll), leases and shards for hot keys. Concurrency limits in-flight
// requests per key in one process; InFlight does it across every process
// sharing a store.
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
// is the truth again: nothing decided locally is written back. A Limiter
// fails open unless WithFailureMode says otherwise; the rules of sluice
// serve fail local unless their failure_mode says otherwise.
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
//
// # Leases
//
// WithLease (rate_limit.lease: true in the service) makes a Limiter take a
// block of k units from the store in one round trip (a plain Take of cost
// k) and spend it in process. The block is sized from this process's own
// demand: the units it used since its last block, as a rate, times the
// target lease duration (DefaultLeaseTarget), at most twice the last block
// and at most half of what the store had left at the last take, so blocks
// shrink to single requests when the shared capacity runs low. Unspent
// units go back (Giver) when a block lapses, and when the limiter is
// retired (Limiter.ReleaseLeases; serve calls it on shutdown and for rules
// a reload replaces). A refusal by a store that has
// no whole unit left is reused locally until the store can have one. A
// decision made from a block reports as Remaining the store's Remaining
// after the block's take plus the block's unspent units: what the key has
// left as of that take, less what this block spent since (refill and other
// processes' takes since then are not seen).
// Leases support token-bucket, gcra and fixed-window; NewLimiter refuses
// them for the others.
//
// Contract: leases never admit more than the exact limit. Every set of
// requests a fleet of leasing limiters admits, replayed at the instants
// they were admitted through the exact model of one key, is admitted by it.
// Proof sketch for the bucket kinds (T = Period/Limit): let S be the
// store's TAT, E the TAT of the exact replay and U the units held unspent
// by all live blocks. Admissions keep E ≤ S − U·T (a block's take adds k·T
// to S and k to U; spending moves c·T from U·T to E, and E's max(E, t)
// never bites while S − U·T ≥ t). That last condition is what time can
// break, and a block keeps it: a block taken at t0 that moved the TAT from
// max(TAT, t0) = A to A + k·T may spend its i-th unit (i = 1..k) only up
// to the instant A + (i−1)·T, the moment the exact bucket would have
// refilled past that unit. The limiter checks this against its own clock
// from the call's start, with the TAT's distance from the store's now
// (ResetAfter, less the 1 ns it may be rounded up by), so clock offsets
// between processes do not matter, only clock rates. A block of a full
// bucket must therefore be spent at least at the refill rate: leases help
// exactly when demand exceeds it. A return is safe only where it is
// equivalent to the block having been smaller: for the bucket kinds only if
// nothing changed the key since the take (the TAT is still the one the
// take left), for fixed-window while the window is the same (Model.Give).
// A fixed-window block is valid only in the window it was taken in. The
// sliding kinds record units when they are taken, so a later spend could
// fall outside what they count; leaky-bucket's delays make it a shaper.
//
// What leases buy therefore depends on the algorithm and the load. A
// fixed-window block lasts until its window ends, so a key under its limit
// is decided locally with one round trip per block, and a key over it is
// refused locally until the window ends. A token-bucket or gcra block taken
// from a full bucket must be spent at least at the refill rate, so a key
// well under its limit (a bucket that stays full) gains nothing: its blocks
// lapse and shrink to one unit. A hot key runs its bucket in debt, where a
// block lasts up to Burst·T, and its refusals are reused until a unit
// refills: one round trip per unit refilled per process at most, however
// many requests arrive.
//
// Leases may refuse early, by no more than the capacity blocks hold: with
// H(t) the most units that blocks of all processes together had taken and
// not spent at any instant up to t (held by live blocks, lapsed ones not
// given back, or given back while a refusal was being reused), a request
// of cost c refused at t is one the exact model would also refuse at t, or
// one for which c > R(t) − H(t), R(t) being what the exact model has left:
// the store's state is the exact one plus at most those units. RetryAfter is never early: a leased refusal is the
// store's (or the store's reused until it can have changed), and the
// store's state is never behind the exact one. storetest.Leases replays
// every admission of three leasing replicas through the exact model and
// checks both bounds, on memstore and on real Redis.
//
// # Sharding
//
// WithShards(n) (rate_limit.shards: n) splits every key over n sub-keys, so
// on a Redis Cluster one hot key's load spreads over n masters (redisstore
// picks sub-keys whose hash slots fall in n different ranges of the slot
// space). Shard i has limit ⌊Limit/n⌋ and burst ⌊Burst/n⌋, the first
// Limit mod n (Burst mod n) shards one more, so they sum to exactly the
// policy's (ShardPolicies); n may not exceed the limit or the burst.
//
// Contract: shards never admit more than the exact limit: every admitted
// set, replayed through one exact key, is admitted by it, because each
// model's admissible sets are bounded linearly in its limit and burst
// (a token bucket admits at most Burst + Limit·d/Period in any span d, a
// window at most Limit per window) and the shards' bounds sum to the
// policy's. A request tries the shards in turn from a round-robin start,
// each once, until one admits; it is refused only when every shard would
// refuse it, so a refused request of cost c finds fewer than c units in
// each shard: fewer than n·c over the key. Relative to one key it may thus
// be early by up to n·c − 1 units, plus refill a full shard could not
// store while another was short. A cost above every shard's capacity
// (⌈Burst/n⌉, ⌈Limit/n⌉ for the windows) is Impossible. RetryAfter is the
// least over the shards, when that shard admits: never early. A refusal
// costs n round trips. A sharded decision reports the whole policy's Limit,
// and the Remaining and ResetAfter of the shard that answered: Remaining
// is then a lower bound on what the key has left (it can be about n times
// less), so a client that paces itself from it never sends too much;
// reading every shard would cost n round trips per decision. In an AllowAll batch of several checks a sharded
// limit offers one shard (round-robin) to the atomic batch (a batch of one
// is the limiter's AllowN). leaky-bucket cannot be sharded (n
// queues do not release one steady stream), and shards do not combine with
// leases. storetest.Shards checks all of this on memstore and a real
// 3-master Redis Cluster.
package sluice
