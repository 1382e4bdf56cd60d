// SPDX-License-Identifier: Apache-2.0

package sluice

import (
	"context"
	"time"
)

// Store holds the per-key state of policies and applies the models to it
// atomically. Implementations: memstore (in-process) and redisstore (Redis
// and Redis Cluster). Every implementation passes the storetest conformance
// suite: for any sequence of requests it gives the decisions the models give.
//
// A Store returns an error only when it failed (a lost connection, a closed
// store), never to say "limited".
type Store interface {
	// Take applies one request of cost units against key under policy p and
	// returns the decision. The policy must be valid and cost ≥ 0.
	Take(ctx context.Context, p Policy, key string, cost int64) (Decision, error)

	// TakeAll applies reqs all-or-nothing: in order, each seeing the effect of
	// those before it; if every one is admitted they are all recorded,
	// otherwise none is. out[i] receives request i's decision; when the batch
	// is refused, the requests that would have been admitted report their
	// state unconsumed (as a cost-0 peek would) with Allowed true, and at
	// least one reports Allowed false. len(out) must equal len(reqs).
	TakeAll(ctx context.Context, reqs []Request, out []Decision) error
}

// Request is one (policy, key, cost) triple of a Store.TakeAll batch.
type Request struct {
	Policy Policy
	Key    string
	Cost   int64
}

// Clock supplies the current time to a store. Stores convert it to
// nanoseconds since the Unix epoch with UnixNano.
type Clock interface {
	Now() time.Time
}

// NanoClock is a Clock that can also read the time directly as nanoseconds
// since the Unix epoch, which is cheaper than Now().UnixNano(). Stores use
// UnixNano when their clock has it.
type NanoClock interface {
	Clock
	UnixNano() int64
}

// MonotonicClock returns a clock that reads the wall clock once and then
// advances with the monotonic clock, so it never steps back when the system
// time is adjusted. It is a NanoClock.
func MonotonicClock() NanoClock {
	now := time.Now()
	return monotonic{start: now, base: now.UnixNano()}
}

type monotonic struct {
	start time.Time
	base  int64 // start.UnixNano()
}

func (c monotonic) Now() time.Time {
	return c.start.Add(time.Since(c.start))
}

func (c monotonic) UnixNano() int64 {
	return c.base + int64(time.Since(c.start))
}

// Resetter is implemented by stores that can forget a key at once, as if
// it had never been seen: an operator's "reset this client's limit". Both
// memstore and redisstore implement it.
type Resetter interface {
	// Reset drops the state of key under policy p (and under every policy
	// sharing p's state: the same Name and Algorithm). Resetting a key
	// with no state is not an error.
	Reset(ctx context.Context, p Policy, key string) error
}
