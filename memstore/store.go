// SPDX-License-Identifier: Apache-2.0

// Package memstore is the in-process sluice.Store: per-key rate-limiting
// state in memory, applied atomically by the pure models of package model
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
// Requests of one named bucket policy that differ only in Burst
// (sluice.Check.Burst) share its compiled form: each is decided under its
// own burst (model.Model.TakeBurst), which changes no table, so they cost
// what the policy's own requests cost; so do requests of one named window
// policy that differ only in Limit (a descriptor's limit override in
// sluice serve's RLS), each under its own limit (model.Model.TakeLimit).
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
// by Sweep. WithMaxKeys bounds the number of keys held. Under policies of
// one name and a window algorithm with different periods (a reconfigured
// policy, an override), "equivalent to no state" is judged under the
// longest period that name has had since it last held no key: a request
// under a shorter one (a peek, a refusal) or a sweep never drops a count
// that the longer one still holds, as Redis keeps a key for its writer.
//
// Policies are bounded and freed too (registry.go): a policy is held from
// its first use until it holds no key, and then dropped by the sweeper, so a
// flood of distinct policies (an RLS descriptor's limit override makes one
// each) costs memory only while their keys live. WithMaxPolicies bounds how
// many are held at once (DefaultMaxPolicies); at the bound, a new policy
// first frees held ones whose keys have all expired, and failing that a
// take for it fails with sluice.ErrStoreFull. Creating a policy is O(1)
// amortized.
//
// Errors are part of each method's contract, listed in its doc. After
// Close, every method that returns an error returns one wrapping
// sluice.ErrStoreClosed (ErrClosed); a store that cannot hold a new policy
// or key returns one wrapping sluice.ErrStoreFull. Neither comes with an
// admission: a closed or full store admits nothing.
package memstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/model"
)

// ErrClosed is sluice.ErrStoreClosed, returned (wrapped) by every method
// after Close.
var ErrClosed = sluice.ErrStoreClosed

// errZero is every error of the zero Store: like a closed store, never a
// reason to admit (it was sluice.ErrStoreFull, on which a fail-open Limiter
// admits). The registry returns it for every policy, so the calls that read
// a policy pay nothing for the check.
var errZero = fmt.Errorf("the zero Store holds nothing (make one with New): %w", ErrClosed)

// Store is an in-memory sluice.Store. It is safe for concurrent use. The zero
// Store holds nothing and is not usable: every method that returns an error
// fails with one wrapping ErrClosed, Sweep does nothing and Len, Stats and
// Semaphores are 0; make one with New.
type Store struct {
	clock clock.Clock
	nano  clock.Nano // clock, when it reads nanoseconds directly
	// The default clock, read inline (no interface call): base +
	// time.Since(start), as clock.Monotonic reads it.
	mono   bool
	start  time.Time
	base   int64 // start.UnixNano()
	seed   maphash.Seed
	shards []shard
	shift  uint // shard of hash h: h >> shift

	reg registry      // the policies (registry.go)
	gen atomic.Uint64 // incremented when a policy is recompiled

	sem semaphores // in-flight limits (semaphore.go)

	closed atomic.Bool
	sweep  *sweeper // nil when there is no background sweeper
	once   sync.Once
}

var _ sluice.Store = (*Store)(nil)

// compiled is a policy with its model.
type compiled struct {
	pt     *policyTable
	policy sluice.Policy
	model  *model.Model
	kind   kind
	den    int64
	period int64
}

// decides reports whether c decides the requests of policy p, each under
// p's own Burst or Limit (compiled.arg): p is c's policy, or a valid named
// policy that differs from it only in Burst, for a bucket kind, or only in
// Limit, for a window kind. Those share c's table (the identity is (Name,
// Algorithm)), and that parameter is no part of what the table keeps: a
// bucket key's TAT, its grid (1/den ns) and its expiry are the same under
// every burst, which only bounds what a request may take
// (model.Model.TakeBurst); a window key's start, counts or log and its
// expiry are the same under every limit, which only bounds what a request
// may take and what its decision reports (model.Model.TakeLimit). So
// requests of one policy with different bursts (sluice.Check.Burst: a
// leaky-bucket request's maximum delay, a burst per deadline), or of one
// window policy with different limits (a descriptor's limit override in
// sluice serve's RLS, which shares the count of the rule it overrides) are
// decided by one compiled form, and none recompiles the table; a request
// takes its burst or limit along (the arg argument of the takes), as a
// Redis script's arguments do. (A bucket's Limit is its grid: another one
// recompiles.)
func (c *compiled) decides(p sluice.Policy) bool {
	if c.policy == p {
		return true
	}
	if c.policy.Name == "" {
		return false
	}
	q := p
	if c.kind != bucketKind {
		// Any Limit from 1 to sluice.MaxLimit is valid since c's policy,
		// equal to p but for it, is: the window kinds check nothing else
		// against the limit.
		q.Limit = c.policy.Limit
		return q == c.policy && 1 <= p.Limit && p.Limit <= sluice.MaxLimit
	}
	q.Burst = c.policy.Burst
	if q != c.policy {
		return false
	}
	// A burst from 1 to c's capacity is valid since c's is (the time a
	// full bucket takes to drain only grows with the burst): the bursts
	// sluice.Check.Burst asks for. Validate judges any other.
	b, most := p.Burst, c.policy.Burst
	if most == 0 {
		most = c.policy.Limit
	}
	return 1 <= b && b <= most || p.Validate() == nil
}

