// SPDX-License-Identifier: Apache-2.0

package model

import (
	"github.com/sluicehq/sluice"

	"testing"
	"time"
)

// step is one request at a fixed instant and what the model must answer.
type step struct {
	at        time.Duration // since t0
	cost      int64
	allowed   bool
	remaining int64
	retry     time.Duration // checked when >= 0
	reset     time.Duration // checked when >= 0
	delay     time.Duration
}

func runSteps(t *testing.T, p sluice.Policy, t0 int64, steps []step) {
	t.Helper()
	m, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	var s State
	for i, st := range steps {
		var d sluice.Decision
		s, d = m.Take(s, t0+int64(st.at), st.cost)
		if d.Allowed != st.allowed || d.Remaining != st.remaining || d.Delay != st.delay ||
			st.retry >= 0 && d.RetryAfter != st.retry || st.reset >= 0 && d.ResetAfter != st.reset {
			t.Errorf("step %d (t=%v cost=%d): got %+v, want allowed=%v remaining=%d retry=%v reset=%v delay=%v",
				i, st.at, st.cost, d, st.allowed, st.remaining, st.retry, st.reset, st.delay)
		}
	}
}

func TestRiderAppOpen(t *testing.T) {
	p := sluice.Policy{Algorithm: sluice.TokenBucket, Limit: 5, Period: time.Second, Burst: 10}
	ms := time.Millisecond
	runSteps(t, p, 0, []step{
		{0, 1, true, 9, -1, 200 * ms, 0},
		{0, 1, true, 8, -1, 400 * ms, 0},
		{0, 1, true, 7, -1, -1, 0},
		{0, 1, true, 6, -1, -1, 0},
		{0, 1, true, 5, -1, -1, 0},
		{0, 1, true, 4, -1, 1200 * ms, 0},
		{100 * ms, 1, true, 3, -1, 1300 * ms, 0},
		{200 * ms, 1, true, 3, -1, 1400 * ms, 0},
	})
}

func TestGPSIngestionQueue(t *testing.T) {
	p := sluice.Policy{Algorithm: sluice.LeakyBucket, Limit: 3000, Period: time.Second, Burst: 5000}
	m, _ := New(p)
	var s State
	admitted := make([]int, 4)
	var firstDelay [4]time.Duration
	for sec, burst := range []int{4000, 2500, 3200, 6000} {
		for i := 0; i < burst; i++ {
			var d sluice.Decision
			s, d = m.Take(s, int64(sec)*int64(time.Second), 1)
			if d.Allowed {
				if admitted[sec] == 0 {
					firstDelay[sec] = d.Delay
				}
				admitted[sec]++
			}
		}
	}
	if want := []int{4000, 2500, 3200, 4300}; !equalInts(admitted, want) {
		t.Errorf("admitted %v, want %v", admitted, want)
	}
	// 1000 queued units at 3000/s: 1/3 s, rounded up to the nanosecond.
	if want := time.Duration(333333334); firstDelay[1] != want {
		t.Errorf("first delay at t=1s = %v, want %v", firstDelay[1], want)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestBoundaryAttack(t *testing.T) {
	want := map[sluice.Algorithm]int{sluice.FixedWindow: 200, sluice.SlidingLog: 100, sluice.SlidingWindow: 100, sluice.TokenBucket: 101, sluice.GCRA: 101, sluice.LeakyBucket: 101}
	for alg, n := range want {
		m, err := New(sluice.Policy{Algorithm: alg, Limit: 100, Period: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		var s State
		got := 0
		for _, at := range []time.Duration{59 * time.Second, 60 * time.Second} {
			for i := 0; i < 100; i++ {
				var d sluice.Decision
				s, d = m.Take(s, int64(at), 1)
				if d.Allowed {
					got++
				}
			}
		}
		if got != n {
			t.Errorf("%s admitted %d, want %d", alg, got, n)
		}
	}
}

func TestWeightedCount(t *testing.T) {
	m, _ := New(sluice.Policy{Algorithm: sluice.SlidingWindow, Limit: 50, Period: time.Minute})
	var s State
	var d sluice.Decision
	for i := 0; i < 42; i++ {
		s, d = m.Take(s, int64(30*time.Second), 1)
	}
	for i := 0; i < 18; i++ {
		s, d = m.Take(s, int64(75*time.Second), 1)
	}
	if !d.Allowed {
		t.Fatal("setup request rejected")
	}
	// 25% into the current window: 42·0.75 + 18 + 1 = 50.5 > 50.
	// (The 18 arrived at that instant too, each admitted: 31.5 + 18 ≤ 50.)
	s, d = m.Take(s, int64(75*time.Second), 1)
	if d.Allowed {
		t.Fatalf("at 25%%: allowed, want rejected: %+v", d)
	}
	// Admitted once 42·(60−e)/60 ≤ 31, e ≥ 15.714…s: retry after 714285715ns.
	if want := time.Duration(714285715); d.RetryAfter != want {
		t.Errorf("retry after %v, want %v", d.RetryAfter, want)
	}
	if _, d = m.Take(s, int64(76*time.Second), 1); !d.Allowed {
		t.Errorf("one second later: rejected: %+v", d)
	}
}

// TestClockSteppedBack: a state written at a later instant than now (a
// clock that stepped back) never admits more, a peek is refused as cost 1
// is, and Remaining stays within [0, capacity].
func TestClockSteppedBack(t *testing.T) {
	for _, alg := range sluice.Algorithms() {
		m, err := New(sluice.Policy{Algorithm: alg, Limit: 3, Period: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		var s State
		later := int64(100 * time.Second)
		for i := 0; i < 3; i++ {
			s, _ = m.Take(s, later, 1)
		}
		earlier := later - int64(5*time.Second)
		if _, d := m.Take(s, earlier, 0); d.Allowed || d.RetryAfter <= 0 || d.Remaining != 0 {
			t.Errorf("%s: peek 5s before the state: %+v, want refused with a RetryAfter and 0 remaining", alg, d)
		}
		if _, d := m.Take(s, earlier, 1); d.Allowed || d.RetryAfter <= 0 || d.Remaining != 0 {
			t.Errorf("%s: a request 5s before the state: %+v, want rejected with a RetryAfter", alg, d)
		}
	}
}

// TestWindowEdge pins where each window kind's period ends, to the
// nanosecond: a sliding-log entry exactly Period old has left, and a fixed
// window [start, start+Period) is over at start+Period.
func TestWindowEdge(t *testing.T) {
	const p = int64(time.Second)
	t0 := int64(10 * time.Second) // a window boundary
	for _, alg := range []sluice.Algorithm{sluice.SlidingLog, sluice.FixedWindow} {
		m, err := New(sluice.Policy{Algorithm: alg, Limit: 2, Period: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		s, d := m.Take(State{}, t0, 2)
		if !d.Allowed {
			t.Fatalf("%s: the first request: %+v", alg, d)
		}
		if _, d := m.Take(s, t0+p-1, 1); d.Allowed || d.RetryAfter != 1 || d.ResetAfter != 1 {
			t.Errorf("%s: 1ns before the period ends: %+v, want rejected, retry and reset after 1ns", alg, d)
		}
		if _, d := m.Take(s, t0+p, 2); !d.Allowed || d.Remaining != 0 {
			t.Errorf("%s: when the period ends: %+v, want the whole limit admitted", alg, d)
		}
	}
}
