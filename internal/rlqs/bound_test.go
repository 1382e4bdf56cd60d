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
