// SPDX-License-Identifier: Apache-2.0

// Package memstore is the in-process sluice.Store: per-key rate-limiting
// state in memory, applied atomically by the pure models of package sluice
// with an injected clock.
//
// Keys are spread over shards, each with its own lock, so decisions on
// different keys rarely contend. Within a shard each policy has a table: an
// open-addressing index into dense rows, each a key's state and its first 16
// bytes (the rest of a longer key is in a byte arena), so the bucket kinds
// cost no pointer per key, a decision on a key of up to 16 bytes touches the
// index and one row, and a decision on a key the store already holds
// allocates nothing. A sliding-log key keeps up to two log entries in its
// row, which is then one cache line; a longer log spills into an array of
// its own. The models run in place on the row (see model.Model.TakeBucket
// and its siblings), and a sluice.Limiter binds its policy once
// (Store.Bind), so Limiter.Allow skips finding the policy's table.
//
// A key asked for far over its limit is rejected without the shard's lock:
// each shard publishes one such hot key as a copy of its row, kept equal to
// the row, and decides the key's rejections on the copy with no write, so
// they scale with the cores that ask (hot.go has the protocol). Decisions
// stay exact.
//
// State expires exactly: a key is dropped once its state is equivalent to no
// state (a full bucket, passed windows), never before. Expired keys are
// dropped when they are next touched, by a background sweeper that examines
// a bounded number of entries per shard per tick (see WithSweepInterval), and
// by Sweep. WithMaxKeys bounds the number of keys held.
package memstore

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
)

// ErrClosed is sluice.ErrStoreClosed, returned (wrapped) by every method
// after Close.
var ErrClosed = sluice.ErrStoreClosed

