// SPDX-License-Identifier: Apache-2.0

package memstore

import (
	"runtime"
	"sync"
	"time"
	"weak"
)

// The background sweeper, and Sweep.

// Sweep drops every expired key now, and every policy left with no key. It
// locks one shard at a time.
func (s *Store) Sweep() {
	if s.clock == nil {
		return // the zero Store holds nothing
	}
	now := s.now()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.sweepAll(now, &sh.expired)
		sh.mu.Unlock()
	}
	s.reg.sweep()
	s.sem.sweep(now)
}

// freeExpired frees, of the policies pts, those whose keys have all
// expired: in each shard it drops the expired keys of the policy's table
// from its first entry until one that has not expired, and stops at such a
// key, skipping the policy until the key's expiry (policyTable.liveUntil).
// A policy left with no table is collected by the registry. Its work per
// policy is a lock of each shard and one look at a live key, besides the
// expired keys it drops (each key is dropped once). The registry calls it
// to make room for a new policy, without its lock (registry.go).
func (s *Store) freeExpired(pts []*policyTable) {
	now := s.now()
	for _, pt := range pts {
		if pt == nil || pt.liveUntil.Load() > now {
			continue
		}
		for i := range s.shards {
			sh := &s.shards[i]
			sh.mu.Lock()
			live := sh.dropExpired(pt, now)
			sh.mu.Unlock()
			if live > now {
				pt.liveUntil.Store(live)
				break
			}
		}
	}
}

// dropExpired drops the expired keys of policy pt's table in the shard,
// from its first entry, until one that has not expired, and returns that
// one's expiry; it returns 0 when the shard is left with no key of pt (its
// table freed). The caller holds the shard's lock.
func (sh *shard) dropExpired(pt *policyTable, now int64) int64 {
	t := sh.byPolicy[pt]
	for t != nil && t.len() > 0 {
		if exp := t.expiresAt(0); exp > now {
			return exp
		}
		sh.remove(t, t.slotOf(0), 0) // the last entry moves to 0; an emptied table is freed
		sh.expired.Add(1)
	}
	return 0
}

// sweeper is the background sweeper's control: the goroutine holds it and
// a weak pointer to its Store, never the Store, so that a Store dropped
// without Close is collected, and its cleanup stops the goroutine.
type sweeper struct {
	once sync.Once
	stop chan struct{} // closed to stop the goroutine
	done chan struct{} // closed when it has returned
}

// startSweeper starts s's background sweeper, running every interval.
func startSweeper(s *Store, interval time.Duration) *sweeper {
	sw := &sweeper{stop: make(chan struct{}), done: make(chan struct{})}
	runtime.AddCleanup(s, (*sweeper).stopOnce, sw)
	go sw.run(weak.Make(s), interval)
	return sw
}

// halt stops the goroutine and waits for it to return.
func (sw *sweeper) halt() {
	sw.stopOnce()
	<-sw.done
}

// stopOnce stops the goroutine without waiting; the store's cleanup calls it.
func (sw *sweeper) stopOnce() { sw.once.Do(func() { close(sw.stop) }) }

// run sweeps every interval until stopped or until the store is gone.
func (sw *sweeper) run(ws weak.Pointer[Store], interval time.Duration) {
	defer close(sw.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-sw.stop:
			return
		case <-tick.C:
		}
		if !sw.tick(ws) {
			return
		}
	}
}

// tick runs one sweep of the store, holding it strongly only meanwhile, and
// reports whether the store is still there.
func (sw *sweeper) tick(ws weak.Pointer[Store]) bool {
	s := ws.Value()
	if s == nil {
		return false
	}
	now := s.now()
	for i := range s.shards {
		select {
		case <-sw.stop:
			return false
		default:
		}
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.sweepSome(now, sweepBudget)
		sh.hotBar /= 2 // forget hot-key replacements slowly (hot.go)
		sh.mu.Unlock()
	}
	s.reg.sweep()
	s.sem.sweep(now)
	return true
}
