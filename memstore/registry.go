// SPDX-License-Identifier: Apache-2.0

package memstore

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
)

// The policy registry: the policies a store knows, each with its tables in
// the shards. It is bounded (WithMaxPolicies) and freeable: a policy that
// holds no key is dropped, so a flood of distinct policies (an RLS
// descriptor's limit override makes one each) costs memory only while
// their keys live.
//
// A policy's refs count its shards' tables and the calls that pin it
// (TakeAll, Give, Reset, TakeStamped, and a Take that had to retry). A
// policy whose refs fall to 0 is queued as idle; the sweeper (each tick,
// and Sweep) and a creation at the bound collect the idle policies that
// still have refs 0, by swapping refs from 0 to dead (-1) under the
// registry's lock and deleting them from the map. Nothing creates a table
// for a dead policy: a shard creates a table only after acquire, which
// fails on a dead policy, and under the shard's lock. A Take that finds no
// table of its policy in the key's shard and the policy dead retries with
// the registry's current policy; one that finds it alive knows that no
// other policy of that identity has a table in the shard (a successor is
// made only after the death, and only the shard's lock holder could have
// given it a table there), so the key's state is the zero state. Pins are
// acquired under the registry's lock when the fast path met a dead policy,
// where no collection can intervene, so a pinned call never retries.
//
// A creation at the bound that collection leaves at the bound makes room
// (Store.freeExpired): it looks at the reclaimBatch policies held longest,
// in a list kept in creation order and rotated as they are looked at, and
// drops the expired keys of each from the start of its table in each shard
// until one that has not expired. A policy whose keys have all expired so
// loses its tables, its refs fall to 0 and the collection that follows
// drops it. The shards' locks come before the registry's (a shard releases
// a policy under its lock), so the registry's is released meanwhile.

// policyTable is one policy identity: (Name, Algorithm) for a named policy,
// the whole Policy otherwise.
type policyTable struct {
	ident sluice.Policy
	cur   atomic.Pointer[compiled] // the parameters last seen; nil once dead
	// longest is the parameters of the longest period seen (window kinds
	// keep a key for as long as it may count under any of them: see
	// table.outlives).
	longest atomic.Pointer[compiled]
	// refs counts the shards' tables of the policy and its pins; dead once
	// collected.
	refs   atomic.Int64
	queued bool // in the registry's idle list; under the registry's lock
	// older and newer link the held policies, oldest first, rotated as
	// a creation at the bound looks at them; under the registry's lock.
	older, newer *policyTable
	// liveUntil is the expiry of a key that freeExpired found live (0
	// before any): the policy keeps that key until then unless it is reset
	// or reconfigured, so freeExpired skips it until then.
	liveUntil atomic.Int64
}

const dead = -1