// arg returns what a request of p, which c decides, takes along to its
// decision: p's Burst for the bucket kinds, its Limit for the window kinds
// (see decides).
func (c *compiled) arg(p *sluice.Policy) int64 {
	if c.kind == bucketKind {
		return p.Burst
	}
	return p.Limit
}

// Option configures a Store.
type Option func(*options)

type options struct {
	clock       clock.Clock
	maxKeys     int
	maxPolicies int
	interval    time.Duration
	shards      int
}

// WithClock makes the store read the time from c (as c.Now().UnixNano()).
// The default is clock.Monotonic().
func WithClock(c clock.Clock) Option {
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

// WithMaxPolicies bounds the number of policies the store holds to n; n ≤ 0
// leaves the default, DefaultMaxPolicies. A policy is held from its first
// use until it holds no key and the sweeper (or Sweep, or the need for room)
// drops it; a named policy counts once whatever its parameters (see
// sluice.Policy). At the bound, a call for a policy the store does not hold
// first makes room: it drops the policies that hold no key, and looks at
// the 4 policies held longest (in the order they were created, each then
// moving to the back of that order) for keys that have all expired,
// freeing those. Its work is bounded: one lock of each shard per policy it
// looks at, and one key that has not expired (it skips a policy until that
// key's expiry), besides the expired keys it drops, each of which it would
// otherwise have left for the sweeper. So with every key of the held
// policies expired a new policy is created at once, and a policy whose
// keys have all expired is freed within ⌈n/4⌉ calls at the bound, or by
// the sweeper. A call that finds no room fails with an error wrapping
// sluice.ErrStoreFull: it is never admitted silently, and the Limiter's
// failure mode decides.
func WithMaxPolicies(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxPolicies = n
		}
	}
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

