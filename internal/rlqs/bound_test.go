// SPDX-License-Identifier: Apache-2.0

package rlqs

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestExcessAtItsEdge drives the overshoot bound to its edge: two greedy
// Envoys (they spend every token the moment it exists) report demands that
// flip every second, so every tick changes both assignments and both
// Envoys start full buckets. The fleet admits more than the limit by at
// least three quarters of Excess, and never more.
func TestExcessAtItsEdge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startReplica(t, loadConfig(t, apiRule))
		// Hold the replica's ticks half a second away from the reports.
		hold := &envoy{t: t, bucket: map[string]string{"route": "free"}, every: time.Hour}
		var hw sync.WaitGroup
		hw.Add(1)
		go hold.run(r.cc, time.Now().Add(40*time.Second), &hw)
		time.Sleep(500 * time.Millisecond)

		var wg sync.WaitGroup
		es := make([]*envoy, 2)
		for i := range es {
			n := 0
			es[i] = &envoy{t: t, bucket: map[string]string{"route": "api"}, demand: 1e5, every: time.Second,
				report: func(uint64, uint64) (uint64, uint64) {
					n++
					if (n+i)%2 == 0 {
						return 90, 0
					}
					return 10, 0
				}}
			wg.Add(1)
			go es[i].run(r.cc, time.Now().Add(30*time.Second), &wg)
		}
		t0 := time.Now()
		wg.Wait()
		from, to := t0.Add(5*time.Second), t0.Add(25*time.Second)
		var total uint64
		for _, e := range es {
			total += e.between(from, to)
		}
		w := to.Sub(from)
		excess := Excess(100, 2, 1, 0, w, DefaultTick, DefaultBurstWindow)
		over := float64(total) - 100*w.Seconds()
		t.Logf("admitted %d in %v: %.0f over the limit; Excess %.0f; %d and %d buckets started", total, w, over, excess, es[0].issued, es[1].issued)
		if over > excess {
			t.Errorf("admitted %d, %.0f over the limit, more than Excess %.0f", total, over, excess)
		}
		// The rest of Excess is its rounding (a token per bucket per
		// batch) and the buckets in force at the window's start, which
		// greedy Envoys have spent already.
		if over < 0.75*excess {
			t.Errorf("admitted %d, only %.0f over the limit: the test no longer reaches the edge of Excess %.0f", total, over, excess)
		}
		hw.Wait()
		r.stop()
	})
}

// TestJoinAtItsEdge drives the early-refusal bound for a joining stream to
// its edge: with two replicas (one board), a stream that joins on replica
// 2 just after replica 1's tick, while replica 1's stream holds the whole
// limit, is refused (granted 0) until replica 1's next tick gives up half
// and replica 2's tick after that grants it: nearly two ticks, never more.
func TestJoinAtItsEdge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		board := NewMemoryBoard()
		cfg := loadConfig(t, apiRule)
		r1 := startReplica(t, cfg, WithBoard(board), WithReplicaID("r1"))
		r2 := startReplica(t, cfg, WithBoard(board), WithReplicaID("r2"))
		var wg sync.WaitGroup
		t0 := time.Now()
		stop := t0.Add(10 * time.Second)
		// Replica 2 ticks at whole seconds, replica 1 10 ms later.
		hold := &envoy{t: t, bucket: map[string]string{"route": "free"}, every: time.Hour, demand: 1}
		wg.Add(1)
		go hold.run(r2.cc, stop, &wg)
		time.Sleep(10 * time.Millisecond)
		a := &envoy{t: t, bucket: map[string]string{"route": "api"}, demand: 1e4, every: 5 * time.Second}
		wg.Add(1)
		go a.run(r1.cc, stop, &wg)
		// B joins 5 ms after replica 1's tick at 2.01 s.
		time.Sleep(2*time.Second + 5*time.Millisecond - time.Since(t0))
		join := time.Now()
		b := &envoy{t: t, bucket: map[string]string{"route": "api"}, demand: 1e4, every: 5 * time.Second}
		wg.Add(1)
		go b.run(r2.cc, stop, &wg)
		wg.Wait()
		var granted time.Time
		b.mu.Lock()
		// The first step's requests precede any assignment (Envoy
		// allows them); from the second on, B's assignment decides.
		first := b.admitted[0].n
		for _, x := range b.admitted[1:] {
			if x.n > first {
				granted = x.at
				break
			}
		}
		b.mu.Unlock()
		wait := granted.Sub(join)
		t.Logf("joined at %v, first admitted by an assignment %v later", join.Sub(t0), wait)
		if wait > 2*DefaultTick {
			t.Errorf("a joining stream waited %v for its share, more than two ticks", wait)
		}
		if wait < 2*DefaultTick-100*time.Millisecond {
			t.Errorf("a joining stream waited only %v: the test no longer reaches the edge of two ticks", wait)
		}
		r1.stop()
		r2.stop()
	})
}
