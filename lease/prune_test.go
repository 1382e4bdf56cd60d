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

// TestConcurrentPrunesKeepTheBound: a new policy past maxTables while a
// prune runs does not start another (two at once both deleted a table and
// counted it freed twice, so the count drifted below the tables held and
// the Store then held more than maxTables); after a flood the count is
// the tables held and the bound holds.
func TestConcurrentPrunesKeepTheBound(t *testing.T) {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	s := New(noStore{}, WithClock(clock)) // tables only: no request reaches it
	pol := func(name string) sluice.Policy {
		return sluice.Policy{Name: name, Algorithm: sluice.GCRA, Limit: 100, Period: time.Second}
	}
	for i := range maxTables {
		s.table(pol(fmt.Sprint("t", i)))
	}
	// Hold one table's first shard, so that a prune stops at it.
	k := s.table(pol("t0"))
	k.shards[0].mu.Lock()
	done := make(chan struct{})
	go func() { s.table(pol("a")); close(done) }()
	for inIdle() < 1 {
		runtime.Gosched()
	}
	// b's table returns at once (a's prune is the one), or its prune
	// waits beside a's.
	bdone := make(chan struct{})
	go func() { s.table(pol("b")); close(bdone) }()
	for waiting := false; !waiting; {
		select {
		case <-bdone:
			waiting = true
		default:
			waiting = inIdle() >= 2
			runtime.Gosched()
		}
	}
	k.shards[0].mu.Unlock()
	<-done
	<-bdone
	most := 0
	for i := range 2 * maxTables {
		s.table(pol(fmt.Sprint("f", i)))
		n, _ := Tables(s)
		most = max(most, n)
	}
	n, _ := Tables(s)
	if most > maxTables || s.count.Load() != int64(n) {
		t.Errorf("the Store held up to %d lease tables (bound %d), and counts %d holding %d", most, maxTables, s.count.Load(), n)
	}
}

// noStore is a sluice.Store no test call reaches.
type noStore struct{ sluice.Store }
