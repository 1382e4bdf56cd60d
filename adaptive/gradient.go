// SPDX-License-Identifier: Apache-2.0

package adaptive

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/sluicehq/sluice/inflight"
)

// Gradient is the gradient controller (see the package doc for its law).
// It is safe for concurrent use.
type Gradient struct {
	floor, ceiling float64
	window         time.Duration
	minSamples     int
	baselineN      float64
	tolerance      float64
	smoothing      float64

	mu       sync.Mutex
	limit    float64
	baseline float64 // ns; 0: none yet
	start    time.Time
	n        int
	sum      float64 // ns
	maxIn    int64
	dropped  bool
}

var _ inflight.Controller = (*Gradient)(nil)

// GradientConfig are Gradient's parameters; zero fields take the defaults.
type GradientConfig struct {
	// Floor and Ceiling bound the limit: 1 ≤ Floor ≤ Ceiling.
	Floor, Ceiling int64
	// Initial is the starting limit (Floor unless set).
	Initial int64
	// Window is the least length of a sampling window; default 250ms.
	Window time.Duration
	// MinSamples is the fewest samples a window needs; default 10.
	MinSamples int
	// BaselineWindows is how many windows the baseline takes to follow a
	// lasting rise of latency; default 40.
	BaselineWindows int
	// Tolerance is how much latency above the baseline is tolerated before
	// the limit falls, ≥ 1; default 1.5.
	Tolerance float64
	// Smoothing is the weight of each window's new limit, in (0, 1];
	// default 0.2.
	Smoothing float64
}

// NewGradient returns a gradient controller, or an error naming the bad
// field.
func NewGradient(c GradientConfig) (*Gradient, error) {
	if err := bounds("adaptive: NewGradient", c.Floor, c.Ceiling, c.Initial); err != nil {
		return nil, err
	}
	if c.Initial == 0 {
		c.Initial = c.Floor
	}
	if c.Window == 0 {
		c.Window = 250 * time.Millisecond
	}
	if c.MinSamples == 0 {
		c.MinSamples = 10
	}
	if c.BaselineWindows == 0 {
		c.BaselineWindows = 40
	}
	if c.Tolerance == 0 {
		c.Tolerance = 1.5
	}
	if c.Smoothing == 0 {
		c.Smoothing = 0.2
	}
	switch {
	case c.Window < 0:
		return nil, fmt.Errorf("adaptive: NewGradient: Window %v: must be positive", c.Window)
	case c.MinSamples < 1:
		return nil, fmt.Errorf("adaptive: NewGradient: MinSamples %d: must be at least 1", c.MinSamples)
	case c.BaselineWindows < 1:
		return nil, fmt.Errorf("adaptive: NewGradient: BaselineWindows %d: must be at least 1", c.BaselineWindows)
	case !(c.Tolerance >= 1):
		return nil, fmt.Errorf("adaptive: NewGradient: Tolerance %v: must be at least 1", c.Tolerance)
	case !(c.Smoothing > 0 && c.Smoothing <= 1):
		return nil, fmt.Errorf("adaptive: NewGradient: Smoothing %v: must be in (0, 1]", c.Smoothing)
	}
	return &Gradient{
		floor: float64(c.Floor), ceiling: float64(c.Ceiling), window: c.Window,
		minSamples: c.MinSamples, baselineN: float64(c.BaselineWindows),
		tolerance: c.Tolerance, smoothing: c.Smoothing, limit: float64(c.Initial),
	}, nil
}

// Limit implements inflight.Controller.
func (g *Gradient) Limit() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return max(int64(g.limit), 1)
}

// Observe implements inflight.Controller.
func (g *Gradient) Observe(s inflight.Sample) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s.RTT <= 0 {
		// No latency measured (the clock stepped back, or did not
		// move, while the request ran): it must not become the baseline
		// nor count in the window. Its drop counts.
		g.dropped = g.dropped || s.Dropped
		return
	}
	if g.n == 0 {
		g.start = s.At
	}
	g.n++
	g.sum += float64(s.RTT)
	g.maxIn = max(g.maxIn, s.InFlight)
	g.dropped = g.dropped || s.Dropped
	if g.n < g.minSamples || apart(s.At, g.start) < g.window {
		return
	}
	mean := max(g.sum/float64(g.n), 1)
	switch {
	case g.baseline == 0 || mean < g.baseline:
		g.baseline = mean
	default:
		g.baseline += (mean - g.baseline) / g.baselineN
	}
	grad := min(max(g.tolerance*g.baseline/mean, 0.5), 1)
	if g.dropped {
		grad = 0.5
	}
	next := g.limit*grad + math.Sqrt(g.limit)
	if float64(g.maxIn) < g.limit/2 {
		next = min(next, g.limit)
	}
	g.limit = min(max(g.limit*(1-g.smoothing)+next*g.smoothing, g.floor), g.ceiling)
	g.n, g.sum, g.maxIn, g.dropped = 0, 0, 0, false
}
