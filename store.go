// SPDX-License-Identifier: Apache-2.0

package sluice

import (
	"context"
)

// Store holds the per-key state of policies and applies the models to it
// atomically. Implementations: memstore (in-process) and redisstore (Redis
// and Redis Cluster); package lease and package shard wrap a Store in
// another. Every implementation passes the storetest conformance suite: for
// any sequence of requests it gives the decisions the models give.
//
// The errors of every method, which a Store wraps with context (test them
// with errors.Is):
//
//   - ErrStoreClosed: the method was called after Close.
//   - ErrStoreFull: the store refused to create state for a new key or
//     policy because it holds as many as it was configured to.
//   - ctx.Err() (context.Canceled, context.DeadlineExceeded): the caller's
//     context ended before the store answered; the request may or may not
//     have been applied.
//   - anything else: the store failed (a lost connection, a timeout of its
//     own).
//
// A Store never returns an error to say "limited": that is a Decision. A
// Limiter admits on an error only under FailOpen or FailLocal, and never
// on ErrStoreClosed or on the caller's context ending.
//
// A wrapper store (tracing, metrics, lease.Store, shard.Store) forwards the
// methods of Store and of every capability the packages above it look for
// by type assertion: Binder and Refunder here, lease.Giver, shard.Keyer and
// inflight.Semaphore. Each capability has a neutral answer for an inner
// store that lacks it (Bind returns an error, Give and Refund give nothing
// back, a shard key is key~i, an in-flight call fails with an error), so
// one wrapper type serves every store. storetest.Wrapper checks one.
type Store interface {
	// Take applies one request of cost units against key under policy p and
	// returns the decision. The policy must be valid and cost ≥ 0; cost 0 is
	// a peek (see Limiter.AllowN).
	Take(ctx context.Context, p Policy, key string, cost int64) (Decision, error)

	// TakeAll applies reqs all-or-nothing: in order, each seeing the effect of
	// those before it; if every one is admitted they are all recorded,
	// otherwise none is. out[i] receives request i's decision; when the batch
	// is refused, the requests that would have been admitted report their
	// state unconsumed (as a cost-0 peek would) with Allowed true, and at
	// least one reports Allowed false. len(out) must equal len(reqs). On an
	// error nothing was recorded, or the store cannot tell.
	//
	// A request with Force set is a charge (Limiter.Charge): its cost is
	// recorded even past the limit, as model.Model.Charge does, so it never
	// refuses the batch, and its decision is the peek right after it
	// (Allowed false: the key is at its limit or in debt). It is recorded
	// when the batch is, and like the others not at all when another
	// request refuses the batch (its decision is then a peek on the state
	// unchanged). Every Store implements Force; a wrapper store forwards a
	// charge to where the key's state is kept (a lease store straight to
	// its inner store).
	TakeAll(ctx context.Context, reqs []Request, out []Decision) error

	// Reset drops the state of key under policy p (and under every policy
	// sharing p's state: the same Name and Algorithm), as if it had never
	// been seen: an operator's "reset this client's limit". Resetting a key
	// with no state is not an error.
	Reset(ctx context.Context, p Policy, key string) error

	// Close releases the store's resources (goroutines, connections). Every
	// method called after it returns ErrStoreClosed; Close itself may be
	// called more than once.
	Close() error
}

// Request is one (policy, key, cost) triple of a Store.TakeAll batch.
type Request struct {
	Policy Policy
	Key    string
	Cost   int64
	// Force makes the request a charge: Cost is recorded even past the
	// limit (see Store.TakeAll).
	Force bool
}
