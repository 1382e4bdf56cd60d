// SPDX-License-Identifier: Apache-2.0

package sluice

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/internal/storeeq"
)

// ReplicaCounter reports how many replicas (processes) share a store, so
// that FailLocal can give each its share of a limit. redisstore.Replicas
// counts them by heartbeats in Redis; FixedReplicas is a count the caller
// knows.
type ReplicaCounter interface {
	// Replicas returns the current count, at least 1. While the store is
	// unreachable it keeps returning the last count it knew.
	Replicas() int
}

// FixedReplicas is a ReplicaCounter that always reports n (at least 1).
type FixedReplicas int

// Replicas returns n, or 1 if n < 1.
func (n FixedReplicas) Replicas() int { return max(int(n), 1) }

// WithLocalStore sets the in-process store (typically a memstore.Store,
// which runs the same models) on which a FailLocal limiter decides while
// its own store fails, and how it learns how many replicas share its
// store: each decides on its share of the policy (Policy.Share). A nil
// replicas is FixedReplicas(1), which suits one process and gives it the
// whole limit. It is required with FailLocal. Limiters may share one local
// store: they keep their policies apart as any store does.
func WithLocalStore(s Store, replicas ReplicaCounter) Option {
	return func(l *Limiter) { l.local, l.replicas = s, replicas }
}

// Share returns the policy that each of r replicas enforces locally so that
// together they never exceed p: Limit ⌊N/r⌋ and, for the bucket kinds, Burst
// ⌊B/r⌋, with the same algorithm, period and name. Rounding down keeps the
// sum of the shares within the limit (r·⌊N/r⌋ ≤ N). ok is false when a share
// rounds down to nothing (r > N, or r > B for a bucket kind) or is not a
// valid policy: such a replica then admits nothing on its own, since any
// admission could exceed the limit.
func (p Policy) Share(r int) (share Policy, ok bool) {
	if r <= 1 {
		return p, true
	}
	share = p
	share.Limit = p.Limit / int64(r)
	if p.Algorithm.IsBucket() {
		share.Burst = p.Capacity() / int64(r)
		if share.Burst == 0 {
			return Policy{}, false
		}
	}
	if share.Limit == 0 || share.Validate() != nil {
		return Policy{}, false
	}
	return share, true
}

// localShare is a policy's share for a replica count, cached.
type localShare struct {
	replicas int
	policy   Policy
	ok       bool
}

// share returns the limiter's local share for the current replica count.
func (l *Limiter) share() *localShare {
	r := 1
	if l.replicas != nil {
		r = max(l.replicas.Replicas(), 1)
	}
	if s := l.shares.Load(); s != nil && s.replicas == r {
		return s
	}
	p, ok := l.policy.Share(r)
	s := &localShare{replicas: r, policy: p, ok: ok}
	l.shares.Store(s)
	return s
}

// LocalShare returns the policy l decides on its local store while its
// store fails (FailLocal): its policy's Share for the replica count its
// ReplicaCounter reports now. ok is false when l does not fail local or
// the share is empty (l then refuses).
func (l *Limiter) LocalShare() (share Policy, ok bool) {
	if l == nil || l.failure != FailLocal {
		return Policy{}, false
	}
	s := l.share()
	return s.policy, s.ok
}

// failed is the decision of a request for n units of key, with MaxDelay
// maxDelay (Check.MaxDelay), that the store could not decide: the one place
// where the failure mode is applied.
func (l *Limiter) failed(ctx context.Context, maxDelay time.Duration, key string, n int64) Decision {
	switch l.failure {
	case FailOpen:
		return Decision{Allowed: true, Limit: l.policy.Limit}
	case FailLocal:
		share, ok := l.localPolicy(maxDelay, n)
		if !ok {
			return Decision{Limit: l.policy.Limit}
		}
		// The caller is still waiting (its context has not ended): it gets
		// an answer whatever happens to that context meanwhile.
		d, err := l.local.Take(context.WithoutCancel(ctx), share, key, n)
		if err != nil {
			return Decision{Limit: l.policy.Limit} // the local store failed too: refuse
		}
		return d
	}
	return Decision{Limit: l.policy.Limit}
}

// localPolicy returns the policy on which a FailLocal limiter decides a
// request of cost n with MaxDelay d locally: its share, bounded with the
// share's own queue and interval. ok is false when the share is empty.
func (l *Limiter) localPolicy(d time.Duration, n int64) (Policy, bool) {
	share, ok := l.LocalShare()
	share, err := share.within(d, n) // no error: the policy's own had none
	return share, ok && err == nil
}

// failedAll fills decisions for a batch the store could not decide: each
// check by its limiter's failure mode. The FailLocal checks are decided
// together, all-or-nothing, on their local store, and only when no other
// check refuses (a refused request consumes nothing anywhere); otherwise
// they peek. FailLocal limiters with different local stores are decided one
// by one, which is all-or-nothing only per store.
func failedAll(ctx context.Context, checks []Check, batch []Request, decisions []Decision) {
	var local []int
	var reqs []Request
	refused := false
	for i, c := range checks {
		if c.Limiter.failure != FailLocal {
			decisions[i] = c.Limiter.failed(ctx, c.MaxDelay, c.Key, batch[i].Cost)
			refused = refused || !decisions[i].Allowed
			continue
		}
		share, ok := c.Limiter.localPolicy(c.MaxDelay, batch[i].Cost)
		refused = refused || !ok // an empty share refuses
		local = append(local, i)
		reqs = append(reqs, Request{Policy: share, Key: c.Key, Cost: batch[i].Cost})
	}
	if len(local) == 0 {
		return
	}
	store := checks[local[0]].Limiter.local
	for _, i := range local {
		if !storeeq.Same(checks[i].Limiter.local, store) {
			store = nil
		}
	}
	if store == nil || refused {
		for j, i := range local {
			if refused {
				reqs[j].Cost = 0 // peek
			}
			decisions[i] = checks[i].Limiter.failed(ctx, checks[i].MaxDelay, checks[i].Key, reqs[j].Cost)
		}
		return
	}
	out := make([]Decision, len(reqs))
	err := store.TakeAll(context.WithoutCancel(ctx), reqs, out)
	for j, i := range local {
		decisions[i] = out[j]
		if err != nil {
			// The local store failed too: refuse, consuming nothing
			// (taking them one by one could consume a share of a
			// refused batch).
			decisions[i] = Decision{Limit: checks[i].Limiter.policy.Limit}
		}
	}
}
