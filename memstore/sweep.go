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
