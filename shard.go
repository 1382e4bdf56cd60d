// SPDX-License-Identifier: Apache-2.0

package sluice

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// MaxShards is the most sub-keys WithShards may split a key into.
const MaxShards = 64

// WithShards splits every key's capacity over n sub-keys (shards), so that
// on a Redis Cluster one hot key's load spreads over several masters. n = 1
// (or 0) is one key, the default. See the package documentation,
// "Sharding", for the contract; NewLimiter refuses n above MaxShards, above
// the limit or the burst (every shard needs at least one unit), and for
// leaky-bucket, and refuses combining shards with leases.
func WithShards(n int) Option { return func(l *Limiter) { l.shards = n } }

// ShardKeyer is implemented by stores that choose where a key's shards
// live: redisstore picks sub-keys whose Cluster hash slots fall in n
// different ranges of the slot space, so an evenly split cluster holds them
// on different masters. Stores without it get key + "~" + i.
type ShardKeyer interface {
	// ShardKey returns the key of shard i (0 ≤ i < n) of key under the
	// shard's policy p. It must be injective in (key, i) for a given p and n.
	ShardKey(p Policy, key string, i, n int) string
}

// shardSet is a sharded limiter's split policy.
type shardSet struct {
	policies []Policy
	next     atomic.Uint64 // round-robin start
	// keys caches the shard keys of recent keys (key → n keys), since a
	// ShardKeyer may search for them; it is dropped whole when it holds
	// maxCachedKeys.
	keys   atomic.Pointer[sync.Map]
	cached atomic.Int64
}

// maxCachedKeys bounds a sharded limiter's cache of shard keys.
const maxCachedKeys = 4096

// ShardPolicies returns the n policies a policy p is split into: limits and
// bursts of ⌊x/n⌋, the first x mod n of them one more, so they sum to
// exactly p's. Each has a name of its own derived from p's, so its state
// never mixes with an unsharded key's.
func ShardPolicies(p Policy, n int) []Policy {
	name := p.Name
	if name == "" {
		name = fmt.Sprintf("~%s:%d:%d:%d", p.Algorithm, p.Limit, int64(p.Period), p.Burst)
	}
	name += "~" + strconv.Itoa(n) + "shards"
	out := make([]Policy, n)
	for i := range out {
		q := p
		q.Name = name
		q.Limit = split(p.Limit, n, i)
		if p.Algorithm.IsBucket() {
			q.Burst = split(p.Capacity(), n, i)
		}
		out[i] = q
	}
	return out
}

// split returns shard i's part of x over n shards.
func split(x int64, n, i int) int64 {
	q := x / int64(n)
	if int64(i) < x%int64(n) {
		q++
	}
	return q
}

func (l *Limiter) checkShards() error {
	n := l.shards
	switch {
	case n == 0 || n == 1:
		l.shards = 1
		return nil
	case n < 0 || n > MaxShards:
		return fmt.Errorf("sluice: policy %q: shards %d: must be between 1 and %d", l.policy.Name, n, MaxShards)
	case l.policy.Algorithm == LeakyBucket:
		return fmt.Errorf("sluice: policy %q: shards %d: not supported for leaky-bucket (n queues do not release one steady stream)", l.policy.Name, n)
	case l.leases != nil:
		return fmt.Errorf("sluice: policy %q: shards %d: cannot be combined with leases", l.policy.Name, n)
	case l.policy.Limit < int64(n) || l.policy.Capacity() < int64(n):
		return fmt.Errorf("sluice: policy %q: shards %d: more than the limit %d or burst %d (every shard needs at least one unit)", l.policy.Name, n, l.policy.Limit, l.policy.Capacity())
	}
	ps := ShardPolicies(l.policy, n)
	for _, p := range ps {
		if err := p.Validate(); err != nil {
			return fmt.Errorf("sluice: policy %q: shards %d: %w", l.policy.Name, n, err)
		}
	}
	l.shardSet = &shardSet{policies: ps}
	return nil
}

// takeSpread is take for a limiter with leases or shards: through them,
// or the store itself for peeks and impossible costs.
func (l *Limiter) takeSpread(ctx context.Context, key string, n int64) (Decision, error) {
	switch {
	case n == 0 || n > l.policy.Capacity():
	case l.leases != nil:
		return l.leases.allow(ctx, l, key, n)
	case l.shardSet != nil:
		return l.shardSet.take(ctx, l, key, n)
	}
	if l.shardSet != nil {
		// A peek or an impossible cost: shard 0 answers for the state
		// it sees, with the whole policy's numbers.
		d, err := l.store.Take(ctx, l.shardSet.policies[0], l.shardKey(key, 0), 0)
		d.Limit = l.policy.Limit
		d.Impossible = n > 0
		if d.Impossible {
			d.Allowed, d.RetryAfter = false, 0
		}
		return d, err
	}
	return l.bound.Take(ctx, key, n)
}

func (l *Limiter) shardKey(key string, i int) string {
	ss := l.shardSet
	n := len(ss.policies)
	k, ok := l.store.(ShardKeyer)
	if !ok {
		return key + "~" + strconv.Itoa(i)
	}
	m := ss.keys.Load()
	if m == nil || ss.cached.Load() >= maxCachedKeys {
		m = new(sync.Map)
		ss.keys.Store(m)
		ss.cached.Store(0)
	}
	if v, ok := m.Load(key); ok {
		return v.([]string)[i]
	}
	keys := make([]string, n)
	for j := range keys {
		keys[j] = k.ShardKey(ss.policies[j], key, j, n)
	}
	if _, loaded := m.LoadOrStore(key, keys); !loaded {
		ss.cached.Add(1)
	}
	return keys[i]
}

// take tries the shards in turn from a round-robin start, each once, until
// one admits; a refusal's RetryAfter is the least of the shards' (never
// early: that shard admits then if nothing else arrives).
func (ss *shardSet) take(ctx context.Context, l *Limiter, key string, n int64) (Decision, error) {
	k := len(ss.policies)
	start := int(ss.next.Add(1) % uint64(k))
	var (
		best     Decision
		have     bool
		possible bool
	)
	for j := range k {
		i := (start + j) % k
		d, err := l.store.Take(ctx, ss.policies[i], l.shardKey(key, i), n)
		if err != nil {
			return d, err
		}
		d.Limit = l.policy.Limit
		if d.Allowed {
			return d, nil
		}
		if d.Impossible {
			continue
		}
		possible = true
		if !have || d.RetryAfter < best.RetryAfter {
			best, have = d, true
		}
	}
	if !possible {
		// The cost exceeds every shard's capacity.
		return Decision{Limit: l.policy.Limit, Impossible: true}, nil
	}
	best.RetryAfter = max(best.RetryAfter, time.Nanosecond)
	return best, nil
}

// request is the store request of an AllowAll check: the key itself, or for
// a sharded limiter one of its shards, round-robin.
func (l *Limiter) request(key string, cost int64) Request {
	ss := l.shardSet
	if ss == nil {
		return Request{Policy: l.policy, Key: key, Cost: cost}
	}
	i := int(ss.next.Add(1) % uint64(len(ss.policies)))
	return Request{Policy: ss.policies[i], Key: l.shardKey(key, i), Cost: cost}
}

// Shards returns the number of sub-keys the limiter splits each key into:
// 1 unless WithShards.
func (l *Limiter) Shards() int { return l.shards }
