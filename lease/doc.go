// SPDX-License-Identifier: Apache-2.0

// Package lease wraps a sluice.Store so that hot keys are decided from
// local budgets (leases) taken from the store in blocks, never admitting
// more than the exact limit.
//
//	store := lease.New(redis)             // one per process
//	lim, _ := sluice.NewLimiter(store, p) // as over any store
//
// A Store (rate_limit.lease: true in the service) takes a
// block of k units from the store in one round trip (a plain Take of cost
// k) and spend it in process. The block is sized from this process's own
// demand: the units it used since its last block, as a rate, times the
// target lease duration (DefaultTarget, WithTarget), at most twice the last block
// and at most half of what the store had left at the last take, so blocks
// shrink to single requests when the shared capacity runs low. Unspent
// units go back (Giver) when a block lapses, and when the limiter is
// retired (Store.ReleasePolicy, Store.ReleaseAll; serve calls them on shutdown and
// for rules a reload replaces). A refusal by a store that has
// no whole unit left is reused locally until the store can have one. A
// decision made from a block reports as Remaining the store's Remaining
// after the block's take plus the block's unspent units: what the key has
// left as of that take, less what this block spent since (refill and other
// processes' takes since then are not seen).
// Leases support token-bucket, gcra and fixed-window (Supported); a Store
// passes the other algorithms straight to the store it wraps, and so does
// TakeAll: an all-or-nothing batch is decided by the store. So does a
// charge (sluice.Request.Force: Limiter.Charge, a Reservation committed
// above its estimate), where every process sees the key's debt; but first
// it ends this Store's block of the key, giving its unspent units back
// (Giver) as when a block lapses and dropping a refusal being reused, and
// it holds the key until the store has answered. This process's next
// request of the key therefore asks the store, which refuses while the key
// is in debt. Blocks that other processes hold are not ended: see the
// Contract.
//
// A Store forwards the capabilities of the store it wraps that the packages
// above look for (sluice.Refunder, Giver, shard.Keyer, inflight.Semaphore;
// see sluice.Store) for the policies it does not lease, with each one's
// neutral answer where that store lacks it; in-flight slots and shard keys
// are never leased. For a leased policy, Give gives nothing back (a Store
// over a Store takes plain blocks), and a take admitted from a block
// (Reserve) is refunded (Commit below the estimate) into that block, if
// nothing has spent from the block or ended it since: the block is then
// exactly what it would be had the take cost less, as the store's own
// refund is exact only while nothing has changed the key. Otherwise, and
// for a take the store decided (a cost above what is left of the block),
// nothing is given back. A peek (cost 0)
// answers as a request of cost 1 would and spends nothing: from the key's
// live block when a unit of it may be spent, as the reused refusal while
// one is, else as the store's peek (which does not count a lapsed block's
// unspent units: the request that would follow gives them back first, so
// a refused peek may be followed by an admitted request).
// A request waiting for another request of its key (which holds the key's
// lease across a store round trip) returns when its context ends.
//
// Contract: leases never admit more than the exact limit. Every set of
// requests a fleet of leasing limiters admits, replayed at the instants
// they were admitted through the exact model of one key (with the key's
// charges at the instants the store recorded them), is admitted by it, as
// long as no other process holds a live block of the key when a charge is
// recorded. A charge ends the charging process's block, not those of other
// processes, which cannot know of it: they may go on spending units taken
// before the charge while the exact model, in debt, refuses. In general,
// then, every admitted set less requests of at most C units in all is
// admitted by the exact model, C being the sum over the key's charges of
// the units that other processes' blocks held unspent when the charge was
// recorded (C = 0 when one process leases the key). The proof below needs
// the store's state within the limit at every take, which a charge alone
// breaks (it records past the limit), so a block must not be spent from
// across one; this process's is ended there.
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
// take left), for fixed-window while the window is the same (model.Model.Give).
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
// store's state is never behind the exact one; but a refusal that another
// process reuses does not see a charge recorded since (its RetryAfter may
// then be early by the charge's time). storetest.Leases replays
// every admission of three leasing replicas through the exact model and
// checks both bounds, on memstore and on real Redis.
package lease
