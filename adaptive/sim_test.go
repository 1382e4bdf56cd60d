// SPDX-License-Identifier: Apache-2.0

package adaptive

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/inflight"
)

// The simulated backend: Workers requests served at once, first come first
// served, each taking Service (±20%, a seeded draw); the rest queue. Clients
// send Rate requests per second, evenly spaced, and give up after Timeout:
// an answer later than that is no use to them (and counts as Dropped). A
// request is sent only if this process has fewer than the limit in flight;
// otherwise it is shed at once. Between FaultStart and FaultEnd the service
// time is Slowdown times longer. Time is virtual, in 1 ms steps.
type backend struct {
	Workers    int
	Service    time.Duration
	Rate       int // requests per second
	Timeout    time.Duration
	Slowdown   int
	FaultStart time.Duration
	FaultEnd   time.Duration
	Length     time.Duration
}

var faultScenario = backend{
	Workers: 50, Service: 100 * time.Millisecond, Rate: 450, Timeout: time.Second,
	Slowdown: 5, FaultStart: 20 * time.Second, FaultEnd: 40 * time.Second, Length: 80 * time.Second,
}

// simResult is what one run of the simulation saw.
type simResult struct {
	limit       []int64 // the limit at every millisecond
	goodFault   int     // answers within Timeout completed during the fault
	goodBefore  int     // ... in the 10 s before it
	shedFault   int     // requests shed during the fault
	lateFault   int     // answers later than Timeout, completed during the fault
	lowest      int64
	highest     int64
	faultLength time.Duration
}

// fixed is a Controller whose limit never moves.
type fixed int64

func (f fixed) Limit() int64            { return int64(f) }
func (fixed) Observe(s inflight.Sample) {}

func (b backend) run(c inflight.Controller) simResult {
	const step = time.Millisecond
	t0 := time.Unix(0, 0)
	rng := rand.New(rand.NewPCG(1, 2))
	type req struct {
		sent     time.Duration
		inflight int64
	}
	var (
		queue   []req
		busy    = make([]time.Duration, b.Workers) // when each worker is free; -1 idle
		serving = make([]req, b.Workers)
		open    int64
		credit  int
		res     = simResult{lowest: 1 << 62, faultLength: b.FaultEnd - b.FaultStart}
	)
	for i := range busy {
		busy[i] = -1
	}
	inFault := func(t time.Duration) bool { return t >= b.FaultStart && t < b.FaultEnd }
	for t := time.Duration(0); t < b.Length; t += step {
		for i, until := range busy {
			if until < 0 || until > t {
				continue
			}
			r := serving[i]
			busy[i] = -1
			open--
			rtt := t - r.sent
			late := rtt > b.Timeout
			c.Observe(inflight.Sample{At: t0.Add(t), RTT: rtt, InFlight: r.inflight, Dropped: late})
			switch {
			case inFault(t) && late:
				res.lateFault++
			case inFault(t):
				res.goodFault++
			case !late && t >= b.FaultStart-10*time.Second && t < b.FaultStart:
				res.goodBefore++
			}
		}
		credit += b.Rate
		for ; credit >= 1000; credit -= 1000 {
			if open >= c.Limit() {
				if inFault(t) {
					res.shedFault++
				}
				continue
			}
			open++
			queue = append(queue, req{sent: t, inflight: open})
		}
		for i := range busy {
			if busy[i] >= 0 || len(queue) == 0 {
				continue
			}
			serving[i], queue = queue[0], queue[1:]
			s := b.Service
			if inFault(t) {
				s *= time.Duration(b.Slowdown)
			}
			s = s * time.Duration(80+rng.IntN(41)) / 100
			busy[i] = t + max(s, step)
		}
		l := c.Limit()
		res.limit = append(res.limit, l)
		res.lowest, res.highest = min(res.lowest, l), max(res.highest, l)
	}
	return res
}

// at returns the limit at virtual time t.
func (r simResult) at(t time.Duration) int64 { return r.limit[t/time.Millisecond] }

