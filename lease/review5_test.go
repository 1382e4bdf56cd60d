// SPDX-License-Identifier: Apache-2.0

package lease

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// inIdle counts the goroutines waiting for a shard's mutex in
// (*table).idle.
func inIdle() int {
	buf := make([]byte, 1<<20)
	n := 0
	for _, g := range bytes.Split(buf[:runtime.Stack(buf, true)], []byte("\n\n")) {
		if bytes.Contains(g, []byte("lease.(*table).idle(")) && bytes.Contains(g, []byte("sync.(*Mutex).Lock(")) {
			n++
		}
	}
	return n
}

// TestReview5ConcurrentPrunesKeepTheBound: two prunes that run at once
// (two new policies past maxTables at the same time) may both see a table
// and both Delete it; each counts it freed (prune: s.tables.Delete,
// freed++), so count falls below the tables held. The drift stays (it
// only grows with each such race), and the Store then holds more than
// maxTables tables: the stated bound no longer holds.
func TestReview5ConcurrentPrunesKeepTheBound(t *testing.T) {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	s := New(noStore{}, WithClock(clock)) // tables only: no request reaches it
	pol := func(name string) sluice.Policy {
		return sluice.Policy{Name: name, Algorithm: sluice.GCRA, Limit: 100, Period: time.Second}
	}
	for i := range maxTables {
		s.table(pol(fmt.Sprint("t", i)))
	}
	// Hold one table's first shard, so that each prune stops at it, having
	// seen it and not yet deleted it.
	k := s.table(pol("t0"))
	k.shards[0].mu.Lock()
	done := make(chan struct{}, 2)
	go func() { s.table(pol("a")); done <- struct{}{} }()
	for inIdle() < 1 {
		runtime.Gosched()
	}
	go func() { s.table(pol("b")); done <- struct{}{} }()
	for inIdle() < 2 {
		runtime.Gosched()
	}
	k.shards[0].mu.Unlock()
	<-done
	<-done
	n, _ := Tables(s)
	t.Logf("after two prunes at once: %d tables held, %d counted", n, s.count.Load())
	// A flood goes on, one new policy at a time.
	most := n
	for i := range 2 * maxTables {
		s.table(pol(fmt.Sprint("f", i)))
		if n, _ := Tables(s); n > most {
			most = n
		}
	}
	if most > maxTables {
		t.Errorf("the Store held %d lease tables, past maxTables = %d: concurrent prunes counted tables freed twice (count drifted below the tables held)", most, maxTables)
	}
}

// noStore is a sluice.Store no test call reaches.
type noStore struct{ sluice.Store }
