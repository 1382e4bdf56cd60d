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