// checkFault asserts the adaptive contract on a run: the limit stays in
// [floor, ceiling]; within 5 s of the 5× slowdown it falls to at most half
// of its value when the fault began; within 30 s of the fault's end it is
// back to at least 80% of that value.
func checkFault(t *testing.T, b backend, r simResult, floor, ceiling int64) {
	t.Helper()
	if r.lowest < floor || r.highest > ceiling {
		t.Errorf("limit ranged over [%d, %d], outside [%d, %d]", r.lowest, r.highest, floor, ceiling)
	}
	before := r.at(b.FaultStart - time.Millisecond)
	fell := time.Duration(-1)
	for d := time.Duration(0); d <= 5*time.Second; d += time.Millisecond {
		if 2*r.at(b.FaultStart+d) <= before {
			fell = d
			break
		}
	}
	if fell < 0 {
		t.Errorf("limit %d when the fault began; 5 s later %d: did not fall to half", before, r.at(b.FaultStart+5*time.Second))
	}
	back := time.Duration(-1)
	for d := time.Duration(0); d <= 30*time.Second && b.FaultEnd+d < b.Length; d += time.Millisecond {
		if 10*r.at(b.FaultEnd+d) >= 8*before {
			back = d
			break
		}
	}
	if back < 0 {
		t.Errorf("limit %d before the fault; 30 s after it ended %d: not back to 80%%", before, r.at(b.FaultEnd+30*time.Second))
	}
	t.Logf("limit %d before the fault, halved after %v, lowest %d, back to 80%% %v after it ended", before, fell, r.lowest, back)
}

func newTestAIMD(t *testing.T) *AIMD {
	a, err := NewAIMD(AIMDConfig{Floor: 5, Ceiling: 200, Initial: 20, Threshold: 700 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func newTestGradient(t *testing.T) *Gradient {
	g, err := NewGradient(GradientConfig{Floor: 5, Ceiling: 200, Initial: 20})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestAIMDFault(t *testing.T) {
	checkFault(t, faultScenario, faultScenario.run(newTestAIMD(t)), 5, 200)
}

func TestGradientFault(t *testing.T) {
	checkFault(t, faultScenario, faultScenario.run(newTestGradient(t)), 5, 200)
}

// TestFaultGoodput is the comparison in BENCHMARKS.md: goodput (answers
// within the clients' timeout, per second) during the fault under each
// controller and under fixed limits. It asserts that both adaptive
// controllers beat the fixed limit at the ceiling.
func TestFaultGoodput(t *testing.T) {
	b := faultScenario
	rows := []struct {
		name string
		c    inflight.Controller
	}{
		{"fixed 200 (the ceiling)", fixed(200)},
		{"fixed 60", fixed(60)},
		{"aimd [5, 200]", newTestAIMD(t)},
		{"gradient [5, 200]", newTestGradient(t)},
	}
	var out strings.Builder
	fmt.Fprintf(&out, "%-24s %12s %12s %10s %10s %8s\n", "limit", "good/s before", "good/s fault", "late/s", "shed/s", "lowest")
	secs := (b.FaultEnd - b.FaultStart).Seconds()
	good := map[string]float64{}
	for _, row := range rows {
		r := b.run(row.c)
		good[row.name] = float64(r.goodFault) / secs
		fmt.Fprintf(&out, "%-24s %12.1f %12.1f %10.1f %10.1f %8d\n", row.name, float64(r.goodBefore)/10, float64(r.goodFault)/secs,
			float64(r.lateFault)/secs, float64(r.shedFault)/secs, r.lowest)
	}
	t.Logf("backend: %d workers, %v per request (±20%%), %d requests/s, timeout %v; 5× slower from %v to %v\n%s",
		b.Workers, b.Service, b.Rate, b.Timeout, b.FaultStart, b.FaultEnd, out.String())
	for _, name := range []string{"aimd [5, 200]", "gradient [5, 200]"} {
		if good[name] <= good["fixed 200 (the ceiling)"] {
			t.Errorf("%s: goodput %.1f/s during the fault, not above the fixed ceiling's %.1f/s", name, good[name], good["fixed 200 (the ceiling)"])
		}
	}
}
