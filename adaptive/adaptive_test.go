// SPDX-License-Identifier: Apache-2.0

package adaptive

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/inflight"
)

// TestBounds drives each controller to both edges: endless overload
// leaves the limit exactly at Floor, endless healthy full load exactly at
// Ceiling, and never beyond.
func TestBounds(t *testing.T) {
	for _, name := range []string{"aimd", "gradient"} {
		t.Run(name, func(t *testing.T) {
			var c inflight.Controller
			if name == "aimd" {
				c, _ = NewAIMD(AIMDConfig{Floor: 3, Ceiling: 40, Threshold: 100 * time.Millisecond})
			} else {
				c, _ = NewGradient(GradientConfig{Floor: 3, Ceiling: 40})
			}
			now := time.Unix(0, 0)
			for i := range 5000 {
				now = now.Add(10 * time.Millisecond)
				c.Observe(inflight.Sample{At: now, RTT: time.Duration(50+i) * time.Millisecond, InFlight: c.Limit(), Dropped: true})
				if l := c.Limit(); l < 3 || l > 40 {
					t.Fatalf("overload sample %d: limit %d outside [3, 40]", i, l)
				}
			}
			if l := c.Limit(); l != 3 {
				t.Fatalf("after endless overload the limit is %d, want the floor 3", l)
			}
			for i := range 20000 {
				now = now.Add(10 * time.Millisecond)
				c.Observe(inflight.Sample{At: now, RTT: 20 * time.Millisecond, InFlight: c.Limit()})
				if l := c.Limit(); l < 3 || l > 40 {
					t.Fatalf("healthy sample %d: limit %d outside [3, 40]", i, l)
				}
			}
			if l := c.Limit(); l != 40 {
				t.Fatalf("after endless healthy full load the limit is %d, want the ceiling 40", l)
			}
			// Idle: samples far below the limit never raise it.
			c2, _ := NewGradient(GradientConfig{Floor: 3, Ceiling: 40, Initial: 10})
			a2, _ := NewAIMD(AIMDConfig{Floor: 3, Ceiling: 40, Initial: 10, Threshold: time.Second})
			for i := range 1000 {
				now = now.Add(10 * time.Millisecond)
				c2.Observe(inflight.Sample{At: now, RTT: 20 * time.Millisecond, InFlight: 4})
				a2.Observe(inflight.Sample{At: now, RTT: 20 * time.Millisecond, InFlight: 4})
				_ = i
			}
			if c2.Limit() != 10 || a2.Limit() != 10 {
				t.Fatalf("idle samples moved the limit: gradient %d, aimd %d, want 10", c2.Limit(), a2.Limit())
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{second(NewAIMD(AIMDConfig{Floor: 0, Ceiling: 5, Threshold: time.Second})), "Floor 0"},
		{second(NewAIMD(AIMDConfig{Floor: 6, Ceiling: 5, Threshold: time.Second})), "Ceiling 5"},
		{second(NewAIMD(AIMDConfig{Floor: 1, Ceiling: 5})), "Threshold 0s"},
		{second(NewAIMD(AIMDConfig{Floor: 1, Ceiling: 5, Threshold: time.Second, Backoff: 1.5})), "Backoff 1.5"},
		{second(NewAIMD(AIMDConfig{Floor: 1, Ceiling: 5, Initial: 9, Threshold: time.Second})), "Initial 9"},
		{second(NewGradient(GradientConfig{Floor: 1, Ceiling: 5, Tolerance: 0.5})), "Tolerance 0.5"},
		{second(NewGradient(GradientConfig{Floor: 1, Ceiling: 5, Smoothing: 2})), "Smoothing 2"},
		{second(NewGradient(GradientConfig{Floor: 1, Ceiling: 5, Window: -1})), "Window -1ns"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("error %v, want one naming %q", tc.err, tc.want)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// TestAIMDDecreasesAfterClockStepsBack: a clock that steps back (inflight's
// WithClock clock stepped by NTP, a test clock) must not stop AIMD's
// decreases until it passes the last decrease again: overload after the
// step decreases within 2·Cooldown of it, and decreases stay at least a
// Cooldown apart on the clock, either way round.
func TestAIMDDecreasesAfterClockStepsBack(t *testing.T) {
	const cooldown = 500 * time.Millisecond
	for _, back := range []time.Duration{time.Hour, 2 * cooldown, 300 * time.Millisecond} {
		t.Run(back.String(), func(t *testing.T) {
			a, _ := NewAIMD(AIMDConfig{Floor: 1, Ceiling: 100, Threshold: 100 * time.Millisecond, Cooldown: cooldown})
			slow := func(at time.Time) {
				a.Observe(inflight.Sample{At: at, RTT: time.Second, InFlight: a.Limit()})
			}
			now := time.Unix(1_800_000_000, 0)
			slow(now) // 100 → 75
			// Concurrent releases reach the controller a little out of order:
			// still within the cooldown.
			slow(now.Add(-time.Millisecond))
			if l := a.Limit(); l != 75 {
				t.Fatalf("after a decrease and a slow sample 1ms before it: limit %d, want 75", l)
			}
			now = now.Add(-back)
			var decreases []time.Duration // since the step
			for d := time.Duration(0); d < 4*cooldown; d += 10 * time.Millisecond {
				l := a.Limit()
				slow(now.Add(d))
				if a.Limit() < l {
					decreases = append(decreases, d)
				}
			}
			if len(decreases) == 0 || decreases[0] > 2*cooldown {
				t.Fatalf("overload for %v after the clock stepped back %v: decreases at %v after the step, want the first within %v", 4*cooldown, back, decreases, 2*cooldown)
			}
			for i := 1; i < len(decreases); i++ {
				if decreases[i]-decreases[i-1] < cooldown {
					t.Fatalf("decreases at %v after the step: less than the cooldown %v apart", decreases, cooldown)
				}
			}
		})
	}
}

// TestGradientWindowsCloseAfterClockStepsBack: a clock that steps back must
// not hold a gradient window open until it passes the window's start again;
// a sample a little out of order does not end a window early.
func TestGradientWindowsCloseAfterClockStepsBack(t *testing.T) {
	g, _ := NewGradient(GradientConfig{Floor: 1, Ceiling: 1000, Initial: 100, MinSamples: 2})
	now := time.Unix(1_800_000_000, 0)
	g.Observe(inflight.Sample{At: now, RTT: 10 * time.Millisecond, InFlight: 100})
	g.Observe(inflight.Sample{At: now.Add(-time.Millisecond), RTT: 10 * time.Millisecond, InFlight: 100})
	if l := g.Limit(); l != 100 {
		t.Fatalf("a window of 2 samples 1ms apart (out of order) closed: limit %d, want 100", l)
	}
	// The clock steps back an hour; half a second of dropped requests.
	now = now.Add(-time.Hour)
	for d := time.Duration(0); d < 500*time.Millisecond; d += 10 * time.Millisecond {
		g.Observe(inflight.Sample{At: now.Add(d), RTT: time.Second, InFlight: 100, Dropped: true})
	}
	if l := g.Limit(); l >= 100 {
		t.Fatalf("half a second (2 windows) of dropped requests after the clock stepped back an hour: limit %d, want below 100 (no window closed)", l)
	}
}

// TestNonPositiveRTTMeasuresNothing: a sample with RTT ≤ 0 (the clock
// stepped back while the request ran, or did not move) carries no latency:
// it neither raises AIMD's limit nor becomes the gradient's baseline (a 1ns
// baseline took a healthy service's limit down for many windows), and a
// Dropped one still counts as a drop.
func TestNonPositiveRTTMeasuresNothing(t *testing.T) {
	for _, rtt := range []time.Duration{-time.Minute, 0} {
		t.Run("aimd/"+rtt.String(), func(t *testing.T) {
			a, _ := NewAIMD(AIMDConfig{Floor: 1, Ceiling: 100, Initial: 10, Threshold: 100 * time.Millisecond})
			now := time.Unix(1_800_000_000, 0)
			for range 20 {
				now = now.Add(10 * time.Millisecond)
				a.Observe(inflight.Sample{At: now, RTT: rtt, InFlight: 10})
			}
			if l := a.Limit(); l != 10 {
				t.Fatalf("20 samples of RTT %v at full load moved the limit from 10 to %d", rtt, l)
			}
			a.Observe(inflight.Sample{At: now, RTT: rtt, InFlight: 10, Dropped: true})
			if l := a.Limit(); l != 7 {
				t.Fatalf("a dropped sample of RTT %v: limit %d, want 7", rtt, l)
			}
		})
		t.Run("gradient/"+rtt.String(), func(t *testing.T) {
			g, _ := NewGradient(GradientConfig{Floor: 1, Ceiling: 1000, Initial: 100})
			now := time.Unix(1_800_000_000, 0)
			window := func(rtt time.Duration, dropped bool) { // 10 samples over 250ms: one window
				for i := range 10 {
					now = now.Add(25 * time.Millisecond)
					g.Observe(inflight.Sample{At: now, RTT: rtt, InFlight: g.Limit(), Dropped: dropped && i == 0})
				}
			}
			for range 20 { // a healthy backend at a steady 10ms
				window(10*time.Millisecond, false)
			}
			before := g.Limit()
			window(rtt, false) // a window of unmeasured samples
			for range 20 {     // 5 s more of the same healthy 10ms
				window(10*time.Millisecond, false)
			}
			if l := g.Limit(); l < before {
				t.Fatalf("limit %d before a window of RTT %v, %d after it and 5 s more of the same healthy 10ms", before, rtt, l)
			}
			before = g.Limit()
			window(rtt, true) // one of them dropped
			window(10*time.Millisecond, false)
			if l := g.Limit(); l >= before {
				t.Fatalf("limit %d before a window of RTT %v with a drop, %d after it: the drop was not counted", before, rtt, l)
			}
		})
	}
}
