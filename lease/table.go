// SPDX-License-Identifier: Apache-2.0

package lease

import (
	"cmp"
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
)

// table holds the leases of one policy, per key, in shards. It is the
// policy's sluice.BoundPolicy.
type table struct {
	s      *Store
	seq    uint64 // the order in which TakeAll locks keys of several tables
	p      sluice.Policy
	model  *model.Model
	fixed  bool  // fixed-window: a block lasts until its window ends
	burst  int64 // p.Capacity()
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
	// mu is the key's lock, held across a store round trip: a channel, so
	// that a request waiting for it returns when its context ends.
	mu chan struct{}
	// The live block: size, units not yet spent, when it was asked for,
	// and the store's ResetAfter after the take.
	size, left int64
	start      int64
	reset      int64
	stamp      model.State
	stamped    bool
	dead       bool // spent, expired or returned: no more units
	removed    bool // swept from the table
	// ver changes whenever the block does: taken, spent from, ended, or
	// given back to (a Refund stamp names the version its take left).
	ver uint64
	// A refusal by the store with no whole unit left, reused until the
	// store may have one: refusal is the store's decision for a cost of
	// refusedCost; retryAt is the local instant its RetryAfter counts from
	// (the reply), refusedUntil the end of the reuse.
	refusedCost, refusedUntil, retryAt int64
	refusal                            sluice.Decision
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

func newTable(s *Store, p sluice.Policy, m *model.Model) *table {
	lt := &table{s: s, seq: s.seq.Add(1), p: p, model: m, fixed: p.Algorithm == sluice.FixedWindow, burst: p.Capacity(), seed: maphash.MakeSeed()}
	for i := range lt.shards {
		lt.shards[i].m = make(map[string]*lease)
		lt.shards[i].sweep = 64
	}
	return lt
}

// idle reports whether the table holds nothing worth keeping at now: no
// live block, no refusal being reused, no request holding a key.
func (lt *table) idle(now int64) bool {
	for i := range lt.shards {
		sh := &lt.shards[i]
		sh.mu.Lock()
		for _, e := range sh.m {
			if !e.tryLock() {
				sh.mu.Unlock()
				return false
			}
			idle := e.idle(lt, now)
			e.unlock()
			if !idle {
				sh.mu.Unlock()
				return false
			}
		}
		sh.mu.Unlock()
	}
	return true
}

func (lt *table) now() int64 {
	return lt.s.clock.Now().UnixNano()
}

// newLease returns an unlocked lease holding nothing.
func newLease() *lease {
	return &lease{mu: make(chan struct{}, 1), dead: true}
}

func (e *lease) lock(ctx context.Context) error {
	select {
	case e.mu <- struct{}{}:
		return nil
	default:
	}
	select {
	case e.mu <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *lease) tryLock() bool {
	select {
	case e.mu <- struct{}{}:
		return true
	default:
		return false
	}
}

func (e *lease) unlock() { <-e.mu }

// get returns key's lease, making it if needed. Now and then it drops the
// leases that hold nothing, so that the table stays as small as the set of
// keys with live budgets.
func (lt *table) get(key string, now int64) *lease {
	sh := &lt.shards[maphash.String(lt.seed, key)%uint64(len(lt.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.m[key]; e != nil {
		return e
	}
	if len(sh.m) >= sh.sweep {
		for k, e := range sh.m {
			if e.tryLock() {
				if e.idle(lt, now) {
					delete(sh.m, k)
					e.removed = true
				}
				e.unlock()
			}
		}
		sh.sweep = max(64, 2*len(sh.m))
	}
	e := newLease()
	sh.m[key] = e
	return e
}

// idle reports whether e holds nothing worth keeping.
func (e *lease) idle(lt *table, now int64) bool {
	return (e.dead || !e.usable(lt, now, 1)) && now >= e.refusedUntil
}

// usable reports whether cost units of the live block may be spent at now.
// A unit of a token-bucket/gcra block taken at t0 with u units unspent is
// valid until t0 + debt − u·T, debt being the TAT's distance from the
// store's now after the take (ResetAfter, less the 1 ns it may be rounded
// up by): the instant the bucket would have refilled past it. A
// fixed-window block is valid until its window ends.
func (e *lease) usable(lt *table, now, cost int64) bool {
	if e.dead || e.left < cost || now < e.start {
		return false
	}
	elapsed := now - e.start
	if lt.fixed {
		return elapsed <= e.reset-1
	}
	_, drain := lt.model.Drain(e.left)
	return elapsed+drain <= e.reset-1
}

// Take is Store.Take for the table's policy.
func (lt *table) Take(ctx context.Context, key string, n int64) (sluice.Decision, error) {
	if lt.s.closed.Load() {
		return sluice.Decision{}, fmt.Errorf("lease: take %q: %w", key, sluice.ErrStoreClosed)
	}
	if n == 0 {
		return lt.peek(ctx, key)
	}
	if n < 0 || n > lt.burst {
		// A negative or an impossible cost: the store answers.
		return lt.s.next.Take(ctx, lt.p, key, n)
	}
	return lt.allow(ctx, key, n, nil)
}

// peek answers as a request of cost 1 would be, and changes nothing: from
// key's live block when a unit of it may be spent now, with the refusal
// being reused while it is, else the store's peek. (A block that has
// lapsed goes back to the store only when a request comes: until then the
// store's peek does not count its units.)
func (lt *table) peek(ctx context.Context, key string) (sluice.Decision, error) {
	sh := &lt.shards[maphash.String(lt.seed, key)%uint64(len(lt.shards))]
	sh.mu.Lock()
	e := sh.m[key]
	sh.mu.Unlock()
	if e != nil {
		if err := e.lock(ctx); err != nil {
			return sluice.Decision{Limit: lt.p.Limit}, fmt.Errorf("lease: policy %q: key %q: waiting for the key's lease: %w", lt.p.Name, key, err)
		}
		d, ok := lt.local(e, lt.now(), 1)
		e.unlock()
		if ok {
			return d, nil
		}
	}
	return lt.s.next.Take(ctx, lt.p, key, 0)
}

// local is the decision for a request of cost n that e answers without the
// store at now, if it does: admitted from the live block (not spent here),
// or the store's refusal being reused. e is locked.
func (lt *table) local(e *lease, now, n int64) (sluice.Decision, bool) {
	if !e.removed && e.usable(lt, now, n) {
		return sluice.Decision{Allowed: true, Limit: lt.p.Limit, Remaining: e.storeLeft + e.left - n, ResetAfter: time.Duration(max(0, e.reset-(now-e.start)))}, true
	}
	if !e.removed && now < e.refusedUntil {
		// The store had no whole unit left, and gets none before
		// refusedUntil: no request can take any meanwhile.
		d := e.refusal
		d.RetryAfter = time.Duration(e.retryAt + int64(lt.retry(e.refusal.RetryAfter, e.refusedCost, n)) - now)
		d.ResetAfter = max(0, d.ResetAfter-time.Duration(now-e.start))
		return d, true
	}
	return sluice.Decision{}, false
}

// Store returns the Store the table belongs to (see sluice.BoundPolicy).
func (lt *table) Store() sluice.Store { return lt.s }

// forget drops key's lease.
func (lt *table) forget(key string) {
	sh := &lt.shards[maphash.String(lt.seed, key)%uint64(len(lt.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.m[key]; e != nil {
		delete(sh.m, key)
		if e.tryLock() {
			e.removed = true
			e.unlock()
		}
	}
}

// allow decides a request of cost n (1 ≤ n ≤ burst) for key. A request
// that waits for another request of the same key (holding its lease across
// a store round trip) returns ctx's error when ctx ends meanwhile. When st
// is not nil and the request is admitted from a block, *st is set to the
// block's stamp for Refund.
func (lt *table) allow(ctx context.Context, key string, n int64, st *stamp) (sluice.Decision, error) {
	if err := ctx.Err(); err != nil {
		// The caller has gone: never admitted, even from a local block.
		return sluice.Decision{Limit: lt.p.Limit}, fmt.Errorf("lease: policy %q: key %q: %w", lt.p.Name, key, err)
	}
	now := lt.now()
	e := lt.get(key, now)
	if err := e.lock(ctx); err != nil {
		return sluice.Decision{Limit: lt.p.Limit}, fmt.Errorf("lease: policy %q: key %q: waiting for the key's lease: %w", lt.p.Name, key, err)
	}
	for e.removed {
		// Swept from the table between get and lock: use the key's
		// current entry, so that no block lives outside the table.
		e.unlock()
		e = lt.get(key, now)
		if err := e.lock(ctx); err != nil {
			return sluice.Decision{Limit: lt.p.Limit}, fmt.Errorf("lease: policy %q: key %q: waiting for the key's lease: %w", lt.p.Name, key, err)
		}
	}
	defer e.unlock()
	now = lt.now() // after waiting for the lock: the block may be newer than the first reading
	if d, ok := lt.local(e, now, n); ok {
		lt.stats.local.Add(1)
		if d.Allowed {
			e.left -= n
			e.used += n
			lt.stats.spent.Add(uint64(n))
			e.dead = e.left == 0
			e.ver++
			if st != nil {
				*st = stamp{lt, e, e.ver, n}
			}
		}
		return d, nil
	}
	if e.left < n && e.usable(lt, now, e.left) {
		// The block is still good, for smaller requests than this one:
		// keep it, and take this one from the store directly.
		lt.stats.calls.Add(1)
		return lt.s.next.Take(ctx, lt.p, key, n)
	}
	// The block is spent or has lapsed: give back what is left, then take
	// a new one.
	if !e.dead && e.left > 0 {
		// The block lapsed before it was spent: this key's demand here
		// is below the block size (or the refill rate); the next block
		// grows from what this one used.
		e.want = max(1, (e.size-e.left)/2)
	}
	lt.end(ctx, key, e)
	k := lt.size(e, now, n)
	g := lt.s.giver
	stamped := g != nil
	var (
		d          sluice.Decision
		state      model.State
		err        error
		start, end int64
	)
	for try := 0; ; try++ {
		start = lt.now()
		lt.stats.calls.Add(1)
		if stamped {
			d, state, err = g.TakeStamped(ctx, lt.p, key, k)
		} else {
			d, err = lt.s.next.Take(ctx, lt.p, key, k)
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
		if !d.Impossible && d.RetryAfter > 0 && !lt.fixed {
			// The request itself would have been refused: its wait is
			// the block's less the k−n units' time, rounded down so that
			// it is never early.
			floor, _ := lt.model.Drain(k - n)
			d.RetryAfter -= time.Duration(floor)
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
			if !lt.fixed {
				_, ceil := lt.model.Drain(n - 1)
				first -= ceil
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
	e.stamp, e.stamped = state, stamped
	e.used += n
	e.dead = e.left == 0
	e.ver++
	if st != nil {
		*st = stamp{lt, e, e.ver, n}
	}
	d.Remaining += e.left
	return d, nil
}

// retry converts the store's Retry-After r for a request of cost c into
// one for cost n, never early: the time the |n−c|-unit difference drains is
// added rounded up, or subtracted rounded down. A fixed window's waits are
// all until the window ends.
func (lt *table) retry(r time.Duration, c, n int64) time.Duration {
	switch {
	case lt.fixed:
		return r
	case n >= c:
		_, ceil := lt.model.Drain(n - c)
		return r + time.Duration(ceil)
	}
	floor, _ := lt.model.Drain(c - n)
	return r - time.Duration(floor)
}

// size returns the next block's size for a request of cost n at now: the
// units this key used since the last block was taken, as a rate, times the
// target lease duration; at most twice the last block, at most half of the
// capacity the store had left at the last take (so blocks shrink to single
// requests when the shared capacity runs low), at most the burst, at least
// n. The first block is one unit.
func (lt *table) size(e *lease, now, n int64) int64 {
	k := int64(1)
	if e.sized && now > e.since {
		rate := float64(e.used) / float64(now-e.since) // units per ns
		k = int64(min(rate*float64(lt.s.target), float64(lt.burst)))
		k = min(k, 2*e.want)
		if e.room < 2*k {
			k = e.room / 2
		}
	}
	k = max(min(k, lt.burst), n, 1)
	e.want, e.used, e.since, e.sized = k, 0, now, true
	return k
}

// end ends e's block, giving its unspent units back to the store where it
// takes them back, and drops a refusal being reused. e is locked. A block
// spent to its last unit is ended too: no Refund revives it after.
func (lt *table) end(ctx context.Context, key string, e *lease) {
	if !e.dead {
		e.dead = true
		if e.left > 0 {
			lt.give(ctx, key, e)
		}
	}
	e.ver++
	e.refusedUntil = 0
}

// give returns e's unspent units to the store, if it can take them back.
// A failure only means they stay taken until they expire.
func (lt *table) give(ctx context.Context, key string, e *lease) {
	g := lt.s.giver
	if g == nil || !e.stamped {
		return
	}
	lt.stats.calls.Add(1)
	if done, err := g.Give(ctx, lt.p, key, e.stamp, e.left); err == nil && done {
		lt.stats.returned.Add(uint64(e.left))
	}
	e.left = 0
}

// release gives back what the table's live blocks hold unspent and ends
// them.
func (lt *table) release(ctx context.Context) error {
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
			if err := e.lock(ctx); err != nil {
				return fmt.Errorf("lease: policy %q: releasing leases: %w", lt.p.Name, err)
			}
			lt.end(ctx, keys[j], e)
			e.unlock()
		}
	}
	return nil
}

// stamp is the Refunder stamp of a take decided from a block: the table
// and the key's lease, the version of its block right after the take, and
// the take's cost.
type stamp struct {
	t    *table
	e    *lease
	ver  uint64
	cost int64
}

// refund puts back into the block up to st.cost units of the take that
// returned st, if nothing has changed the block since (no other spend, no
// end): the block is then exactly as if the take had cost that much less.
func (lt *table) refund(ctx context.Context, key string, st stamp, units int64) (bool, error) {
	e := st.e
	if units <= 0 || e == nil || st.t != lt {
		return false, nil
	}
	if err := e.lock(ctx); err != nil {
		return false, fmt.Errorf("lease: policy %q: key %q: refund: waiting for the key's lease: %w", lt.p.Name, key, err)
	}
	defer e.unlock()
	if e.ver != st.ver || e.removed {
		return false, nil
	}
	units = min(units, st.cost)
	e.left += units
	e.used = max(0, e.used-units)
	e.dead = false
	e.ver++
	lt.stats.spent.Add(^uint64(units - 1)) // spent −= units
	return true, nil
}

// charged is one key whose block a charge ends.
type charged struct {
	t   *table
	key string
	e   *lease
}

// endCharged ends the blocks of the keys that reqs charge (Force, cost
// above 0) and leaves their leases locked, so that no request of those
// keys is decided here until the charge is recorded; the caller unlocks
// them (unlockAll). Keys are locked in one global order (the tables'
// seq, then the key), so that two batches never wait for each other.
func (s *Store) endCharged(ctx context.Context, reqs []sluice.Request) ([]charged, error) {
	var cs []charged
	for _, r := range reqs {
		if !r.Force || r.Cost <= 0 {
			continue
		}
		v, ok := s.tables.Load(r.Policy)
		if !ok {
			continue // never leased here
		}
		cs = append(cs, charged{t: v.(*table), key: r.Key})
	}
	if len(cs) == 0 {
		return nil, nil
	}
	slices.SortFunc(cs, func(a, b charged) int {
		return cmp.Or(cmp.Compare(a.t.seq, b.t.seq), strings.Compare(a.key, b.key))
	})
	cs = slices.CompactFunc(cs, func(a, b charged) bool { return a.t == b.t && a.key == b.key })
	locked := cs[:0]
	for _, c := range cs {
		e, err := c.t.lockKey(ctx, c.key)
		if err != nil {
			unlockAll(locked)
			return nil, fmt.Errorf("lease: policy %q: key %q: charge: waiting for the key's lease: %w", c.t.p.Name, c.key, err)
		}
		if e == nil {
			continue // no lease of the key here
		}
		c.t.end(ctx, c.key, e)
		c.e = e
		locked = append(locked, c)
	}
	return locked, nil
}

// unlockAll unlocks the leases endCharged locked.
func unlockAll(cs []charged) {
	for _, c := range cs {
		c.e.unlock()
	}
}

// lockKey locks key's lease in the table and returns it, or nil when the
// table holds none.
func (lt *table) lockKey(ctx context.Context, key string) (*lease, error) {
	sh := &lt.shards[maphash.String(lt.seed, key)%uint64(len(lt.shards))]
	for {
		sh.mu.Lock()
		e := sh.m[key]
		sh.mu.Unlock()
		if e == nil {
			return nil, nil
		}
		if err := e.lock(ctx); err != nil {
			return nil, err
		}
		if !e.removed {
			return e, nil
		}
		e.unlock() // swept meanwhile: look again
	}
}
