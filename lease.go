// SPDX-License-Identifier: Apache-2.0

package sluice

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// Giver is implemented by stores that can take back capacity a lease took
// but did not spend. Leases work over any Store; over one without Giver the
// unspent units of a lease are not returned, they only expire. Both memstore
// and redisstore implement it.
type Giver interface {
	// TakeStamped is Store.Take that also returns the key's state right
	// after the take: the stamp Give needs.
	TakeStamped(ctx context.Context, p Policy, key string, cost int64) (Decision, State, error)
	// Give returns units of a take whose stamp is given, when that is
	// provably safe (see Model.Give), and reports whether it did. Giving
	// nothing back is not an error.
	Give(ctx context.Context, p Policy, key string, stamp State, units int64) (bool, error)
}

// Give returns the state of a key after units of an earlier admitted take
// are given back, and whether anything changed; stamp is the state that take
// left. Stores call it under the same atomicity as Take.
//
// Giving back is safe only where it is equivalent to the take having been
// smaller. For token-bucket and gcra that holds only while nothing else
// changed the key since (s is exactly stamp): the TAT moves back by
// units·T. For fixed-window it holds while the window is the same one and
// holds at least units: the count goes down by units. Anything else gives
// nothing back.
func (m *Model) Give(s, stamp State, units int64) (State, bool) {
	if units <= 0 {
		return s, false
	}
	switch {
	case m.kind == bucketKind && !m.leaky:
		if s.Time != stamp.Time || s.Frac != stamp.Frac || units > m.burst {
			return s, false
		}
		tat := rtime{s.Time, s.Frac}
		back := m.dur(units)
		if tat.less(back) {
			return State{}, true
		}
		tat = m.sub(tat, back)
		s.Time, s.Frac = tat.ns, tat.frac
		return s, true
	case m.kind == fixedKind:
		if s.Time != stamp.Time || s.Count < units {
			return s, false
		}
		s.Count -= units
		return s, true
	}
	return s, false
}

// LeaseSupported reports whether leases (WithLease) keep the exact limit
// for algorithm a: token-bucket, gcra and fixed-window. The others are
// refused: a sliding log or sliding window timestamps units when they are
// taken, so units spent later fall outside what the store counts, and a
// leaky bucket's delays make it a shaper that a local budget cannot keep.
func LeaseSupported(a Algorithm) bool {
	return a == TokenBucket || a == GCRA || a == FixedWindow
}

// DefaultLeaseTarget is the lease duration WithLease(0) sizes blocks for.
const DefaultLeaseTarget = 100 * time.Millisecond

// WithLease makes the Limiter decide from local budgets (leases): a block of
// capacity taken from the store in one round trip and spent in process,
// sized so that at this process's observed rate it lasts about target (0
// means DefaultLeaseTarget). See the package documentation, "Leases", for
// the contract. NewLimiter refuses it for the algorithms LeaseSupported
// rejects.
func WithLease(target time.Duration) Option {
	return func(l *Limiter) {
		if target <= 0 {
			target = DefaultLeaseTarget
		}
		l.leaseTarget = target
	}
}

// WithClock sets the clock a Limiter measures leases with (default:
// MonotonicClock()). It must advance at the rate of the store's clock.
func WithClock(c Clock) Option { return func(l *Limiter) { l.clock = c } }

// LeaseStats counts a leasing Limiter's units since it was made.
type LeaseStats struct {
	// Taken is the units taken from the store by leases (those spent at
	// once by the request that took the lease included).
	Taken uint64
	// Spent is the units of leases admitted to requests.
	Spent uint64
	// Returned is the units given back to the store.
	Returned uint64
	// StoreCalls is the store round trips made for leased decisions.
	StoreCalls uint64
	// Local is the decisions made without a store round trip.
	Local uint64
}

// leaseTable holds the leases of one Limiter, per key, in shards.
type leaseTable struct {
	model  *Model
	target time.Duration
	clock  Clock
	seed   maphash.Seed
	shards [16]leaseShard
	stats  struct{ taken, spent, returned, calls, local atomic.Uint64 }
}

