// SPDX-License-Identifier: Apache-2.0

package adaptive

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/sluicehq/sluice/inflight"
)

// AIMD is the additive-increase, multiplicative-decrease controller (see
// the package doc for its law). It is safe for concurrent use.
type AIMD struct {
	floor, ceiling float64
	threshold      time.Duration
	backoff        float64
	cooldown       time.Duration

	mu       sync.Mutex
	limit    float64
	lastDrop time.Time
}

var _ inflight.Controller = (*AIMD)(nil)

// AIMDConfig are AIMD's parameters; zero fields take the defaults.
type AIMDConfig struct {
	// Floor and Ceiling bound the limit: 1 ≤ Floor ≤ Ceiling.
	Floor, Ceiling int64
	// Initial is the starting limit (Ceiling unless set).
	Initial int64
	// Threshold is the RTT above which a sample counts as overload.
	// Required.
	Threshold time.Duration
	// Backoff is the factor of a decrease, in (0, 1); default 0.75.
	Backoff float64
	// Cooldown is the least time between two decreases; default 500ms.
	Cooldown time.Duration
}

// NewAIMD returns an AIMD controller, or an error naming the bad field.
func NewAIMD(c AIMDConfig) (*AIMD, error) {
	if err := bounds("adaptive: NewAIMD", c.Floor, c.Ceiling, c.Initial); err != nil {
		return nil, err
	}
	if c.Threshold <= 0 {
		return nil, fmt.Errorf("adaptive: NewAIMD: Threshold %v: must be positive", c.Threshold)
	}
	if c.Backoff == 0 {
		c.Backoff = 0.75
	}
	if !(c.Backoff > 0 && c.Backoff < 1) {
		return nil, fmt.Errorf("adaptive: NewAIMD: Backoff %v: must be in (0, 1)", c.Backoff)
	}
	if c.Cooldown == 0 {
		c.Cooldown = 500 * time.Millisecond
	}
	if c.Cooldown < 0 {
		return nil, fmt.Errorf("adaptive: NewAIMD: Cooldown %v: must not be negative", c.Cooldown)
	}
	if c.Initial == 0 {
		c.Initial = c.Ceiling
	}
	return &AIMD{
		floor: float64(c.Floor), ceiling: float64(c.Ceiling), threshold: c.Threshold,
		backoff: c.Backoff, cooldown: c.Cooldown, limit: float64(c.Initial),
	}, nil
}

// Limit implements inflight.Controller.
func (a *AIMD) Limit() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return max(int64(a.limit), 1)
}

// Observe implements inflight.Controller.
func (a *AIMD) Observe(s inflight.Sample) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s.Dropped || s.RTT > a.threshold {
		if a.lastDrop.IsZero() || apart(s.At, a.lastDrop) >= a.cooldown {
			a.limit = max(a.floor, a.limit*a.backoff)
			a.lastDrop = s.At
		}
		return
	}
	if s.RTT <= 0 {
		return // no latency measured: no evidence of health
	}
	if float64(s.InFlight) >= a.limit/2 {
		a.limit = min(a.ceiling, a.limit+1/a.limit)
	}
}

// apart is the time between two readings of a clock, either way round:
// a clock that steps back must not stop a controller (a sample earlier than
// the reference is as far from it as a later one), and readings that reach
// a controller slightly out of order (concurrent releases) stay close.
func apart(t, ref time.Time) time.Duration {
	d := t.Sub(ref)
	if d < 0 {
		d = -d
	}
	if d < 0 { // -minDuration overflows
		d = math.MaxInt64
	}
	return d
}

// bounds checks a floor, ceiling and initial limit.
func bounds(where string, floor, ceiling, initial int64) error {
	switch {
	case floor < 1:
		return fmt.Errorf("%s: Floor %d: must be at least 1", where, floor)
	case ceiling < floor:
		return fmt.Errorf("%s: Ceiling %d: must be at least Floor %d", where, ceiling, floor)
	case ceiling > math.MaxInt32:
		return fmt.Errorf("%s: Ceiling %d: must be at most %d", where, ceiling, math.MaxInt32)
	case initial != 0 && (initial < floor || initial > ceiling):
		return fmt.Errorf("%s: Initial %d: must be in [Floor %d, Ceiling %d]", where, initial, floor, ceiling)
	}
	return nil
}
