// SPDX-License-Identifier: Apache-2.0

package memstore

import (
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
)

// shard is a lock and the tables of the keys that hash to it, one table per
// policy (indexed by policy id).
type shard struct {
	mu sync.Mutex
	// The hot key (hot.go): hot for readers without the lock (nil when
	// none is live); hotp, under the lock, the live or last one; the
	// candidate's hash and its rejections in a row under the lock; the
	// count needed after a replacement; the hot key's admissions under the
	// lock since it turned hot.
	hot       atomic.Pointer[hotKey]
	hotp      *hotKey
	cand      uint64
	candN     int
	hotBar    int
	hotAdmits int
	// The tables, one per policy with keys in the shard: in no order (a
	// table knows its index, pos), by policy, and the last one looked up.
	tabs     []*table
	byPolicy map[*policyTable]*table
	peakTabs int // most tables since byPolicy was last rebuilt
	last     *table
	n        int // keys held
	quota    int // most keys held; 0: unbounded
	rng      uint64

	// The sweep cursor: table index and entry.
	curTab, curEnt int

	// minExp is a lower bound of the expiry of every key held, valid while
	// the store's policy generation is minGen (a reconfigured policy can
	// move expiries earlier). Writes lower it; full sweeps recompute it.
	minExp int64
	minGen uint64
	gen    *atomic.Uint64
	reg    *registry
	// credit paces full sweeps when making room: one costs n credits, and
	// each call of makeRoom earns evictScan.
	credit int

	// dec is a scratch decision for rowSet.take, which cannot be given
	// one on the caller's stack without allocating it (the models set the
	// whole of it on every take, so nothing of an earlier one shows). The
	// bucket layouts, called directly (takeInPlace), write the caller's.
	dec sluice.Decision

	keys                     atomic.Int64 // n, readable without the lock
	expired, evicted, forced atomic.Uint64

	_ [64]byte // keep shards' locks on separate cache lines
}

// table returns the shard's table of policy pt, or nil.
func (sh *shard) table(pt *policyTable) *table {
	if t := sh.last; t != nil && t.pt == pt {
		return t
	}
	t := sh.byPolicy[pt]
	if t != nil {
		sh.last = t
	}
	return t
}

// tableFor returns the shard's table for c, creating it, or nil if c's
// policy is dead (see registry.go).
func (sh *shard) tableFor(c *compiled, seed maphash.Seed) *table {
	t := sh.table(c.pt)
	if t == nil {
		if !c.pt.acquire() {
			return nil
		}
		t = newTable(c.pt, c, seed)
		t.pos = len(sh.tabs)
		sh.tabs = append(sh.tabs, t)
		if sh.byPolicy == nil {
			sh.byPolicy = make(map[*policyTable]*table)
		}
		sh.byPolicy[c.pt] = t
		sh.peakTabs = max(sh.peakTabs, len(sh.tabs))
		sh.last = t
	}
	sh.recompile(t, c)
	return t
}

// dropTable frees t, which holds no key, and releases its policy.
func (sh *shard) dropTable(t *table) {
	if he := sh.hotp; he != nil && he.t == t {
		sh.retire()
		sh.hotp = nil
	}
	last := len(sh.tabs) - 1
	sh.tabs[t.pos] = sh.tabs[last]
	sh.tabs[t.pos].pos = t.pos
	sh.tabs[last] = nil
	sh.tabs = sh.tabs[:last]
	delete(sh.byPolicy, t.pt)
	if sh.last == t {
		sh.last = nil
	}
	// Maps and slices keep their size when emptied: rebuild them when they
	// are mostly empty, O(1) amortized per table dropped.
	if n := len(sh.tabs); n == 0 {
		sh.tabs, sh.byPolicy, sh.peakTabs = nil, nil, 0
	} else if sh.peakTabs > 64 && 4*n < sh.peakTabs {
		sh.tabs = append([]*table(nil), sh.tabs...)
		m := make(map[*policyTable]*table, n)
		for _, x := range sh.tabs {
			m[x.pt] = x
		}
		sh.byPolicy, sh.peakTabs = m, n
	}
	sh.reg.release(t.pt)
}

// wrote notes that a key now expires at exp.
func (sh *shard) wrote(exp int64) {
	if exp < sh.minExp {
		sh.minExp = exp
	}
}

// mayHaveExpired reports whether some key may have expired by now.
func (sh *shard) mayHaveExpired(now int64) bool {
	return sh.minExp <= now || sh.minGen != sh.gen.Load()
}

func (sh *shard) added() {
	sh.n++
	sh.keys.Store(int64(sh.n))
}

// remove drops entry e (at slot) of t, retiring the hot key first if it is
// that entry, so that no path can drop a key its copy still shows. A table
// left with no key is freed.
func (sh *shard) remove(t *table, slot, e int) {
	sh.retireIf(t, e)
	t.remove(slot, e)
	sh.n--
	sh.keys.Store(int64(sh.n))
	if t.len() == 0 {
		sh.dropTable(t)
	}
}