type leaseShard struct {
	mu    sync.Mutex
	m     map[string]*lease
	sweep int // sweep when len(m) reaches this
}

// lease is one key's local budget. Times are local nanoseconds.
type lease struct {
	mu sync.Mutex
	// The live block: size, units not yet spent, when it was asked for,
	// and the store's ResetAfter after the take.
	size, left int64
	start      int64
	reset      int64
	stamp      State
	stamped    bool
	dead       bool // spent, expired or returned: no more units
	removed    bool // swept from the table
	// A refusal by the store with no whole unit left, reused until the
	// store may have one: refusal is the store's decision for a cost of
	// refusedCost; retryAt is the local instant its RetryAfter counts from
	// (the reply), refusedUntil the end of the reuse.
	refusedCost, refusedUntil, retryAt int64
	refusal                            Decision
	// Demand: units spent since since (when sized); want is the last
	// block size.
	used  int64
	since int64
	want  int64
	sized bool
	// room is the store's Remaining before the last take: capacity left.
	room int64
	// storeLeft is the store's Remaining after the live block's take: a
	// decision from the block reports it plus the block's unspent units.
	storeLeft int64
}

func newLeaseTable(m *Model, target time.Duration, clock Clock) *leaseTable {
	lt := &leaseTable{model: m, target: target, clock: clock, seed: maphash.MakeSeed()}
	for i := range lt.shards {
		lt.shards[i].m = make(map[string]*lease)
		lt.shards[i].sweep = 64
	}
	return lt
}

func (lt *leaseTable) now() int64 {
	if c, ok := lt.clock.(NanoClock); ok {
		return c.UnixNano()
	}
	return lt.clock.Now().UnixNano()
}