// New returns a store configured by opts. Its background sweeper (see
// WithSweepInterval) stops at Close, or once the store is unreachable: a
// store dropped without Close leaks nothing.
func New(opts ...Option) *Store {
	o := options{interval: time.Second, maxPolicies: DefaultMaxPolicies}
	for _, opt := range opts {
		if opt == nil {
			continue // a nil option is no option
		}
		opt(&o)
	}
	mono := o.clock == nil
	if mono {
		o.clock = clock.Monotonic()
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
	s.nano, _ = o.clock.(clock.Nano)
	if mono {
		s.mono, s.start = true, time.Now()
		s.base = s.start.UnixNano()
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.rng = uint64(i)*0x9e3779b97f4a7c15 + 1
		sh.gen = &s.gen
		sh.reg = &s.reg
		sh.minExp = math.MaxInt64
		sh.credit = maxCredit
		if o.maxKeys > 0 {
			sh.quota = o.maxKeys / n
			if i < o.maxKeys%n {
				sh.quota++
			}
		}
	}
	s.reg.gen, s.reg.max = &s.gen, o.maxPolicies
	s.reg.free = s.freeExpired
	if o.interval > 0 {
		s.sweep = startSweeper(s, o.interval)
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
	return min(max(ns, 0), model.MaxTime)
}

func (s *Store) shardOf(h uint64) *shard { return &s.shards[h>>s.shift] }

// compile returns the compiled form that decides p (compiled.decides),
// creating its policy table or recompiling its model when its parameters
// changed. It takes no lock and allocates nothing when p is the policy its
// table last saw, or differs from it only in Burst.
func (s *Store) compile(p sluice.Policy) (*compiled, error) {
	if c := s.reg.lookup(p); c != nil {
		return c, nil
	}
	return s.reg.compile(p, false)
}

// pin is compile that also acquires p's table, so that it stays alive until
// unpin.
func (s *Store) pin(p sluice.Policy) (*compiled, error) {
	if c := s.reg.lookup(p); c != nil && c.pt.acquire() {
		return c, nil
	}
	return s.reg.compile(p, true)
}

// pinHeld is pin for a policy the store may not hold: it returns nil, and
// creates nothing, when the store holds no policy of p's identity.
func (s *Store) pinHeld(p sluice.Policy) (*compiled, error) {
	if c := s.reg.lookup(p); c != nil && c.pt.acquire() {
		return c, nil
	}
	return s.reg.compileIf(p, true, false)
}

func (s *Store) unpin(c *compiled) { s.reg.release(c.pt) }

func newCompiled(pt *policyTable, p sluice.Policy, m *model.Model) *compiled {
	return &compiled{pt: pt, policy: p, model: m, kind: kindOf(p.Algorithm), den: m.Denominator(), period: int64(p.Period)}
}

// Take applies one request of cost units against key under policy p and
// returns the decision. Its errors: ErrClosed (sluice.ErrStoreClosed) after
// Close; the context's error if it is already done; an invalid policy or a
// negative cost; sluice.ErrStoreFull when p is a policy the store does not
// hold and it holds WithMaxPolicies of them, or when the key's table can
// hold no more keys.
func (s *Store) Take(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, error) {
	if s.closed.Load() || ctx.Err() != nil || cost < 0 {
		return sluice.Decision{}, s.refused(ctx, key, cost)
	}
	c, err := s.compile(p)
	if err != nil {
		return sluice.Decision{}, fmt.Errorf("memstore: take %q: %w", key, err)
	}
	var d sluice.Decision
	return d, s.decide(&p, c, key, cost, &d)
}

// decide is Take once the policy is compiled as c (c.decides(*p)); it
// sets *d.
func (s *Store) decide(p *sluice.Policy, c *compiled, key string, cost int64, d *sluice.Decision) error {
	o := s.take(c, key, cost, c.arg(p), d)
	if o == stale {
		// c's policy was dropped for having no keys: pinned, the current
		// one cannot be (registry.go).
		var err error
		if c, err = s.reg.compile(*p, true); err != nil {
			return fmt.Errorf("memstore: take %q: %w", key, err)
		}
		o = s.take(c, key, cost, c.arg(p), d)
		s.unpin(c)
	}
	if o != took {
		*d = sluice.Decision{}
		return fmt.Errorf("memstore: take %q: %w", key, errFull)
	}
	return nil
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

// take is Take once the policy is compiled, for a request of the policy
// that c decides with Burst or Limit arg (compiled.arg): it sets *d unless
// the outcome is stale.
func (s *Store) take(c *compiled, key string, cost, arg int64, d *sluice.Decision) outcome {
	h := maphash.String(s.seed, key)
	sh := s.shardOf(h)
	now := s.now()
	if he := sh.hot.Load(); he != nil && he.h == h && he.c == c && he.key == key && he.reject(now, cost, arg, d) {
		return took // a hot key's rejection, decided without the lock (hot.go)
	}
	k := headOf(key)
	sh.mu.Lock()
	ok := sh.take(c, s.seed, h, &k, key, cost, arg, now, d)
	sh.mu.Unlock()
	return ok
}

// errFull is the error of a key that its table cannot hold (2²⁴ keys of
// one policy in one shard, or 2 GiB of their bytes).
var errFull = fmt.Errorf("too many keys of one policy in one shard of the store: %w", sluice.ErrStoreFull)

// Len returns the number of keys the store holds now, over all policies.
// Expired keys that have not been dropped yet count.
func (s *Store) Len() int {
	var n int64
	for i := range s.shards {
		n += s.shards[i].keys.Load()
	}
	return int(n)
}

// Stats are counts of a store's keys. Every dropped key is counted once, in
// Expired, Evicted or ForcedEvictions.
type Stats struct {
	// Keys is the number of keys held now (Len).
	Keys int
	// Policies is the number of policies held now (see WithMaxPolicies),
	// including those whose keys are all gone until they are dropped.
	Policies int
	// Expired counts the keys dropped because their state had become
	// equivalent to none: when touched, by the sweeper, by Sweep, or to
	// make room for a new policy (WithMaxPolicies).
	Expired uint64
	// Evicted counts the expired keys dropped to make room under WithMaxKeys.
	Evicted uint64
	// ForcedEvictions counts the keys dropped to make room under WithMaxKeys
	// while their state still limited them: those keys were forgiven.
	ForcedEvictions uint64
}

// Stats returns the store's counts.
func (s *Store) Stats() Stats {
	st := Stats{Policies: s.reg.len()}
	for i := range s.shards {
		sh := &s.shards[i]
		st.Keys += int(sh.keys.Load())
		st.Expired += sh.expired.Load()
		st.Evicted += sh.evicted.Load()
		st.ForcedEvictions += sh.forced.Load()
	}
	return st
}

// Close stops the sweeper. Every method that returns an error fails with
// ErrClosed (sluice.ErrStoreClosed) afterwards; Len, Stats, Semaphores and
// Sweep still answer. Close is idempotent and always returns nil.
func (s *Store) Close() error {
	s.once.Do(func() {
		s.closed.Store(true)
		if s.sweep != nil {
			s.sweep.halt()
		}
	})
	return nil
}