// Store is an in-memory sluice.Store. It is safe for concurrent use. The zero
// Store is not usable; call New.
type Store struct {
	clock sluice.Clock
	nano  sluice.NanoClock // clock, when it reads nanoseconds directly
	// The default clock, read inline (no interface call): base +
	// time.Since(start), as sluice.MonotonicClock reads it.
	mono   bool
	start  time.Time
	base   int64 // start.UnixNano()
	seed   maphash.Seed
	shards []shard
	shift  uint // shard of hash h: h >> shift

	snap atomic.Pointer[snapshot]
	gen  atomic.Uint64 // incremented when a policy is recompiled
	mu   sync.Mutex    // serializes table creation

	sem semaphores // in-flight limits (semaphore.go)

	closed atomic.Bool
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

var _ sluice.Store = (*Store)(nil)

// policyTable is one policy identity: (Name, Algorithm) for a named policy,
// the whole Policy otherwise. Its per-shard tables share its id.
type policyTable struct {
	id  int
	cur atomic.Pointer[compiled] // the parameters last seen
}

// compiled is a policy with its model.
type compiled struct {
	pt     *policyTable
	policy sluice.Policy
	model  *model.Model
	kind   kind
	den    int64
	period int64
}

// Option configures a Store.
type Option func(*options)

type options struct {
	clock    sluice.Clock
	maxKeys  int
	interval time.Duration
	shards   int
}

// WithClock makes the store read the time from c (as c.Now().UnixNano()).
// The default is sluice.MonotonicClock().
func WithClock(c sluice.Clock) Option {
	return func(o *options) { o.clock = c }
}

// WithMaxKeys bounds the number of keys the store holds, over all policies,
// to n. The bound is split evenly over the shards: inserting a key into a
// full shard first drops an expired key of that shard, and failing that
// evicts the key with the earliest expiry among a few sampled ones, which
// forgives whatever that key still owed (counted in Stats.ForcedEvictions).
// n ≤ 0 means no bound, the default.
func WithMaxKeys(n int) Option {
	return func(o *options) { o.maxKeys = n }
}

// WithSweepInterval sets how often the background sweeper runs; each run
// examines a bounded number of entries per shard and drops the expired ones.
// The default is one second; d ≤ 0 disables the sweeper (keys still expire
// when touched, and Sweep drops them all).
func WithSweepInterval(d time.Duration) Option {
	return func(o *options) { o.interval = d }
}

// withShards sets the number of shards (rounded down to a power of two);
// for tests.
func withShards(n int) Option {
	return func(o *options) { o.shards = n }
}

const (
	defaultShards = 64
	// keysPerShard is the fewest keys per shard WithMaxKeys aims for, so that
	// an uneven spread of keys over shards wastes little of the bound.
	keysPerShard = 512
	// sweepBudget is the number of entries a sweeper tick examines per shard.
	sweepBudget = 1024
)

// New returns a store configured by opts. If it starts a sweeper goroutine,
// Close stops it.
func New(opts ...Option) *Store {
	o := options{interval: time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	mono := o.clock == nil
	if mono {
		o.clock = sluice.MonotonicClock()
	}
	n := o.shards
	if n <= 0 {
		n = defaultShards
		if o.maxKeys > 0 {
			n = min(n, max(1, o.maxKeys/keysPerShard))
		}
	}
	if o.maxKeys > 0 {
		n = min(n, o.maxKeys)
	}
	n = 1 << (bits.Len(uint(n)) - 1) // a power of two
	s := &Store{
		clock:  o.clock,
		seed:   maphash.MakeSeed(),
		shards: make([]shard, n),
		shift:  uint(64 - bits.TrailingZeros(uint(n))),
	}
	s.nano, _ = o.clock.(sluice.NanoClock)
	if mono {
		s.mono, s.start = true, time.Now()
		s.base = s.start.UnixNano()
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.rng = uint64(i)*0x9e3779b97f4a7c15 + 1
		sh.gen = &s.gen
		sh.minExp = math.MaxInt64
		sh.credit = maxCredit
		if o.maxKeys > 0 {
			sh.quota = o.maxKeys / n
			if i < o.maxKeys%n {
				sh.quota++
			}
		}
	}
	s.snap.Store(&snapshot{tables: map[sluice.Policy]*policyTable{}})
	if o.interval > 0 {
		s.stop = make(chan struct{})
		s.done = make(chan struct{})
		go s.sweeper(o.interval)
	}
	return s
}

// now returns the clock's time in nanoseconds, clamped to the models' range.
func (s *Store) now() int64 {
	var ns int64
	switch {
	case s.mono:
		ns = s.base + int64(time.Since(s.start))
	case s.nano != nil:
		ns = s.nano.UnixNano()
	default:
		ns = s.clock.Now().UnixNano()
	}
	return min(max(ns, 0), sluice.MaxTime)
}

func (s *Store) shardOf(h uint64) *shard { return &s.shards[h>>s.shift] }

// snapshot is the store's policy tables, replaced whole (copy on write)
// when one is added or recompiled, so lookups take no lock.
type snapshot struct {
	tables map[sluice.Policy]*policyTable
	// fast holds the current compiled form of the first fastTables tables,
	// searched by comparing policies, which is faster than hashing one.
	fast []*compiled
}

const fastTables = 8

// identity returns the key of p's table: (Name, Algorithm) for a named
// policy, the whole policy otherwise.
func identity(p sluice.Policy) sluice.Policy {
	if p.Name != "" {
		return sluice.Policy{Name: p.Name, Algorithm: p.Algorithm}
	}
	return p
}

// compile returns the compiled form of p, creating its table or recompiling
// its model when its parameters changed. It takes no lock and allocates
// nothing when p is the policy its table last saw.
func (s *Store) compile(p sluice.Policy) (*compiled, error) {
	sn := s.snap.Load()
	for _, c := range sn.fast {
		if c.policy == p {
			return c, nil
		}
	}
	if pt := sn.tables[identity(p)]; pt != nil {
		if c := pt.cur.Load(); c.policy == p {
			return c, nil
		}
	}
	m, err := model.New(p)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sn = s.snap.Load()
	next := &snapshot{tables: sn.tables, fast: sn.fast}
	pt := sn.tables[identity(p)]
	if pt == nil {
		pt = &policyTable{id: len(sn.tables)}
		next.tables = make(map[sluice.Policy]*policyTable, len(sn.tables)+1)
		for k, v := range sn.tables {
			next.tables[k] = v
		}
		next.tables[identity(p)] = pt
	} else if c := pt.cur.Load(); c.policy == p {
		return c, nil // compiled meanwhile
	} else {
		s.gen.Add(1) // the expiries of its keys may have moved
	}
	c := newCompiled(pt, p, m)
	pt.cur.Store(c)
	next.fast = make([]*compiled, 0, len(sn.fast)+1)
	for _, f := range sn.fast {
		if f.pt != pt {
			next.fast = append(next.fast, f)
		}
	}
	if len(next.fast) < fastTables {
		next.fast = append(next.fast, c)
	}
	s.snap.Store(next)
	return c, nil
}

func newCompiled(pt *policyTable, p sluice.Policy, m *model.Model) *compiled {
	return &compiled{pt: pt, policy: p, model: m, kind: kindOf(p.Algorithm), den: m.Denominator(), period: int64(p.Period)}
}

// Take applies one request of cost units against key under policy p and
// returns the decision. It fails only for an invalid policy, a negative
// cost, a context that is already done, or a closed store.
func (s *Store) Take(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, error) {
	if s.closed.Load() || ctx.Err() != nil || cost < 0 {
		return sluice.Decision{}, s.refused(ctx, key, cost)
	}
	c, err := s.compile(p)
	if err != nil {
		return sluice.Decision{}, fmt.Errorf("memstore: take %q: %w", key, err)
	}
	var d sluice.Decision
	if !s.take(c, key, cost, &d) {
		return sluice.Decision{}, fmt.Errorf("memstore: take %q: %w", key, errFull)
	}
	return d, nil
}

// refused returns the error of a take refused before its policy is looked
// at: a closed store, a context that is done, or a negative cost. The
// callers test those three inline, so that a take pays no call for them.
func (s *Store) refused(ctx context.Context, key string, cost int64) error {
	switch {
	case s.closed.Load():
		return fmt.Errorf("memstore: take %q: %w", key, ErrClosed)
	case ctx.Err() != nil:
		return fmt.Errorf("memstore: take %q: %w", key, ctx.Err())
	}
	return fmt.Errorf("memstore: take %q: cost %d: must be >= 0", key, cost)
}

// take is Take once the policy is compiled: it sets *d and reports whether
// the key could be stored.
func (s *Store) take(c *compiled, key string, cost int64, d *sluice.Decision) bool {
	h := maphash.String(s.seed, key)
	sh := s.shardOf(h)
	now := s.now()
	if he := sh.hot.Load(); he != nil && he.h == h && he.c == c && he.key == key && he.reject(now, cost, d) {
		return true // a hot key's rejection, decided without the lock (hot.go)
	}
	k := headOf(key)
	sh.mu.Lock()
	ok := sh.take(c, s.seed, h, &k, key, cost, now, d)
	sh.mu.Unlock()
	return ok
}

var errFull = errors.New("too many keys in one shard of the store")

// Len returns the number of keys the store holds now, over all policies.
// Expired keys that have not been dropped yet count.
func (s *Store) Len() int {
	var n int64
	for i := range s.shards {
		n += s.shards[i].keys.Load()
	}
	return int(n)
}

// Sweep drops every expired key now. It locks one shard at a time.
func (s *Store) Sweep() {
	now := s.now()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.sweepAll(now, &sh.expired)
		sh.mu.Unlock()
	}
	s.sem.sweep(now)
}

// Stats are counts of a store's keys. Every dropped key is counted once, in
// Expired, Evicted or ForcedEvictions.
type Stats struct {
	// Keys is the number of keys held now (Len).
	Keys int
	// Expired counts the keys dropped because their state had become
	// equivalent to none: when touched, by the sweeper, or by Sweep.
	Expired uint64
	// Evicted counts the expired keys dropped to make room under WithMaxKeys.
	Evicted uint64
	// ForcedEvictions counts the keys dropped to make room under WithMaxKeys
	// while their state still limited them: those keys were forgiven.
	ForcedEvictions uint64
}

// Stats returns the store's counts.
func (s *Store) Stats() Stats {
	var st Stats
	for i := range s.shards {
		sh := &s.shards[i]
		st.Keys += int(sh.keys.Load())
		st.Expired += sh.expired.Load()
		st.Evicted += sh.evicted.Load()
		st.ForcedEvictions += sh.forced.Load()
	}
	return st
}

// Close stops the sweeper. Take and TakeAll fail with ErrClosed afterwards.
// Close is idempotent and always returns nil.
func (s *Store) Close() error {
	s.once.Do(func() {
		s.closed.Store(true)
		if s.stop != nil {
			close(s.stop)
			<-s.done
		}
	})
	return nil
}

// sweeper drops expired keys incrementally until Close.
func (s *Store) sweeper(interval time.Duration) {
	defer close(s.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		now := s.now()
		for i := range s.shards {
			select {
			case <-s.stop:
				return
			default:
			}
			sh := &s.shards[i]
			sh.mu.Lock()
			sh.sweepSome(now, sweepBudget)
			sh.hotBar /= 2 // forget hot-key replacements slowly (hot.go)
			sh.mu.Unlock()
		}
		s.sem.sweep(now)
	}
}