// get returns key's lease, making it if needed. Now and then it drops the
// leases that hold nothing, so that the table stays as small as the set of
// keys with live budgets.
func (lt *leaseTable) get(key string, now int64) *lease {
	sh := &lt.shards[maphash.String(lt.seed, key)%uint64(len(lt.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.m[key]; e != nil {
		return e
	}
	if len(sh.m) >= sh.sweep {
		for k, e := range sh.m {
			if e.mu.TryLock() {
				if e.idle(lt, now) {
					delete(sh.m, k)
					e.removed = true
				}
				e.mu.Unlock()
			}
		}
		sh.sweep = max(64, 2*len(sh.m))
	}
	e := &lease{dead: true}
	sh.m[key] = e
	return e
}

// idle reports whether e holds nothing worth keeping.
func (e *lease) idle(lt *leaseTable, now int64) bool {
	return (e.dead || !e.usable(lt, now, 1)) && now >= e.refusedUntil
}

// usable reports whether cost units of the live block may be spent at now.
// A unit of a token-bucket/gcra block taken at t0 with u units unspent is
// valid until t0 + debt − u·T, debt being the TAT's distance from the
// store's now after the take (ResetAfter, less the 1 ns it may be rounded
// up by): the instant the bucket would have refilled past it. A
// fixed-window block is valid until its window ends.
func (e *lease) usable(lt *leaseTable, now, cost int64) bool {
	if e.dead || e.left < cost || now < e.start {
		return false
	}
	elapsed := now - e.start
	if lt.model.kind == fixedKind {
		return elapsed <= e.reset-1
	}
	return elapsed+lt.model.dur(e.left).ceil() <= e.reset-1
}

// allow decides a request of cost n (1 ≤ n ≤ burst) for key.
func (lt *leaseTable) allow(ctx context.Context, l *Limiter, key string, n int64) (Decision, error) {
	now := lt.now()
	e := lt.get(key, now)
	e.mu.Lock()
	for e.removed {
		// Swept from the table between get and Lock: use the key's
		// current entry, so that no block lives outside the table.
		e.mu.Unlock()
		e = lt.get(key, now)
		e.mu.Lock()
	}
	defer e.mu.Unlock()
	now = lt.now() // after waiting for the lock: the block may be newer than the first reading
	if e.usable(lt, now, n) {
		e.left -= n
		e.used += n
		lt.stats.spent.Add(uint64(n))
		lt.stats.local.Add(1)
		if e.left == 0 {
			e.dead = true
		}
		return Decision{Allowed: true, Limit: l.policy.Limit, Remaining: e.storeLeft + e.left, ResetAfter: time.Duration(max(0, e.reset-(now-e.start)))}, nil
	}
	if now < e.refusedUntil {
		// The store had no whole unit left, and gets none before
		// refusedUntil: no request can take any meanwhile.
		lt.stats.local.Add(1)
		d := e.refusal
		d.RetryAfter = time.Duration(e.retryAt + int64(lt.retry(e.refusal.RetryAfter, e.refusedCost, n)) - now)
		d.ResetAfter = max(0, d.ResetAfter-time.Duration(now-e.start))
		return d, nil
	}
	if e.left < n && e.usable(lt, now, e.left) {
		// The block is still good, for smaller requests than this one:
		// keep it, and take this one from the store directly.
		lt.stats.calls.Add(1)
		return l.store.Take(ctx, l.policy, key, n)
	}
	// The block is spent or has lapsed: give back what is left, then take
	// a new one.
	if !e.dead {
		e.dead = true
		if e.left > 0 {
			// The block lapsed before it was spent: this key's demand here
			// is below the block size (or the refill rate); the next block
			// grows from what this one used.
			e.want = max(1, (e.size-e.left)/2)
			lt.give(ctx, l, key, e)
		}
	}
	k := lt.size(e, now, n)
	g, stamped := l.store.(Giver)
	var (
		d          Decision
		stamp      State
		err        error
		start, end int64
	)
	for try := 0; ; try++ {
		start = lt.now()
		lt.stats.calls.Add(1)
		if stamped {
			d, stamp, err = g.TakeStamped(ctx, l.policy, key, k)
		} else {
			d, err = l.store.Take(ctx, l.policy, key, k)
		}
		if err != nil {
			return d, err
		}
		end = lt.now()
		if d.Allowed || k == n {
			break
		}
		if d.Remaining >= n {
			// Too little is left for the block, enough for the request:
			// take what is left (k shrinks at every try; the third is
			// the request alone).
			k = max(n, min(k-1, d.Remaining))
			if try >= 1 {
				k = n
			}
			e.want = k
			continue
		}
		if !d.Impossible && d.RetryAfter > 0 && lt.model.kind != fixedKind {
			// The request itself would have been refused: its wait is
			// the block's less the k−n units' time, rounded down so that
			// it is never early.
			d.RetryAfter -= time.Duration(lt.model.dur(k - n).ns)
		}
		break
	}
	if !d.Allowed {
		e.room = d.Remaining
		if !d.Impossible && d.Remaining == 0 && d.RetryAfter > 0 {
			// Cache the refusal until the store may have a unit again (a
			// lower bound of that instant, measured from the call's start);
			// Retry-Afters are measured from its end, upper bounds.
			first := int64(d.RetryAfter)
			if lt.model.kind != fixedKind {
				first -= lt.model.dur(n - 1).ceil()
			}
			if first > 0 {
				e.refusedCost, e.refusedUntil, e.retryAt = n, start+first, end
				e.refusal = d
				e.start = start
			}
		}
		return d, nil
	}
	lt.stats.taken.Add(uint64(k))
	lt.stats.spent.Add(uint64(n))
	e.refusedUntil = 0
	e.room = d.Remaining + k
	e.storeLeft = d.Remaining
	e.size, e.left, e.start, e.reset = k, k-n, start, int64(d.ResetAfter)
	e.stamp, e.stamped = stamp, stamped
	e.used += n
	e.dead = e.left == 0
	d.Remaining += e.left
	return d, nil
}

// retry converts the store's Retry-After r for a request of cost c into
// one for cost n, never early: the time the |n−c|-unit difference drains is
// added rounded up, or subtracted rounded down. A fixed window's waits are
// all until the window ends.
func (lt *leaseTable) retry(r time.Duration, c, n int64) time.Duration {
	switch {
	case lt.model.kind == fixedKind:
		return r
	case n >= c:
		return r + time.Duration(lt.model.dur(n-c).ceil())
	}
	return r - time.Duration(lt.model.dur(c-n).ns)
}

// size returns the next block's size for a request of cost n at now: the
// units this key used since the last block was taken, as a rate, times the
// target lease duration; at most twice the last block, at most half of the
// capacity the store had left at the last take (so blocks shrink to single
// requests when the shared capacity runs low), at most the burst, at least
// n. The first block is one unit.
func (lt *leaseTable) size(e *lease, now, n int64) int64 {
	k := int64(1)
	if e.sized && now > e.since {
		rate := float64(e.used) / float64(now-e.since) // units per ns
		k = int64(min(rate*float64(lt.target), float64(lt.model.burst)))
		k = min(k, 2*e.want)
		if e.room < 2*k {
			k = e.room / 2
		}
	}
	k = max(min(k, lt.model.burst), n, 1)
	e.want, e.used, e.since, e.sized = k, 0, now, true
	return k
}

// give returns e's unspent units to the store, if it can take them back.
// A failure only means they stay taken until they expire.
func (lt *leaseTable) give(ctx context.Context, l *Limiter, key string, e *lease) {
	g, ok := l.store.(Giver)
	if !ok || !e.stamped {
		return
	}
	lt.stats.calls.Add(1)
	if done, err := g.Give(ctx, l.policy, key, e.stamp, e.left); err == nil && done {
		lt.stats.returned.Add(uint64(e.left))
	}
	e.left = 0
}

// LeaseStats returns the limiter's lease counters (zero without WithLease).
func (l *Limiter) LeaseStats() LeaseStats {
	lt := l.leases
	if lt == nil {
		return LeaseStats{}
	}
	return LeaseStats{
		Taken: lt.stats.taken.Load(), Spent: lt.stats.spent.Load(), Returned: lt.stats.returned.Load(),
		StoreCalls: lt.stats.calls.Load(), Local: lt.stats.local.Load(),
	}
}

// checkLease validates the lease option against the policy.
func (l *Limiter) checkLease() error {
	if l.leaseTarget == 0 {
		return nil
	}
	if !LeaseSupported(l.policy.Algorithm) {
		return fmt.Errorf("sluice: policy %q: lease: not supported for algorithm %s (only token-bucket, gcra and fixed-window keep the exact limit with leases)", l.policy.Name, l.policy.Algorithm)
	}
	m, err := NewModel(l.policy)
	if err != nil {
		return err
	}
	if l.clock == nil {
		l.clock = MonotonicClock()
	}
	l.leases = newLeaseTable(m, l.leaseTarget, l.clock)
	return nil
}

// ReleaseLeases gives back to the store what the limiter's live blocks
// hold unspent (where the store can take it back: Giver), and ends them.
// Call it when the limiter is retired (a process shutting down, a
// configuration replaced), so that other processes can use those units
// at once rather than after the blocks lapse. The limiter stays usable.
func (l *Limiter) ReleaseLeases(ctx context.Context) error {
	lt := l.leases
	if lt == nil {
		return nil
	}
	for i := range lt.shards {
		sh := &lt.shards[i]
		sh.mu.Lock()
		keys := make([]string, 0, len(sh.m))
		entries := make([]*lease, 0, len(sh.m))
		for k, e := range sh.m {
			keys, entries = append(keys, k), append(entries, e)
		}
		sh.mu.Unlock()
		for j, e := range entries {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("sluice: policy %q: releasing leases: %w", l.policy.Name, err)
			}
			e.mu.Lock()
			if !e.dead {
				e.dead = true
				if e.left > 0 {
					lt.give(ctx, l, keys[j], e)
				}
			}
			e.mu.Unlock()
		}
	}
	return nil
}
