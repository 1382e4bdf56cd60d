// SPDX-License-Identifier: Apache-2.0

package procs

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// feed gives g each CPU use in turn and returns the Ps it decides after
// each.
func feed(g *Governor, cpus ...float64) []int {
	var got []int
	for _, c := range cpus {
		got = append(got, g.Next(c))
	}
	return got
}

func repeat(c float64, n int) []float64 { return slices.Repeat([]float64{c}, n) }

func TestGovernorShrinksSlowly(t *testing.T) {
	g := NewGovernor(4)
	if g.Procs() != 4 {
		t.Fatalf("starts at %d Ps, want the limit 4", g.Procs())
	}
	// 0.5 CPUs fits one P: down one P per Hold intervals, to one.
	got := feed(g, repeat(0.5, 3*Hold+5)...)
	want := slices.Concat(slices.Repeat([]int{4}, Hold-1), slices.Repeat([]int{3}, Hold), slices.Repeat([]int{2}, Hold), slices.Repeat([]int{1}, 6))
	if !slices.Equal(got, want) {
		t.Fatalf("at 0.5 CPUs: %v, want %v", got, want)
	}
}

func TestGovernorGrowsAtOnce(t *testing.T) {
	g := NewGovernor(5)
	feed(g, repeat(0, 4*Hold)...)
	if g.Procs() != 1 {
		t.Fatalf("idle: %d Ps, want 1", g.Procs())
	}
	// Busy per P doubles the Ps at once, up to the limit.
	for _, step := range []struct {
		cpus float64
		want int
	}{
		{0.84, 1}, // under Busy: stays
		{0.85, 2},
		{1.5, 2},
		{1.7, 4},
		{3.4, 5},
		{5, 5},
	} {
		if got := g.Next(step.cpus); got != step.want {
			t.Fatalf("at %v CPUs: %d Ps, want %d", step.cpus, got, step.want)
		}
	}
}

func TestGovernorHoldRestarts(t *testing.T) {
	g := NewGovernor(2)
	feed(g, repeat(0.5, Hold-1)...)
	// One interval that does not fit one P starts the count again.
	if got := g.Next(1.0); got != 2 {
		t.Fatalf("got %d Ps, want 2", got)
	}
	if got := feed(g, repeat(0.5, Hold)...); got[Hold-2] != 2 || got[Hold-1] != 1 {
		t.Fatalf("after the restart: %v, want 2 until the %dth interval", got, Hold)
	}
}

func TestGovernorLimitOne(t *testing.T) {
	for _, limit := range []int{-1, 0, 1} {
		g := NewGovernor(limit)
		if got := feed(g, 0, 5, 0.9, 100); !slices.Equal(got, []int{1, 1, 1, 1}) {
			t.Fatalf("limit %d: %v, want always 1", limit, got)
		}
	}
}

// TestRun drives run with a fake clock and CPU time: the first tick only
// starts the measurement; each later one decides from the CPU time used
// since the one before over the time between them, both as read after the
// tick; a tick after which the clock has not advanced decides nothing.
func TestRun(t *testing.T) {
	type reading struct {
		at  time.Time
		cpu time.Duration
	}
	tick := make(chan time.Time)
	readings := make(chan reading) // run's clock and CPU time, read after each tick
	var sets []int
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx, NewGovernor(4), tick, func() (time.Time, time.Duration) { r := <-readings; return r.at, r.cpu },
			func(n int) { sets = append(sets, n) })
	}()
	now, cpu := time.Unix(1000, 0), time.Duration(0)
	step := func(wall, used time.Duration) {
		now, cpu = now.Add(wall), cpu+used
		tick <- time.Time{} // what the tick says is not used
		readings <- reading{now, cpu}
	}
	step(0, time.Hour) // the start: no decision from the hour before it
	for range 3 * Hold {
		step(Interval, Interval/2) // 0.5 CPUs: down to 1 P
	}
	step(0, time.Hour)         // no time passed: ignored
	step(Interval, 2*Interval) // 2 CPUs at 1 P: 2 Ps
	cancel()
	<-done
	if want := []int{3, 2, 1, 2}; !slices.Equal(sets, want) {
		t.Fatalf("set GOMAXPROCS %v, want %v", sets, want)
	}
}

func ExampleGovernor() {
	g := NewGovernor(4)
	// The service is nearly idle for a second and a half...
	for range 15 {
		g.Next(0.2)
	}
	fmt.Println(g.Procs())
	// ...until the load needs three CPUs.
	fmt.Println(g.Next(3), g.Next(3))
	// Output:
	// 3
	// 4 4
}