// outcome is the result of shard.take.
type outcome uint8

const (
	took  outcome = iota // the decision is made
	full                 // the key could not be stored
	stale                // the policy is dead: compile it again and retry
)

// take applies one request, of the policy that c decides with Burst (a
// bucket kind) or Limit (a window kind) arg, and sets *d to its decision.
func (sh *shard) take(c *compiled, seed maphash.Seed, h uint64, k *keyHead, key string, cost, arg, now int64, d *sluice.Decision) outcome {
	t := sh.table(c.pt)
	slot, e := -1, -1
	if t == nil && c.pt.isDead() {
		return stale // its successor may hold the key (registry.go)
	}
	if t != nil {
		if he := sh.hotp; he != nil && he.t == t && he.c != c || t.den != c.den {
			if t.den != c.den && t.kind == bucketKind {
				return sh.takeOffGrid(c, seed, t, h, k, key, cost, arg, now, d)
			}
			sh.recompile(t, c)
		}
		slot, e = t.findHead(h, k, key)
	}
	if e >= 0 {
		// A take that removes the key retires it (shard.remove); an
		// admission of the hot key republishes it.
		kept := sh.takeInPlace(c, t, slot, e, cost, arg, now, d)
		switch {
		case !kept || cost == 0:
		case d.Allowed:
			if sh.isHot(t, h, key) {
				sh.tookHot(t, e)
			}
		case !sh.isHot(t, h, key):
			sh.rejected(c, t, e, h, key)
		}
		return took
	}
	return sh.takeAbsent(c, seed, h, key, cost, arg, now, d)
}

// takeAbsent is take of a key the store does not hold: its state is the
// zero State.
func (sh *shard) takeAbsent(c *compiled, seed maphash.Seed, h uint64, key string, cost, arg, now int64, d *sluice.Decision) outcome {
	// The model's entry points are called directly: a shared helper
	// would pass the State and Decision through one more frame.
	var next model.State
	var dec sluice.Decision
	if c.kind == bucketKind {
		next, dec = c.model.TakeBurst(model.State{}, now, cost, arg)
	} else {
		next, dec = c.model.TakeLimit(model.State{}, now, cost, arg)
	}
	*d = dec
	exp := c.model.ExpiresAt(next)
	if !dec.Allowed || cost == 0 || exp <= now {
		return took
	}
	if sh.quota > 0 && sh.n >= sh.quota {
		sh.makeRoom(now, nil)
	}
	t := sh.tableFor(c, seed)
	if t == nil {
		return stale // died meanwhile: nothing was written
	}
	e := t.insert(h, key)
	if e < 0 {
		if t.len() == 0 {
			sh.dropTable(t)
		}
		return full
	}
	t.set(e, next)
	sh.wrote(exp)
	sh.added()
	return took
}

// takeOffGrid is take under a bucket policy c whose emission interval's
// grid (its denominator) is not the one t's rows are kept on: a named
// policy reconfigured (sluice.Policy). The key's TAT is read rounded up to
// c's grid, and t's rows move to c's grid (table.setDen) only to record an
// admission: a refusal or a peek writes nothing, as on Redis. (Redis keeps
// each key on the grid of its own last write; t keeps one grid for all its
// rows, so an admission here also rounds up the TATs of t's other keys.)
func (sh *shard) takeOffGrid(c *compiled, seed maphash.Seed, t *table, h uint64, k *keyHead, key string, cost, arg, now int64, d *sluice.Decision) outcome {
	slot, e := t.findHead(h, k, key)
	if e < 0 {
		return sh.takeAbsent(c, seed, h, key, cost, arg, now, d)
	}
	st := t.get(e)
	st.Time, st.Frac = convFrac(st.Time, st.Frac, t.den, c.den)
	next, dec := c.model.TakeBurst(st, now, cost, arg)
	*d = dec
	exp := c.model.ExpiresAt(next)
	switch {
	case exp <= now:
		sh.remove(t, slot, e) // equivalent to none, on any grid
		sh.expired.Add(1)
	case dec.Allowed && cost > 0:
		sh.recompile(t, c) // every row to c's grid; retires a hot key of t compiled otherwise
		t.set(e, next)
		sh.wrote(exp)
	}
	return took
}

// takeInPlace applies one request to entry e (at slot), running the model
// on the row's fields in place. It reports whether the entry is kept: false
// when its state expired, and it was removed.
func (sh *shard) takeInPlace(c *compiled, t *table, slot, e int, cost, arg, now int64, d *sluice.Decision) bool {
	// The bucket layouts are called directly: no interface call, and the
	// model writes the decision straight into *d.
	var exp int64
	switch rs := t.rs.(type) {
	case *narrowRows:
		exp = rs.take(c, e, now, cost, arg, d)
	case *wideRows:
		exp = rs.take(c, e, now, cost, arg, d)
	default:
		exp = rs.take(c, e, now, cost, arg, &sh.dec)
		*d = sh.dec
	}
	switch {
	case exp <= now && !t.outlives(c, t.get(e), now):
		sh.remove(t, slot, e)
		sh.expired.Add(1)
		return false
	case d.Allowed && cost > 0:
		sh.wrote(exp)
	}
	return true
}

