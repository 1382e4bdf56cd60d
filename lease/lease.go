// SPDX-License-Identifier: Apache-2.0

package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/internal/nostore"
	"github.com/sluicehq/sluice/model"
)

// Giver is what a store needs to take back capacity a lease took but did
// not spend. Leases work over any Store; over one that is no Giver the
// unspent units of a lease are not returned, they only expire. memstore and
// redisstore implement it; the wrappers lease.Store and shard.Store forward
// it.
type Giver interface {
	// TakeStamped is Store.Take that also returns the key's state right
	// after the take: the stamp Give needs.
	TakeStamped(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, model.State, error)
	// Give returns units of a take whose stamp is given, when that is
	// provably safe (see model.Model.Give), and reports whether it did.
	// Giving nothing back is not an error.
	Give(ctx context.Context, p sluice.Policy, key string, stamp model.State, units int64) (bool, error)
}

// Supported reports whether leases keep the exact limit for algorithm a:
// token-bucket, gcra and fixed-window. A Store passes the other algorithms
// straight to the store it wraps: a sliding log or sliding window
// timestamps units when they are taken, so units spent later fall outside
// what the store counts, and a leaky bucket's delays make it a shaper that
// a local budget cannot keep.
func Supported(a sluice.Algorithm) bool {
	return a == sluice.TokenBucket || a == sluice.GCRA || a == sluice.FixedWindow
}

// DefaultTarget is the lease duration blocks are sized for unless
// WithTarget says otherwise.
const DefaultTarget = 100 * time.Millisecond

// Option configures a Store.
type Option func(*Store)

// WithTarget sizes blocks so that at this process's observed rate each
// lasts about d (DefaultTarget when d ≤ 0).
func WithTarget(d time.Duration) Option {
	return func(s *Store) {
		if d <= 0 {
			d = DefaultTarget
		}
		s.target = d
	}
}

// WithClock sets the clock leases are measured with (default:
// clock.Monotonic()). It must advance at the rate of the store's
// clock.
func WithClock(c clock.Clock) Option { return func(s *Store) { s.clock = c } }

// WithPolicies leases only the policies for which use returns true (and
// Supported); the others go straight to the wrapped store. By default every
// supported policy is leased.
func WithPolicies(use func(sluice.Policy) bool) Option { return func(s *Store) { s.use = use } }

// Store is a sluice.Store that decides from local budgets (leases) taken
// from the store it wraps: see the package documentation for the contract.
// It is safe for concurrent use. The zero Store wraps no store: every
// method that returns an error fails with one wrapping
// sluice.ErrStoreClosed, Stats is zero and Close does nothing; make one
// with New.
type Store struct {
	next    sluice.Store
	giver   Giver // next as a Giver, or nil
	target  time.Duration
	clock   clock.Clock
	use     func(sluice.Policy) bool
	tables  sync.Map      // sluice.Policy → *table
	count   atomic.Int64  // tables held, about
	seq     atomic.Uint64 // the last table's seq
	pruning atomic.Bool
	closed  atomic.Bool
}

// maxTables bounds the policies a Store keeps lease tables for, so that a
// flood of distinct policies (one per tenant, built per request) does not
// grow it for ever. Past it, a new policy's table first drops the tables
// that hold nothing worth keeping (no live block, no refusal being
// reused); when that frees less than an eighth of them, every
// other table goes. A table dropped with live blocks leaves their unspent
// units to lapse (the package doc's H counts them: refusals may come
// early by them, admissions never exceed the limit); a Limiter bound to a
// dropped table keeps using it.
const maxTables = 4096

var (
	_ sluice.Store       = (*Store)(nil)
	_ sluice.Binder      = (*Store)(nil)
	_ sluice.Refunder    = (*Store)(nil)
	_ Giver              = (*Store)(nil)
	_ keyer              = (*Store)(nil)
	_ inflight.Semaphore = (*Store)(nil)
)

// errZero is every error of the zero Store: like a missing store, never a
// reason to admit.
var errZero = fmt.Errorf("lease: the zero Store wraps no store (make one with New): %w", sluice.ErrStoreClosed)

// New returns a Store that leases capacity from store. Over a nil store
// every call fails with an error wrapping sluice.ErrStoreClosed.
func New(store sluice.Store, opts ...Option) *Store {
	if store == nil {
		store = nostore.New("lease")
	}
	s := &Store{next: store, target: DefaultTarget}
	s.giver, _ = store.(Giver)
	for _, o := range opts {
		if o == nil {
			continue // a nil option is no option
		}
		o(s)
	}
	if s.clock == nil {
		s.clock = clock.Monotonic()
	}
	return s
}

// table returns p's lease table, or nil when p is not leased.
func (s *Store) table(p sluice.Policy) *table {
	if !Supported(p.Algorithm) || (s.use != nil && !s.use(p)) {
		return nil
	}
	if v, ok := s.tables.Load(p); ok {
		return v.(*table)
	}
	m, err := model.New(p)
	if err != nil {
		return nil // the store answers for an invalid policy
	}
	v, loaded := s.tables.LoadOrStore(p, newTable(s, p, m))
	if !loaded && s.count.Add(1) > maxTables {
		s.prune(p)
	}
	return v.(*table)
}

