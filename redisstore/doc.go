// SPDX-License-Identifier: Apache-2.0

// Package redisstore is the sluice.Store on Redis and Redis Cluster: many
// processes that share one Redis enforce one limit together.
//
// # Using it
//
//	store, err := redisstore.Open("redis://127.0.0.1:6379")
//	if err != nil { ... }
//	defer store.Close()
//	lim, err := sluice.NewLimiter(store, sluice.Policy{
//		Name: "api", Algorithm: sluice.GCRA, Limit: 100, Period: time.Minute,
//	}, sluice.WithFailureMode(sluice.FailOpen))
//	d, err := lim.Allow(ctx, clientIP)
//
// Open takes redis://, rediss:// (TLS), redis+cluster://h1:p1,h2:p2 and the
// Sentinel and multi-seed forms of rueidis.ParseURL; New takes an existing
// rueidis client.
//
// # How a decision is made
//
// Every decision is one round trip: one Lua script, run by its SHA (EVALSHA)
// and sent again transparently when Redis answers NOSCRIPT (after a
// restart, a failover or SCRIPT FLUSH). A Take of a fixed-window policy is
// decided by fixed.lua, of a bucket kind by bucket.lua: a screen each, which
// the algorithm's rule can be read from, run by singles.lua (see Gathering
// below). Batches (TakeAll), the sliding algorithms and what is outside the
// exact range run take.lua, which calls one file per algorithm
// (take_bucket.lua, take_fixed.lua, take_window.lua, take_log.lua), each a
// screen, on the exact integers of pairs.lua and big.lua. A script does only
// the atomic part: it reads each key's state, evaluates the algorithm's admission
// predicate exactly, and, if the request (or every request of a TakeAll
// batch) is admitted, writes the new state and sets the key to expire at
// the instant its state becomes idle (model.Model.ExpiresAt). A bucket
// kind's key is the exception: it expires at the end of its epoch plus
// one more (see the state below), so that a decision needs no PEXPIRE.
// It returns the instant it used and the state each request saw (the
// one-request scripts: one number per request, the count or the debt it
// read, and whether it admitted); the Go side then
// computes the Decision (remaining, retry-after, reset-after, delay) with the
// very model the other stores use, so the decisions are the model's by
// construction, and the storetest conformance suite checks them.
//
// Lua numbers are doubles, exact only up to 2⁵³, but the models use 63-bit
// nanoseconds and products of up to 126 bits. The one-request scripts work
// in plain doubles, so they take only policies whose numbers stay below
// 2⁵³ (the exact range):
//
//	fixed-window   Period a whole number of microseconds, Limit < 2⁵²;
//	               times are whole microseconds since the epoch (< 2⁵³
//	               until the year 2255; the window boundaries are whole
//	               microseconds, so the decisions are the model's in
//	               nanoseconds)
//	bucket kinds   H × den < 2⁵² / 10⁶ and Burst × num < 2⁵², where
//	               den = Limit/gcd(Period, Limit), num = Period/gcd (the
//	               emission interval is num/den ns) and H the epoch below
//	               (for den 1, a burst lasting up to 52 days); the script
//	               works in 1/den ns relative to the epoch's start
//
// Every envoy-format rule (a whole second, minute, hour or day, and any
// limit below 2⁵²) is inside it. A policy outside it is not refused: take.lua
// decides it, holding every number as a pair of exact doubles (h·10⁹ + l),
// and a product or remainder that leaves 2⁵³ as 24-bit limbs, exact
// over the models' whole parameter range (sluice.MaxLimit, sluice.MaxPeriod,
// model.MaxTime), at a higher cost to Redis. A one-request script that
// meets a state it cannot read exactly (written under another period or
// denominator by a named policy that changed, or a TAT over 2⁵² ns ahead)
// hands the request to take.lua before writing anything. What Go can work
// out in advance (the time cost units take to drain, as whole and
// fractional nanoseconds) is passed in.
//
// # Gathering
//
// Concurrent Takes on one store share script calls. A Take that finds no
// call of singles.lua in flight goes at once, alone. One that finds a call
// in flight joins the open batch, which goes when that call returns or
// the gather delay (DefaultGatherDelay, 200 µs; WithGatherDelay) after it
// opened, whichever is first (the connection's write may then hold it up
// to its own MaxFlushDelay, as any command); a Take never waits for a batch
// past its own deadline less the margin. So under load a store on a Redis
// nearby keeps one call in flight, and each carries the requests that
// arrived during the last: a Take that arrives during a call waits at most
// the delay before its request is sent, and Redis runs a script call per
// batch instead of one per Take. singles.lua decides each request of a batch on its own, in order,
// at one Redis TIME: refused requests write nothing and do not affect the
// others, so every Take gets the decision it would have got alone at that
// instant, in some order of the concurrent ones. The script call, its
// parsing and its reply are shared, which is most of what a decision costs
// Redis beyond the commands on its key (BENCHMARKS.md). Gathering needs all
// of a batch's keys in one slot, so it applies to standalone Redis,
// Sentinel, and a Cluster with WithSingleSlot; on a Cluster without it each
// Take is its own call.
//
// # Time
//
// By default the time is the Redis server's TIME, read inside the script, so
// processes whose clocks disagree still make one coherent sequence of
// decisions. WithClock supplies the time from the caller instead: for
// replaying traces and for tests. Keys then expire in Redis WithExpirySlack
// (real time) after their state is idle by that clock (for bucket.lua's
// keys, after its expiry as above), counted from the write that set the
// expiry; the state itself is judged by the clock, so decisions do not
// depend on the slack.
//
// A policy with a calendar.Calendar has windows that only time-zone rules can
// draw, and the script has none: Go draws the window for its guess of the
// time (this process's clock, or WithClock's) and passes its boundaries; the
// script decides with them only if they hold the time it decides at, and
// else writes nothing and reports its time, and Go draws again (at most
// three calls; a second is needed only when the guess and Redis TIME are on
// opposite sides of a boundary).
//
// # Keys
//
// A state lives at prefix{tag:key}, and a sliding log's entries at
// prefix{tag:key}l, so everything one decision touches is in one Cluster hash
// slot. tag is n:NAME:ALGORITHM for a named policy (policies with the same
// name and algorithm share state, so a limit can be changed without
// forgetting anyone) and u:ALGORITHM:LIMIT:PERIOD:BURST for an unnamed one.
// The user's key and the policy name are escaped (bytes other than letters,
// digits and . _ - / @ become %XX), so they cannot contain braces or
// separators and two inputs never share a key; one longer than 128 bytes
// escaped is replaced by # and its SHA-256. No key is longer than the prefix
// plus MaxKeyLen.
//
// The state is a hash. For the fixed window, one field per window, named
// "start:end" (nanoseconds), holding its count. For the bucket kinds, one
// field per epoch, named "B:d:H", holding v = (TAT − B ms) × d: the
// theoretical arrival time is B ms + v/d ns, d is the denominator, and B
// the start of an epoch of H = floor(dur(Burst)/1ms) + 1 ms, aligned to
// multiples of H since the Unix epoch (a named policy whose emission
// interval changes reads the fraction on its own grid, rounded up, as
// memstore does). So a decision is one HINCRBY: a refusal is taken back in
// the script, and a key's expiry is set once an epoch, to B + 2H (the
// last TAT an admission in the epoch can reach is before it; a charge that
// puts the TAT later sets it there): a bucket key lives at most 2H after
// its last write (or to its TAT), a fixed window's to its window's end. The keys name these layouts (fixed-window.2, token-bucket.2, gcra.2,
// leaky-bucket.2), apart from the earlier t, c, f and d. For the sliding
// window the window start and counts (t, c, p); for the sliding log the
// units in the log and the last entry's time (u, a), with the entries
// ("time cost") in a list; both also record the instant their state
// becomes idle (x). A sliding-log call costs O(1) plus the entries that have
// left the window, plus, for a rejected request, the entries that must leave
// before it fits (at most its cost).
//
// # Batches and Redis Cluster
//
// TakeAll runs a batch as one script, so it is all-or-nothing on standalone
// Redis. On a Cluster a batch whose keys are in one slot is equally atomic;
// a batch over several slots is refused with ErrCrossSlot before anything is
// read or written, since no single script can reach them and anything else
// would not be all-or-nothing. WithSingleSlot puts all of a store's keys in
// one slot (atomic batches on a Cluster, no spreading).
//
// # Failures
//
// Each call is bounded by the caller's deadline less a margin
// (WithDeadlineMargin: 2 ms plus a tenth of the time left, so the caller
// still gets an answer in time) or by a generous ceiling (WithTimeout,
// default 3 s, plus at most 1 ms), whichever is sooner. A caller whose
// context is cancelled stops waiting at once, with its context's error,
// while the store connects, while its request waits in a batch or rides
// in one, and during a Reset, Give, Ping or a write of the limits API (the
// call runs on to its bound; its request may or may not have been
// applied). A Take sent alone (no call was in flight), a TakeAll and an
// Override (all three on the decision path) see a cancellation before
// their call, and then wait for it within its bound: not waiting would
// need a goroutine per call, which doubled the client's CPU per decision.
// A known limit: a call that runs out of its bound while it is the
// connection's only one in flight makes the client close the connection
// (it cannot realign the replies), and a call that finds the client
// re-making it waits for that handshake, which the call that started it
// bounds: on a Redis that has stopped answering, a call whose bound is
// shorter than that one's may then return only when its caller's context
// ends (the caller gets its context's error, never an admission). Only
// real failures count toward the circuit breaker:
// errors from Redis or the connection (refused, reset) and calls that run
// out of the ceiling, far beyond a healthy Redis's latency. A call that runs
// out of its caller's deadline is not one (Stats.CallerTimeouts): a busy
// host that keeps a healthy Redis waiting for a CPU now and then must not
// turn enforcement off. After DefaultBreakerFailures consecutive failures
// (calls that fail together, as in one stall, count once) the breaker answers ErrUnavailable at once, lets one probe through every
// cooldown (default 200 ms) and closes when a probe succeeds (WithRecovered
// hears of it). Stats counts calls, errors, timeouts, short-circuited
// calls, the breaker's openings (one per outage: a failed probe is not
// another) and failed connection attempts. Open does not wait
// for Redis: it connects in the background, and a call waits for the
// connection no longer than it would wait for Redis (the caller's deadline
// less the margin, or the ceiling). A store opened while Redis is down
// starts anyway and connects on demand, under the same breaker. The Limiter's failure mode (open, closed, or local) decides
// what a failed call means to the caller.
//
// # Errors
//
// A method's error means the store could not decide, never "limited". Every
// method that talks to Redis (Take, TakeAll, TakeStamped, Give, Reset,
// Acquire, Release, Extend, Ping, Replicas.Beat) returns, wrapped with the
// method and key:
//
//   - sluice.ErrStoreClosed after Close: for a call made after it (nothing
//     is sent), a Take still waiting in a batch when it came (the batch is
//     not sent), and a call it interrupted by closing Open's client (not
//     counted as a failure of Redis);
//   - ErrUnavailable while the circuit breaker is open;
//   - the caller's context.Canceled or context.DeadlineExceeded when ctx
//     ended or its deadline less the margin passed, whether it was waiting
//     for the connection or for Redis (not counted as a failure of Redis);
//   - context.DeadlineExceeded when the store's timeout (WithTimeout) ran
//     out, and Redis's or the connection's own errors (both counted toward
//     the breaker);
//   - a validation error naming the field for a policy that is not valid or
//     a negative cost (Take, TakeAll, TakeStamped), or a ttl ≤ 0 or past
//     sluice.MaxPeriod (Acquire, Extend).
//
// TakeAll also returns ErrCrossSlot (a Cluster batch over several slots)
// and an error when len(out) ≠ len(reqs). Close always returns nil;
// Replicas.Leave returns nil when the store never connected. New refuses a
// nil client and a prefix or slot with braces; Open a bad URL or option;
// NewReplicas an interval not shorter than the TTL.
//
// # Counting replicas
//
// Replicas counts the processes that share a Redis by heartbeats with a TTL
// in Redis itself (a sorted set of replica ids scored by expiry, by Redis
// TIME), for sluice.FailLocal: each replica's share of a limit is the limit
// divided by the count. While Redis is unreachable the last count stays.
package redisstore