// acquire adds a reference unless the policy is dead, and reports whether
// it did.
func (pt *policyTable) acquire() bool {
	for {
		n := pt.refs.Load()
		if n == dead {
			return false
		}
		if pt.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// isDead reports whether the registry has dropped the policy.
func (pt *policyTable) isDead() bool { return pt.refs.Load() == dead }

// DefaultMaxPolicies is the number of policies a store holds at most unless
// WithMaxPolicies says otherwise: more tenants than most deployments have,
// each with a policy of its own (131,072), while a flood of distinct
// policies with one key each stops at about 110 MiB (about 870 bytes a
// policy; TestPolicyMemory measures it). Keys are bounded apart, by
// WithMaxKeys.
const DefaultMaxPolicies = 1 << 17

// fastTables is the number of policies whose compiled form the registry
// keeps in a list that a lookup searches by comparing policies, which is
// faster than hashing one.
const fastTables = 8

// reclaimBatch is the number of policies a creation at the bound looks at
// for keys that have all expired (see WithMaxPolicies).
const reclaimBatch = 4

// registry maps policy identities to their tables.
type registry struct {
	m    sync.Map // identity → *policyTable; written under mu
	fast atomic.Pointer[[]*compiled]
	gen  *atomic.Uint64 // the store's policy generation

	mu   sync.Mutex
	n    int // policies in m
	max  int
	idle []*policyTable // policies whose refs fell to 0, maybe collectable
	// oldest and newest end the list of the policies in m (policyTable's
	// older and newer), in the order a creation at the bound looks at them.
	oldest, newest *policyTable
	// free drops the expired keys of the policies it is given, so that
	// those whose keys have all expired are collected (Store.freeExpired).
	// It is called without mu.
	free func(pts []*policyTable)
}

// identity returns the key of p's table: (Name, Algorithm) for a named
// policy, the whole policy otherwise.
func identity(p sluice.Policy) sluice.Policy {
	if p.Name != "" {
		return sluice.Policy{Name: p.Name, Algorithm: p.Algorithm}
	}
	return p
}

// lookup returns the compiled form that decides p (compiled.decides) if
// the registry holds one: p's, or that of a policy that differs from p
// only in a bucket's Burst or a window's Limit. It takes no lock and allocates nothing. The policy may be
// dead by the time the caller uses it.
func (r *registry) lookup(p sluice.Policy) *compiled {
	if f := r.fast.Load(); f != nil {
		for _, c := range *f {
			if c.policy == p {
				return c
			}
		}
		for _, c := range *f {
			if c.decides(p) {
				return c
			}
		}
	}
	if v, ok := r.m.Load(identity(p)); ok {
		if c := v.(*policyTable).cur.Load(); c != nil && c.decides(p) {
			return c
		}
	}
	return nil
}

// compile returns the compiled form that decides p, creating its policy
// table or recompiling its model when p's parameters changed (other than
// a bucket's Burst or a window's Limit: see compiled.decides). With pin, the policy
// is also acquired (release it with release). It fails for an invalid policy
// or when the registry is full.
func (r *registry) compile(p sluice.Policy, pin bool) (*compiled, error) {
	return r.compileIf(p, pin, true)
}

// compileIf is compile that, unless create, returns nil for a policy whose
// identity the registry does not hold (and so holds no key of) rather than
// create it.
func (r *registry) compileIf(p sluice.Policy, pin, create bool) (*compiled, error) {
	if r.max == 0 {
		return nil, errZero // only the zero Store's registry has no room
	}
	m, err := model.New(p)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	id := identity(p)
	var pt *policyTable
	for freed := false; ; freed = true {
		if v, ok := r.m.Load(id); ok {
			pt = v.(*policyTable)
			break
		}
		if !create {
			return nil, nil
		}
		if r.n >= r.max {
			r.collect()
		}
		if r.n < r.max {
			pt = &policyTable{ident: id}
			r.m.Store(id, pt)
			r.n++
			r.link(pt)
			r.queue(pt) // no table yet: collectable until one is made
			break
		}
		if freed || r.free == nil {
			return nil, fmt.Errorf("policy %v: the store holds %d policies, the most it may (WithMaxPolicies): %w", p, r.n, sluice.ErrStoreFull)
		}
		// Make room once: free the longest held policies whose keys have
		// all expired, without mu (the shards' locks come first), then
		// look again (p may have been created meanwhile).
		olds := r.rotate()
		r.mu.Unlock()
		r.free(olds[:])
		r.mu.Lock()
	}
	// Under mu no policy in m dies: acquire succeeds.
	if pin {
		pt.acquire()
	}
	if c := pt.cur.Load(); c != nil && c.decides(p) {
		return c, nil // compiled meanwhile
	} else if c != nil {
		r.gen.Add(1) // the expiries of its keys may have moved
	}
	c := newCompiled(pt, p, m)
	if l := pt.longest.Load(); l == nil || c.period > l.period {
		pt.longest.Store(c)
	}
	pt.cur.Store(c)
	r.setFast(pt, c)
	return c, nil
}

// setFast puts c in the fast list in place of pt's entry, if there is
// room, or drops pt's entry when c is nil. The caller holds mu.
func (r *registry) setFast(pt *policyTable, c *compiled) {
	var old []*compiled
	if f := r.fast.Load(); f != nil {
		old = *f
	}
	next := make([]*compiled, 0, fastTables)
	for _, f := range old {
		if f.pt != pt {
			next = append(next, f)
		}
	}
	if c != nil && len(next) < fastTables {
		next = append(next, c)
	}
	r.fast.Store(&next)
}

// release drops a reference to pt: a shard's table of it, freed, or a pin.
func (r *registry) release(pt *policyTable) {
	if pt.refs.Add(-1) == 0 {
		r.mu.Lock()
		r.queue(pt)
		r.mu.Unlock()
	}
}

// queue adds pt to the idle list. The caller holds mu.
func (r *registry) queue(pt *policyTable) {
	if !pt.queued {
		pt.queued = true
		r.idle = append(r.idle, pt)
	}
}

// sweep collects the idle policies.
func (r *registry) sweep() {
	r.mu.Lock()
	r.collect()
	r.mu.Unlock()
}

// collect drops every idle policy that still has no reference. Each policy
// is queued once per time its refs fall to 0, so collection is O(1)
// amortized per policy created or emptied. The caller holds mu.
func (r *registry) collect() {
	if len(r.idle) == 0 {
		return
	}
	fastDirty := false
	for i, pt := range r.idle {
		r.idle[i] = nil
		pt.queued = false
		if !pt.refs.CompareAndSwap(0, dead) {
			continue // in use again; queued again when it is not
		}
		r.m.Delete(pt.ident)
		r.unlink(pt)
		r.n--
		c := pt.cur.Swap(nil)
		fastDirty = fastDirty || c != nil && r.inFast(c)
	}
	if cap(r.idle) > 1024 {
		r.idle = nil
	} else {
		r.idle = r.idle[:0]
	}
	if fastDirty {
		r.refillFast()
	}
}

// link appends pt to the list of held policies. The caller holds mu.
func (r *registry) link(pt *policyTable) {
	pt.older, pt.newer = r.newest, nil
	if r.newest != nil {
		r.newest.newer = pt
	} else {
		r.oldest = pt
	}
	r.newest = pt
}

// unlink removes pt from the list of held policies. The caller holds mu.
func (r *registry) unlink(pt *policyTable) {
	if pt.older != nil {
		pt.older.newer = pt.newer
	} else {
		r.oldest = pt.newer
	}
	if pt.newer != nil {
		pt.newer.older = pt.older
	} else {
		r.newest = pt.older
	}
	pt.older, pt.newer = nil, nil
}

// rotate returns the reclaimBatch policies held longest (fewer if fewer
// are held), moving them to the end of the list, so that the next call
// looks at the next ones. The caller holds mu.
func (r *registry) rotate() (olds [reclaimBatch]*policyTable) {
	for i := range min(r.n, reclaimBatch) {
		pt := r.oldest
		if pt == nil {
			break
		}
		r.unlink(pt)
		r.link(pt)
		olds[i] = pt
	}
	return olds
}

func (r *registry) inFast(c *compiled) bool {
	if f := r.fast.Load(); f != nil {
		for _, x := range *f {
			if x == c {
				return true
			}
		}
	}
	return false
}

// refillFast rebuilds the fast list from its live entries. The caller holds
// mu.
func (r *registry) refillFast() {
	next := make([]*compiled, 0, fastTables)
	if f := r.fast.Load(); f != nil {
		for _, c := range *f {
			if c.pt.cur.Load() == c {
				next = append(next, c)
			}
		}
	}
	r.fast.Store(&next)
}

// len returns the number of policies held.
func (r *registry) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}
