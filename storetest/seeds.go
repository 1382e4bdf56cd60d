// SPDX-License-Identifier: Apache-2.0

package storetest

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// The worked examples of the design, each with its exact numbers. Every
// request is also compared with the model.

func testSeeds(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Run("RiderAppOpen", func(t *testing.T) {
		for _, alg := range []sluice.Algorithm{sluice.TokenBucket, sluice.GCRA} {
			t.Run(string(alg), func(t *testing.T) { seedRiderAppOpen(t, newHarness, alg) })
		}
	})
	t.Run("BoundaryAttack", func(t *testing.T) {
		want := map[sluice.Algorithm]int{
			sluice.TokenBucket: 101, sluice.GCRA: 101, sluice.LeakyBucket: 101,
			sluice.FixedWindow: 200, sluice.SlidingLog: 100, sluice.SlidingWindow: 100,
		}
		for _, alg := range sluice.Algorithms() {
			t.Run(string(alg), func(t *testing.T) { seedBoundaryAttack(t, newHarness, alg, want[alg]) })
		}
	})
	t.Run("WeightedCount", func(t *testing.T) { seedWeightedCount(t, newHarness) })
	t.Run("GPSIngestion", func(t *testing.T) { seedGPSIngestion(t, newHarness) })
}

// seedRiderAppOpen: capacity 10 refilling 5/s; six requests at t=0, one at
// 0.1 s and one at 0.2 s are all admitted with remaining 9 8 7 6 5 4 3 3.
func seedRiderAppOpen(t *testing.T, newHarness func(t *testing.T) Harness, alg sluice.Algorithm) {
	r := newRig(t, newHarness, epoch)
	p := sluice.Policy{Algorithm: alg, Limit: 5, Period: time.Second, Burst: 10}
	ms := int64(time.Millisecond)
	steps := []struct {
		at        int64
		remaining int64
	}{{0, 9}, {0, 8}, {0, 7}, {0, 6}, {0, 5}, {0, 4}, {100 * ms, 3}, {200 * ms, 3}}
	for i, st := range steps {
		r.at(epoch + st.at)
		d := r.check(p, "rider", 1)
		if !d.Allowed || d.Remaining != st.remaining {
			t.Fatalf("request %d at %dms: %s, want allowed with remaining %d", i, st.at/ms, fmtDecision(d), st.remaining)
		}
	}
	// Seven tokens short at 0.2 s, refilling one per 0.2 s: full 1.4 s later.
	if d := r.peek(p, "rider"); d.ResetAfter != 1400*time.Millisecond {
		t.Fatalf("reset after %v, want 1.4s", d.ResetAfter)
	}
}

// seedBoundaryAttack: 100 per minute; 100 requests at 59 s and 100 at 60 s.
func seedBoundaryAttack(t *testing.T, newHarness func(t *testing.T) Harness, alg sluice.Algorithm, want int) {
	r := newRig(t, newHarness, epoch)
	p := sluice.Policy{Algorithm: alg, Limit: 100, Period: time.Minute}
	admitted := 0
	for _, at := range []time.Duration{59 * time.Second, 60 * time.Second} {
		r.at(epoch + int64(at))
		for range 100 {
			if r.check(p, "attacker", 1).Allowed {
				admitted++
			}
		}
	}
	if admitted != want {
		t.Fatalf("%s admitted %d, want %d", alg, admitted, want)
	}
}

// seedWeightedCount: sliding-window 50 per minute; 42 requests in the
// previous minute and 18 in this one, 25% in: the next is rejected
// (42·0.75 + 18 + 1 = 50.5 > 50) and one a second later is admitted.
func seedWeightedCount(t *testing.T, newHarness func(t *testing.T) Harness) {
	r := newRig(t, newHarness, epoch)
	p := sluice.Policy{Algorithm: sluice.SlidingWindow, Limit: 50, Period: time.Minute}
	r.at(epoch + int64(30*time.Second))
	for i := range 42 {
		if d := r.check(p, "dashboard", 1); !d.Allowed {
			t.Fatalf("setup request %d in the previous minute rejected: %s", i, fmtDecision(d))
		}
	}
	r.at(epoch + int64(75*time.Second))
	var d sluice.Decision
	for i := range 18 {
		if d = r.check(p, "dashboard", 1); !d.Allowed {
			t.Fatalf("setup request %d in this minute rejected: %s", i, fmtDecision(d))
		}
	}
	if d.Remaining != 0 { // 50 − 49.5
		t.Fatalf("after the 18th: remaining %d, want 0", d.Remaining)
	}
	d = r.check(p, "dashboard", 1)
	// Admitted once 42·(60−e)/60 ≤ 31, e ≥ 15.714285…s.
	if d.Allowed || d.RetryAfter != 714285715*time.Nanosecond {
		t.Fatalf("at 25%%: %s, want rejected with retry after 714.285715ms", fmtDecision(d))
	}
	r.at(epoch + int64(76*time.Second))
	if d = r.check(p, "dashboard", 1); !d.Allowed {
		t.Fatalf("a second later: %s, want admitted", fmtDecision(d))
	}
}

// seedGPSIngestion: a leaky-bucket queue of 5000 draining 3000/s; bursts of
// 4000, 2500, 3200 and 6000 at t = 0, 1, 2, 3 s: all admitted but 1700 of the
// last; the first update at t = 1 s waits 1/3 s.
func seedGPSIngestion(t *testing.T, newHarness func(t *testing.T) Harness) {
	r := newRig(t, newHarness, epoch)
	p := sluice.Policy{Algorithm: sluice.LeakyBucket, Limit: 3000, Period: time.Second, Burst: 5000}
	bursts := []int{4000, 2500, 3200, 6000}
	wantAdmitted := []int{4000, 2500, 3200, 4300}
	for sec, n := range bursts {
		r.at(epoch + int64(sec)*int64(time.Second))
		admitted := 0
		for i := range n {
			d := r.check(p, "truck-7", 1)
			if !d.Allowed {
				continue
			}
			if sec == 1 && i == 0 && d.Delay != 333333334*time.Nanosecond {
				t.Fatalf("first update at t=1s: delay %v, want 333.333334ms", d.Delay)
			}
			admitted++
		}
		if admitted != wantAdmitted[sec] {
			t.Fatalf("burst at t=%ds: admitted %d of %d, want %d", sec, admitted, n, wantAdmitted[sec])
		}
	}
}
