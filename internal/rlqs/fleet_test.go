// SPDX-License-Identifier: Apache-2.0

package rlqs

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// scenario runs Envoys with the given demands against replicas (Envoy i on
// replica i mod len), each reporting every interval, until the stream's
// stop (relative to the start). It returns the Envoys and the start time.
func scenario(t *testing.T, reps []*replica, demands []float64, every time.Duration, stops []time.Duration) ([]*envoy, time.Time, *sync.WaitGroup) {
	t.Helper()
	start := time.Now()
	var wg sync.WaitGroup
	es := make([]*envoy, len(demands))
	for i, d := range demands {
		es[i] = &envoy{t: t, bucket: map[string]string{"route": "api"}, demand: d, every: every}
		wg.Add(1)
		go es[i].run(reps[i%len(reps)].cc, start.Add(stops[i]), &wg)
	}
	return es, start, &wg
}

func fixed(n int, d time.Duration) []time.Duration {
	s := make([]time.Duration, n)
	for i := range s {
		s[i] = d
	}
	return s
}

// maxMin is the max-min fair division of limit among demands (exact).
func maxMin(limit float64, demands []float64) []float64 {
	out := make([]float64, len(demands))
	left, n := limit, len(demands)
	done := make([]bool, len(demands))
	for n > 0 {
		fair := left / float64(n)
		progress := false
		for i, d := range demands {
			if !done[i] && d <= fair {
				out[i], done[i] = d, true
				left -= d
				n--
				progress = true
			}
		}
		if !progress {
			for i := range demands {
				if !done[i] {
					out[i] = fair
				}
			}
			break
		}
	}
	return out
}

// fleetCase is one of issue 21's acceptance scenarios.
//
// setup runs outside the synctest bubble (a Redis client's goroutines must
// not be in it: they block on the network, which would hold the bubble's
// clock) and returns what starts the replicas inside it.
func fleetCases(t *testing.T, setup func(t *testing.T, n int) func(t *testing.T) []*replica) {
	const limit = 100.0
	for _, every := range []time.Duration{5 * time.Second, time.Second} {
		t.Run(fmt.Sprintf("report=%v/demands=20,40,150,300", every), func(t *testing.T) {
			start := setup(t, 4)
			synctest.Test(t, func(t *testing.T) {
				reps := start(t)
				demands := []float64{20, 40, 150, 300}
				stops := fixed(4, 60*time.Second)
				stops[3] = 30 * time.Second
				es, t0, wg := scenario(t, reps, demands, every, stops)
				wg.Wait()
				// After one report interval (and the ticks that divide it),
				// the fleet admits at most the limit plus the bound, in every
				// window of a second and over the whole run.
				settle := every + 2*DefaultTick
				from, to := t0.Add(settle), t0.Add(30*time.Second)
				check := func(from, to time.Time) {
					var total uint64
					for _, e := range es {
						total += e.between(from, to)
					}
					w := to.Sub(from)
					b := limit*w.Seconds() + Excess(limit, len(es), len(reps), 0, w, DefaultTick, DefaultBurstWindow)
					if float64(total) > b {
						t.Errorf("admitted %d in [%v, %v), above the limit plus the bound, %.1f", total, from.Sub(t0), to.Sub(t0), b)
					}
				}
				check(from, to)
				for i, e := range es {
					t.Logf("demand %v: admitted %.1f/s in [%v, %v), %d buckets started", demands[i], float64(e.between(from, to))/to.Sub(from).Seconds(), from.Sub(t0), to.Sub(t0), e.issued)
				}
				for s := from; s.Before(to); s = s.Add(time.Second) {
					check(s, s.Add(time.Second))
				}
				fair := maxMin(limit, demands)
				w := to.Sub(from).Seconds()
				for i := range 2 {
					got := float64(es[i].between(from, to)) / w
					if got < 0.8*fair[i] {
						t.Errorf("demand %v: admitted %.1f/s, less than 80%% of its max-min fair share %.1f/s", demands[i], got, fair[i])
					}
				}
				// The 300/s stream closed at 30 s: within one report
				// interval (plus the ticks) the others share its part.
				from, to = t0.Add(30*time.Second+every+2*DefaultTick), t0.Add(60*time.Second)
				w = to.Sub(from).Seconds()
				fair = maxMin(limit, demands[:3])
				var total uint64
				for i := range 3 {
					n := es[i].between(from, to)
					total += n
					if got := float64(n) / w; got < 0.8*fair[i] {
						t.Errorf("after the 300/s stream closed, demand %v: admitted %.1f/s, less than 80%% of its max-min fair share %.1f/s", demands[i], got, fair[i])
					}
				}
				t.Logf("after the close: the three admitted %.1f/s", float64(total)/w)
				if got := float64(total) / w; got < 0.9*limit {
					t.Errorf("after the 300/s stream closed, the fleet admitted %.1f/s, less than 90%% of the limit", got)
				}
				check(from, to)
				for _, e := range es {
					if e.lapses > 0 {
						t.Errorf("demand %v: %d requests found the assignment expired: it was not re-issued before its TTL", e.demand, e.lapses)
					}
				}
				for _, r := range reps {
					r.stop()
				}
			})
		})
		t.Run(fmt.Sprintf("report=%v/demands=10,20,30", every), func(t *testing.T) {
			start := setup(t, 3)
			synctest.Test(t, func(t *testing.T) {
				reps := start(t)
				demands := []float64{10, 20, 30}
				es, t0, wg := scenario(t, reps, demands, every, fixed(3, 40*time.Second))
				wg.Wait()
				from, to := t0.Add(every+2*DefaultTick), t0.Add(40*time.Second)
				for i, e := range es {
					if got := float64(e.between(from, to)) / to.Sub(from).Seconds(); got < 0.9*demands[i] {
						t.Errorf("demand %v: admitted %.1f/s, less than 90%%", demands[i], got)
					}
				}
				for _, e := range es {
					if e.lapses > 0 {
						t.Errorf("demand %v: %d requests found the assignment expired: it was not re-issued before its TTL", e.demand, e.lapses)
					}
				}
				for _, r := range reps {
					r.stop()
				}
			})
		})
		t.Run(fmt.Sprintf("report=%v/demands=5,5,5,300", every), func(t *testing.T) {
			start := setup(t, 4)
			synctest.Test(t, func(t *testing.T) {
				reps := start(t)
				demands := []float64{5, 5, 5, 300}
				es, t0, wg := scenario(t, reps, demands, every, fixed(4, 40*time.Second))
				wg.Wait()
				from, to := t0.Add(every+2*DefaultTick), t0.Add(40*time.Second)
				var total uint64
				for _, e := range es {
					total += e.between(from, to)
				}
				t.Logf("5,5,5,300: the fleet admitted %.1f/s", float64(total)/to.Sub(from).Seconds())
				if got := float64(total) / to.Sub(from).Seconds(); got < 0.8*limit {
					t.Errorf("the fleet admitted %.1f/s, less than 80%% of the limit", got)
				}
				for _, e := range es {
					if e.lapses > 0 {
						t.Errorf("demand %v: %d requests found the assignment expired: it was not re-issued before its TTL", e.demand, e.lapses)
					}
				}
				for _, r := range reps {
					r.stop()
				}
			})
		})
	}
}

// TestFleetMemory: issue 21's scenarios on one replica (memory board).
func TestFleetMemory(t *testing.T) {
	fleetCases(t, func(t *testing.T, n int) func(t *testing.T) []*replica {
		return func(t *testing.T) []*replica { return []*replica{startReplica(t, loadConfig(t, apiRule))} }
	})
}
