// SPDX-License-Identifier: Apache-2.0

package sluice

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/calendar"
	"github.com/sluicehq/sluice/internal/emission"
)

// Algorithm names a rate-limiting algorithm. The names are the ones used in
// configuration files, on the command line and in Redis keys.
type Algorithm string

// The algorithms. Their exact semantics are in the package documentation.
const (
	TokenBucket   Algorithm = "token-bucket"
	GCRA          Algorithm = "gcra"
	LeakyBucket   Algorithm = "leaky-bucket"
	FixedWindow   Algorithm = "fixed-window"
	SlidingLog    Algorithm = "sliding-log"
	SlidingWindow Algorithm = "sliding-window"
)

// algorithms is every algorithm, in the order the documentation presents them.
var algorithms = [...]Algorithm{TokenBucket, GCRA, LeakyBucket, FixedWindow, SlidingLog, SlidingWindow}

// Algorithms returns every algorithm, in the order the documentation
// presents them. The slice is a fresh copy: changing it changes nothing else.
func Algorithms() []Algorithm {
	out := algorithms
	return out[:]
}

// ParseAlgorithm returns the algorithm with the given name.
func ParseAlgorithm(name string) (Algorithm, error) {
	for _, a := range algorithms {
		if string(a) == name {
			return a, nil
		}
	}
	return "", fmt.Errorf("sluice: unknown algorithm %q (want one of token-bucket, gcra, leaky-bucket, fixed-window, sliding-log, sliding-window)", name)
}

// IsBucket reports whether a uses a burst: token-bucket, gcra and leaky-bucket.
func (a Algorithm) IsBucket() bool {
	return a == TokenBucket || a == GCRA || a == LeakyBucket
}

// Limits on policy parameters. They keep every intermediate value of the
// models' integer arithmetic inside int64 (and the 128-bit products the models
// use inside 128 bits), so no input can overflow.
const (
	// MaxLimit is the largest Limit and Burst.
	MaxLimit = 1 << 62
	// MaxPeriod is the longest Period, and the longest a full bucket may
	// take to drain (Burst × Period / Limit): about 36 years. (The latest
	// instant the models accept is model.MaxTime.)
	MaxPeriod = time.Duration(1 << 60)
)

// Policy is an algorithm with its parameters: Limit units per Period, and for
// the bucket kinds a Burst.
//
// Policies with the same non-empty Name and Algorithm share their per-key
// state in a Store, so a policy can be reconfigured (a new Limit, say)
// without forgetting who is being limited: the stored state is read with the
// new parameters (a bucket's TAT stays where it was, rounded up to the new
// emission interval's sub-nanosecond grid so that it never moves earlier).
// Unnamed policies share state only with identical policies.
type Policy struct {
	// Name identifies the policy in a store, in Redis keys, in metrics and in
	// response headers. Optional.
	Name string
	// Algorithm is one of the Algorithm constants.
	Algorithm Algorithm
	// Limit is the number of units admitted per Period (the refill or drain
	// rate of the bucket kinds, the quota of the window kinds). At least 1.
	Limit int64
	// Period is the length of the window, or the time over which a bucket
	// refills Limit units. Positive.
	Period time.Duration
	// Burst is the capacity of the bucket kinds (for leaky-bucket: the queue
	// size). Zero means Limit. It must be zero for the window kinds.
	Burst int64
	// Calendar, if set, aligns the windows of fixed-window and
	// sliding-window to calendar days, weeks, months or years in a time
	// zone; Period must then be the unit's nominal length
	// (calendar.Unit.Nominal). The zero Calendar keeps windows Period long.
	Calendar calendar.Calendar
}

// Capacity returns the most units one request can ever be admitted for, the
// one capacity rule every part of sluice uses: Burst for the bucket kinds
// (Limit when Burst is 0) and Limit for the window kinds.
func (p Policy) Capacity() int64 {
	if p.Algorithm.IsBucket() && p.Burst != 0 {
		return p.Burst
	}
	return p.Limit
}

// Validate reports the first problem with p, naming the field and its value.
func (p Policy) Validate() error {
	if _, err := ParseAlgorithm(string(p.Algorithm)); err != nil {
		return fmt.Errorf("sluice: policy %q: algorithm: %w", p.Name, err)
	}
	if p.Limit < 1 || p.Limit > MaxLimit {
		return fmt.Errorf("sluice: policy %q: limit %d: must be between 1 and %d", p.Name, p.Limit, int64(MaxLimit))
	}
	if p.Period <= 0 || p.Period > MaxPeriod {
		return fmt.Errorf("sluice: policy %q: period %v: must be positive and at most %v", p.Name, p.Period, MaxPeriod)
	}
	if err := p.validateCalendar(); err != nil {
		return fmt.Errorf("sluice: policy %q: %w", p.Name, err)
	}
	if !p.Algorithm.IsBucket() {
		if p.Burst != 0 {
			return fmt.Errorf("sluice: policy %q: burst %d: %s has no burst (leave it 0)", p.Name, p.Burst, p.Algorithm)
		}
		return nil
	}
	if p.Burst < 0 || p.Burst > MaxLimit {
		return fmt.Errorf("sluice: policy %q: burst %d: must be between 1 and %d (0 means the limit)", p.Name, p.Burst, int64(MaxLimit))
	}
	if emission.Span(p.Capacity(), p.Limit, p.Period) > MaxPeriod {
		return fmt.Errorf("sluice: policy %q: burst %d with limit %d per %v: a full bucket would take longer than %v to drain", p.Name, p.Capacity(), p.Limit, p.Period, MaxPeriod)
	}
	return nil
}

// String formats p as "name: algorithm limit/period burst B".
func (p Policy) String() string {
	s := fmt.Sprintf("%s %d/%v", p.Algorithm, p.Limit, p.Period)
	if p.Algorithm.IsBucket() {
		s += fmt.Sprintf(" burst %d", p.Capacity())
	}
	if p.Calendar.Unit != 0 {
		s += " calendar " + p.Calendar.String()
	}
	if p.Name != "" {
		s = p.Name + ": " + s
	}
	return s
}

// validateCalendar checks p.Calendar, and that it suits p: a window kind
// whose Period is the calendar unit's nominal length.
func (p Policy) validateCalendar() error {
	c := p.Calendar
	if err := c.Validate(); err != nil || c.Unit == 0 {
		return err
	}
	if p.Algorithm != FixedWindow && p.Algorithm != SlidingWindow {
		return fmt.Errorf("calendar %s: %s has no windows to align (calendar periods are for fixed-window and sliding-window)", c.Unit, p.Algorithm)
	}
	if p.Period != c.Unit.Nominal() {
		return fmt.Errorf("period %v: a calendar %s's period must be its nominal length, %v", p.Period, c.Unit, c.Unit.Nominal())
	}
	return nil
}

// within returns p as a check of cost c with MaxDelay d decides it
// (Check.MaxDelay): for leaky-bucket, with the burst emission.Burst gives.
func (p Policy) within(d time.Duration, c int64) (Policy, error) {
	b, c := p.Capacity(), max(c, 1)
	if d == 0 || p.Algorithm != LeakyBucket || c >= b {
		return p, nil
	}
	if p.Name == "" {
		return Policy{}, fmt.Errorf("policy (no Name) %v: MaxDelay %v: an unnamed policy shares its state only with identical ones; name it to bound its delay", p, d)
	}
	p.Burst = emission.Burst(b, p.Limit, p.Period, d, c)
	return p, nil
}
