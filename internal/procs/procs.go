// SPDX-License-Identifier: Apache-2.0

// Package procs sizes GOMAXPROCS to the load: as few Ps as keep up with it,
// from one up to the runtime's default.
//
// Why: with more Ps than the work needs, the Go scheduler hands each
// goroutine that becomes runnable to an idle P, waking a thread for it
// (and again for the next), where one P would have run them one after
// another on one thread and gathered their writes to a socket into one. For
// a service answering small requests at moderate load on a small machine
// that it shares with its clients, the spare P cost about a third more CPU
// per request (BENCHMARKS.md). As the load grows, the Ps come back.
//
// The governor sees only this process's CPU use: if other processes keep
// the CPUs so busy that it cannot reach Busy on one P, it stays at one.
package procs

import (
	"context"
	"runtime"
	"time"
)

const (
	// Interval is how often Run measures the process's CPU use and
	// decides.
	Interval = 100 * time.Millisecond

	// Busy is the CPU use per P, in CPUs, at or over which the governor
	// adds Ps, and under which (per P, for one P fewer) it takes one away.
	Busy = 0.85

	// Hold is how many intervals in succession the CPU use must fit one P
	// fewer before the governor takes one away: Ps come back at once and
	// go slowly.
	Hold = 10
)

// Governor decides the number of Ps from the CPU use of each interval.
type Governor struct {
	max, n, low int
}

// NewGovernor returns a governor of at most limit Ps (at least one) that
// starts at limit.
func NewGovernor(limit int) *Governor {
	limit = max(limit, 1)
	return &Governor{max: limit, n: limit}
}

// Procs returns the number of Ps the governor has decided on.
func (g *Governor) Procs() int { return g.n }

// Next takes the CPU use of the last interval, in CPUs (CPU time over wall
// time), and returns the number of Ps for the next one. At or over Busy
// per P, the number doubles, up to the maximum. Under Busy per P for one P
// fewer, Hold intervals in succession, it goes down by one.
func (g *Governor) Next(cpus float64) int {
	switch {
	case cpus >= Busy*float64(g.n) && g.n < g.max:
		g.n, g.low = min(2*g.n, g.max), 0
	case g.n > 1 && cpus < Busy*float64(g.n-1):
		g.low++
		if g.low >= Hold {
			g.n, g.low = g.n-1, 0
		}
	default:
		g.low = 0
	}
	return g.n
}

// Run governs GOMAXPROCS until ctx is done: from the runtime's default down
// to one and back. It is for a process that runs with the default (no
// GOMAXPROCS variable, no call of runtime.GOMAXPROCS), and one Run at a
// time. At the end it puts the default back (runtime.SetDefaultGOMAXPROCS),
// which the runtime then again keeps up to date with the CPU limit; while it
// runs, the maximum is the default at the start. Where the process's CPU
// time is not known (not a Unix system), it does nothing.
func Run(ctx context.Context) {
	if _, ok := cpuTime(); !ok {
		return
	}
	defer runtime.SetDefaultGOMAXPROCS()
	t := time.NewTicker(Interval)
	defer t.Stop()
	sample := func() (time.Time, time.Duration) {
		cpu, _ := cpuTime()
		return time.Now(), cpu
	}
	run(ctx, NewGovernor(runtime.GOMAXPROCS(0)), t.C, sample, func(n int) { runtime.GOMAXPROCS(n) })
}

// run is Run with its ticks, its clock and CPU time (sample, read together
// when a tick has been received, not at the time the tick was due: a
// busy process can be late to it) and its GOMAXPROCS setter as arguments.
func run(ctx context.Context, g *Governor, tick <-chan time.Time, sample func() (time.Time, time.Duration), set func(int)) {
	var last time.Time
	var lastCPU time.Duration
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			now, cpu := sample()
			if !last.IsZero() && now.After(last) {
				from := g.Procs()
				if to := g.Next((cpu - lastCPU).Seconds() / now.Sub(last).Seconds()); to != from {
					set(to)
				}
			}
			last, lastCPU = now, cpu
		}
	}
}