func (sh *shard) rand() uint64 {
	// xorshift64*
	x := sh.rng
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	sh.rng = x
	return x * 0x2545f4914f6cdd1d
}

// entry returns the r-th entry of the shard, counting over its tables.
func (sh *shard) entry(r int) (*table, int) {
	for _, t := range sh.tabs {
		if t == nil {
			continue
		}
		if r < t.len() {
			return t, r
		}
		r -= t.len()
	}
	return nil, -1
}

// cursor returns the entry at the sweep cursor and advances the cursor.
func (sh *shard) cursor() (*table, int) {
	if len(sh.tabs) == 0 {
		return nil, -1
	}
	for range len(sh.tabs) + 1 {
		if sh.curTab >= len(sh.tabs) {
			sh.curTab, sh.curEnt = 0, 0
		}
		if t := sh.tabs[sh.curTab]; t != nil && sh.curEnt < t.len() {
			sh.curEnt++
			return t, sh.curEnt - 1
		}
		sh.curTab++
		sh.curEnt = 0
	}
	return nil, -1
}

// Room-making effort: random entries sampled, then entries scanned at the
// sweep cursor for an expired one.
const (
	evictSamples = 8
	evictScan    = 64
	maxCredit    = 1 << 40
)

// makeRoom drops at least one key of the shard to make room for a new one.
// It prefers expired keys: a sampled one, or all of them if the shard may
// hold some and a full sweep is due (full sweeps are paced so that they cost
// O(1) amortized per call), or one found by a bounded scan. Failing that it
// evicts the sampled key that expires first. Keys of batch b are spared if
// possible. It reports whether it dropped a key.
func (sh *shard) makeRoom(now int64, b *batch) bool {
	sh.credit = min(sh.credit+evictScan, maxCredit)
	var victim *table
	ve, vexp := -1, int64(0)
	consider := func(t *table, e int) bool {
		if b != nil && b.holds(t, e) {
			return false
		}
		if exp := t.expiresAt(e); victim == nil || exp < vexp {
			victim, ve, vexp = t, e, exp
		}
		return vexp <= now
	}
	found := false
	for range evictSamples {
		if t, e := sh.entry(int(sh.rand() % uint64(sh.n))); t != nil && consider(t, e) {
			found = true
			break
		}
	}
	if !found && sh.mayHaveExpired(now) {
		if sh.credit >= sh.n {
			sh.credit = 0
			if sh.sweepAll(now, &sh.evicted) > 0 {
				return true
			}
		} else {
			for range min(evictScan, sh.n) {
				if t, e := sh.cursor(); t != nil && consider(t, e) {
					break
				}
			}
		}
	}
	if victim == nil && b != nil {
		// Every key looked at belongs to the batch: look at all of them.
		for _, t := range sh.tabs {
			if t == nil {
				continue
			}
			for e := range t.len() {
				consider(t, e)
			}
		}
	}
	if victim == nil {
		return false
	}
	sh.remove(victim, victim.slotOf(ve), ve)
	if vexp <= now {
		sh.evicted.Add(1)
	} else {
		sh.forced.Add(1)
	}
	return true
}

// sweepSome drops the expired entries among up to budget entries from the
// sweep cursor (all entries when there are no more than budget), unless the
// shard's expiry bound shows that none has expired.
func (sh *shard) sweepSome(now int64, budget int) {
	if !sh.mayHaveExpired(now) {
		return
	}
	if sh.n <= budget {
		sh.sweepAll(now, &sh.expired) // also makes the expiry bound exact
		return
	}
	for range budget {
		if sh.n == 0 {
			return
		}
		t, e := sh.cursor()
		if t == nil {
			return
		}
		if t.expiresAt(e) <= now {
			sh.remove(t, t.slotOf(e), e)
			sh.expired.Add(1)
			sh.curEnt = e // the last entry moved into e
		}
	}
}

// sweepAll drops every expired entry of the shard, counting them in
// counter, and recomputes the shard's expiry bound. It returns the number
// dropped.
func (sh *shard) sweepAll(now int64, counter *atomic.Uint64) int {
	gen := sh.gen.Load()
	minExp := int64(math.MaxInt64)
	dropped := 0
	// Backward: dropping an emptied table moves the last one into its place.
	for i := len(sh.tabs) - 1; i >= 0; i-- {
		t := sh.tabs[i]
		for e := 0; e < t.len(); {
			if exp := t.expiresAt(e); exp > now {
				minExp = min(minExp, exp)
				e++
				continue
			}
			sh.remove(t, t.slotOf(e), e)
			dropped++
		}
	}
	counter.Add(uint64(dropped))
	sh.minExp, sh.minGen = minExp, gen
	return dropped
}
