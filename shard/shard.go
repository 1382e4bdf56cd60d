// SPDX-License-Identifier: Apache-2.0

package shard

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/nostore"
	"github.com/sluicehq/sluice/model"
)

// Max is the most sub-keys a key is split into.
const Max = 64

// Keyer is what a store implements to choose where a key's shards live:
// redisstore picks sub-keys whose Cluster hash slots fall in n different
// ranges of the slot space, so an evenly split cluster holds them on
// different masters. Over a store without it, shard i of key is
// key + "~" + i.
type Keyer interface {
	// ShardKey returns the key of shard i (0 ≤ i < n) of key under the
	// shard's policy p. It must be injective in (key, i) for a given p and n.
	ShardKey(p sluice.Policy, key string, i, n int) string
}

// Policies returns the n policies a policy p is split into: limits and
// bursts of ⌊x/n⌋, the first x mod n of them one more, so they sum to
// exactly p's. Each has a name of its own derived from p's, so its state
// never mixes with an unsharded key's.
func Policies(p sluice.Policy, n int) []sluice.Policy {
	name := p.Name
	if name == "" {
		name = fmt.Sprintf("~%s:%d:%d:%d", p.Algorithm, p.Limit, int64(p.Period), p.Burst)
	}
	name += "~" + strconv.Itoa(n) + "shards"
	out := make([]sluice.Policy, n)
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

// Count returns how many shards a Store splits p into when asked for n:
// n clamped to [1, Max] and to p's Limit and Capacity (every shard needs at
// least one unit), and 1 for leaky-bucket (n queues do not release one
// steady stream).
func Count(p sluice.Policy, n int) int {
	if p.Algorithm == sluice.LeakyBucket {
		return 1
	}
	n = min(max(n, 1), Max)
	return int(min(int64(n), p.Limit, p.Capacity()))
}

// Store is a sluice.Store that splits every key over sub-keys (shards):
// see the package documentation for the contract. It is safe for
// concurrent use. The zero Store wraps no store: every method that returns
// an error fails with one wrapping sluice.ErrStoreClosed, and Close does
// nothing; make one with New or NewFunc.
type Store struct {
	next  sluice.Store
	keyer Keyer // next as a Keyer, or nil
	count func(sluice.Policy) int
	sets  sync.Map     // sluice.Policy → *set, for sharded policies
	held  atomic.Int64 // sets held, about
}

// maxSets bounds the sharded policies a Store remembers, so that a flood
// of distinct policies (one per tenant, built per request) does not grow it
// for ever: past it, they are all forgotten (a set is only a cache of the
// policy's shards; a Limiter bound to one keeps it).
const maxSets = 4096

var (
	_ sluice.Store  = (*Store)(nil)
	_ sluice.Binder = (*Store)(nil)
)

// errZero is every error of the zero Store: like a missing store, never a
// reason to admit.
var errZero = fmt.Errorf("shard: the zero Store wraps no store (make one with New): %w", sluice.ErrStoreClosed)

// New returns a Store that splits every key of every policy over n shards
// of store (as Count allows).
func New(store sluice.Store, n int) *Store {
	return NewFunc(store, func(sluice.Policy) int { return n })
}

// NewFunc returns a Store that splits the keys of policy p over count(p)
// shards of store (as Count allows): 1 leaves p's keys whole, as does a
// nil count. Over a nil store every call fails with an error wrapping
// sluice.ErrStoreClosed.
func NewFunc(store sluice.Store, count func(sluice.Policy) int) *Store {
	if store == nil {
		store = nostore.New("shard")
	}
	if count == nil {
		count = func(sluice.Policy) int { return 1 }
	}
	s := &Store{next: store, count: count}
	s.keyer, _ = store.(Keyer)
	return s
}

// set is one policy split into shards. It is the policy's
// sluice.BoundPolicy.
type set struct {
	s        *Store
	p        sluice.Policy
	policies []sluice.Policy
	next     atomic.Uint64 // round-robin start
	// keys caches the shard keys of recent keys (key → n keys), since a
	// Keyer may search for them; it is dropped whole when it holds
	// maxCachedKeys.
	keys   atomic.Pointer[sync.Map]
	cached atomic.Int64
}

// maxCachedKeys bounds a set's cache of shard keys.
const maxCachedKeys = 4096

// set returns p's shards, or nil when p is not sharded. Only sharded
// policies are remembered.
func (s *Store) set(p sluice.Policy) *set {
	n := Count(p, s.count(p))
	if n <= 1 {
		return nil
	}
	if v, ok := s.sets.Load(p); ok && len(v.(*set).policies) == n {
		return v.(*set)
	}
	if p.Validate() != nil {
		return nil // the wrapped store answers for an invalid policy
	}
	ss := &set{s: s, p: p, policies: Policies(p, n)}
	for _, q := range ss.policies {
		if q.Validate() != nil {
			return nil
		}
	}
	if _, loaded := s.sets.Swap(p, ss); !loaded && s.held.Add(1) > maxSets {
		s.sets.Clear()
		s.held.Store(0)
	}
	return ss
}

// Take tries key's shards in turn from a round-robin start, each once,
// until one admits. Errors are the wrapped store's.
func (s *Store) Take(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, error) {
	if s.next == nil {
		return sluice.Decision{}, errZero
	}
	if ss := s.set(p); ss != nil {
		return ss.Take(ctx, key, cost)
	}
	return s.next.Take(ctx, p, key, cost)
}

// TakeAll offers one shard of each sharded request (round-robin) to the
// wrapped store's atomic batch. A charge (Request.Force) of a sharded
// policy is split over all its shards as the limit is (⌊c/n⌋ each, the
// first c mod n one more), so each shard carries its part of the debt.
func (s *Store) TakeAll(ctx context.Context, reqs []sluice.Request, out []sluice.Decision) error {
	if s.next == nil {
		return errZero
	}
	if s.shardsCharge(reqs) {
		return s.takeCharges(ctx, reqs, out)
	}
	batch := reqs
	for i, r := range reqs {
		ss := s.set(r.Policy)
		if ss == nil {
			continue
		}
		if &batch[0] == &reqs[0] {
			batch = append([]sluice.Request(nil), reqs...)
		}
		j := int(ss.next.Add(1) % uint64(len(ss.policies)))
		batch[i] = sluice.Request{Policy: ss.policies[j], Key: ss.key(r.Key, j), Cost: r.Cost}
	}
	err := s.next.TakeAll(ctx, batch, out)
	for i, r := range reqs {
		out[i].Limit = r.Policy.Limit // a shard's is its part
	}
	return err
}

// Reset resets every shard of key under p (and the key itself).
func (s *Store) Reset(ctx context.Context, p sluice.Policy, key string) error {
	if s.next == nil {
		return errZero
	}
	var errs []error
	if ss := s.set(p); ss != nil {
		for i, q := range ss.policies {
			errs = append(errs, s.next.Reset(ctx, q, ss.key(key, i)))
		}
	}
	errs = append(errs, s.next.Reset(ctx, p, key))
	return errors.Join(errs...)
}

// TakeStamped is the wrapped store's (see lease.Giver) for a policy that
// is not sharded; a sharded policy's decision has no stamp (leases and
// shards are not combined).
func (s *Store) TakeStamped(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, model.State, error) {
	if s.next == nil {
		return sluice.Decision{}, model.State{}, errZero
	}
	if g, ok := s.next.(giver); ok && s.set(p) == nil {
		return g.TakeStamped(ctx, p, key, cost)
	}
	d, err := s.Take(ctx, p, key, cost)
	return d, model.State{}, err
}

// Give is the wrapped store's (see lease.Giver) for a policy that is not
// sharded, and gives nothing back otherwise.
func (s *Store) Give(ctx context.Context, p sluice.Policy, key string, stamp model.State, units int64) (bool, error) {
	if s.next == nil {
		return false, errZero
	}
	if g, ok := s.next.(giver); ok && s.set(p) == nil {
		return g.Give(ctx, p, key, stamp, units)
	}
	return false, nil
}

// giver is lease.Giver, which a Store forwards.
type giver interface {
	TakeStamped(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, model.State, error)
	Give(ctx context.Context, p sluice.Policy, key string, stamp model.State, units int64) (bool, error)
}

// Close closes the wrapped store.
func (s *Store) Close() error {
	if s.next == nil {
		return nil // the zero Store holds nothing
	}
	return s.next.Close()
}

// Bind returns p's shards as a bound policy, so that a Limiter finds them
// once.
func (s *Store) Bind(p sluice.Policy) (sluice.BoundPolicy, error) {
	if s.next == nil {
		return nil, errZero
	}
	if ss := s.set(p); ss != nil {
		return ss, nil
	}
	return via{sluice.Bound(s.next, p), s}, nil
}

// via is a binding of the wrapped store, which the Store passes through.
type via struct {
	sluice.BoundPolicy
	s *Store
}

// Store returns the Store the binding belongs to (see sluice.Binder).
func (v via) Store() sluice.Store { return v.s }

// Store returns the Store the set belongs to (see sluice.Binder).
func (ss *set) Store() sluice.Store { return ss.s }

// Take is Store.Take for the set's policy. A refusal's RetryAfter is the
// least of the shards' (never early: that shard admits then if nothing
// else arrives). A peek asks the shards as a request of cost 1 would, each
// with a peek, so it is admitted iff some shard would admit that request.
func (ss *set) Take(ctx context.Context, key string, n int64) (sluice.Decision, error) {
	next := ss.s.next
	if n < 0 || n > ss.p.Capacity() {
		// A negative or an impossible cost: shard 0 answers for the state
		// it sees, with the whole policy's numbers.
		d, err := next.Take(ctx, ss.policies[0], ss.key(key, 0), n)
		d.Limit = ss.p.Limit
		d.Impossible = n > 0
		if d.Impossible {
			d.Allowed, d.RetryAfter = false, 0
		}
		return d, err
	}
	k := len(ss.policies)
	start := int(ss.next.Add(1) % uint64(k))
	var (
		best     sluice.Decision
		have     bool
		possible bool
	)
	for j := range k {
		i := (start + j) % k
		d, err := next.Take(ctx, ss.policies[i], ss.key(key, i), n)
		if err != nil {
			return d, err
		}
		d.Limit = ss.p.Limit
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
		return sluice.Decision{Limit: ss.p.Limit, Impossible: true}, nil
	}
	best.RetryAfter = max(best.RetryAfter, time.Nanosecond)
	return best, nil
}

// key returns the key of shard i of key.
func (ss *set) key(key string, i int) string {
	n := len(ss.policies)
	k := ss.s.keyer
	if k == nil {
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