// prune makes room for new tables (maxTables), keeping keep's. One prune
// runs at a time (a table created meanwhile waits for the next), and only
// a delete that removed a table counts it.
func (s *Store) prune(keep sluice.Policy) {
	if !s.pruning.CompareAndSwap(false, true) {
		return
	}
	defer s.pruning.Store(false)
	now := s.clock.Now().UnixNano()
	freed := int64(0)
	drop := func(k any) {
		if _, ok := s.tables.LoadAndDelete(k); ok {
			freed++
		}
	}
	s.tables.Range(func(k, v any) bool {
		if k.(sluice.Policy) != keep && v.(*table).idle(now) {
			drop(k)
		}
		return true
	})
	if freed < maxTables/8 {
		s.tables.Range(func(k, _ any) bool {
			if k.(sluice.Policy) != keep {
				drop(k)
			}
			return true
		})
	}
	s.count.Add(-freed)
}

// Take decides a request from p's leases for key, taking a new block from
// the wrapped store when they are spent. Peeks, costs above the capacity
// and policies that are not leased go to the wrapped store.
//
// Errors: the wrapped store's, and the caller's context error when ctx
// ends while the request waits for another request of the same key.
func (s *Store) Take(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, error) {
	if s.next == nil {
		return sluice.Decision{}, errZero
	}
	t := s.table(p)
	if t == nil {
		return s.next.Take(ctx, p, key, cost)
	}
	return t.Take(ctx, key, cost)
}

// TakeAll is the wrapped store's TakeAll: an all-or-nothing batch is
// decided by the store itself, outside the leases (which only ever hold
// capacity the store already counts as taken). A charge
// (sluice.Request.Force of a cost above 0: Limiter.Charge, a Reservation
// committed above its estimate) first ends this Store's block of the key
// under that policy, giving its unspent units back (Giver) and dropping a
// refusal being reused, and holds the key's lease until the store answers;
// so the key's debt is in the store for every process at once, and this
// process's next request of the key asks the store (see the package
// documentation for what holds of other processes' blocks).
//
// Errors: the wrapped store's, and the caller's context error when ctx
// ends while a charge waits for another request of its key.
func (s *Store) TakeAll(ctx context.Context, reqs []sluice.Request, out []sluice.Decision) error {
	if s.next == nil {
		return errZero
	}
	held, err := s.endCharged(ctx, reqs)
	if err != nil {
		return err
	}
	defer unlockAll(held)
	return s.next.TakeAll(ctx, reqs, out)
}

// Reset forgets key's lease under p (its unspent units are not given back:
// the store's state is dropped anyway) and resets the wrapped store.
func (s *Store) Reset(ctx context.Context, p sluice.Policy, key string) error {
	if s.next == nil {
		return errZero
	}
	if v, ok := s.tables.Load(p); ok {
		v.(*table).forget(key)
	}
	return s.next.Reset(ctx, p, key)
}

// Close gives back what the leases hold unspent (for at most a second) and
// closes the wrapped store. From its start no lease admits: every Take
// answers an error wrapping sluice.ErrStoreClosed, also for a block not yet
// given back.
func (s *Store) Close() error {
	if s.next == nil {
		return nil // the zero Store holds nothing
	}
	s.closed.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.ReleaseAll(ctx)
	return errors.Join(err, s.next.Close())
}

// Bind returns p's lease table as a bound policy, so that a Limiter finds
// it once; a policy that is not leased is bound by the wrapped store, or
// not at all.
func (s *Store) Bind(p sluice.Policy) (sluice.BoundPolicy, error) {
	if s.next == nil {
		return nil, errZero
	}
	if t := s.table(p); t != nil {
		return t, nil
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

// Stats counts the units of a policy's leases since the Store was made.
type Stats struct {
	// Taken is the units taken from the store by leases (those spent at
	// once by the request that took the lease included).
	Taken uint64
	// Spent is the units of leases admitted to requests, less those a
	// refund put back into their block (see TakeRefundable).
	Spent uint64
	// Returned is the units given back to the store.
	Returned uint64
	// StoreCalls is the store round trips made for leased decisions.
	StoreCalls uint64
	// Local is the decisions made without a store round trip.
	Local uint64
}

// Stats returns the counters of p's leases (zero when p is not leased or
// not used yet).
func (s *Store) Stats(p sluice.Policy) Stats {
	v, ok := s.tables.Load(p)
	if !ok {
		return Stats{}
	}
	t := v.(*table)
	return Stats{
		Taken: t.stats.taken.Load(), Spent: t.stats.spent.Load(), Returned: t.stats.returned.Load(),
		StoreCalls: t.stats.calls.Load(), Local: t.stats.local.Load(),
	}
}

// ReleasePolicy gives back to the store what p's live blocks hold unspent
// (where the store can take it back: Giver), and ends them. Call it when a
// policy is retired (a configuration replaced), so that other processes
// can use those units at once rather than after the blocks lapse. The
// Store stays usable.
func (s *Store) ReleasePolicy(ctx context.Context, p sluice.Policy) error {
	if s.next == nil {
		return errZero
	}
	v, ok := s.tables.Load(p)
	if !ok {
		return nil
	}
	return v.(*table).release(ctx)
}

// ReleaseAll is ReleasePolicy of every policy: call it when the process
// stops.
func (s *Store) ReleaseAll(ctx context.Context) error {
	if s.next == nil {
		return errZero
	}
	var err error
	s.tables.Range(func(_, v any) bool {
		err = v.(*table).release(ctx)
		return err == nil
	})
	return err
}
