// SPDX-License-Identifier: Apache-2.0

// Package simulate shows what a rate-limiting policy does to traffic: it
// runs requests through the exact model (a memstore on a manual clock) and
// draws the admitted, refused and delayed requests and the limiter's state
// over time as an SVG picture. It is the engine of sluice simulate and of
// the live page's burst panel.
//
// Traffic is a list of requests, from a replay trace (ReadTrace) or from a
// small pattern language (ParsePattern): "burst 6 at 0, then 1 every 100ms
// for 2s".
//
// The state drawn is the first key's: for token-bucket and gcra the whole
// tokens in the bucket (Decision.Remaining), for leaky-bucket the units in
// the queue (burst − Remaining), for the window kinds the units counted
// against the limit (limit − Remaining). It is sampled with cost-0 peeks,
// which change nothing, at Samples evenly spaced instants and just after
// every request.
//
// WriteSVG writes well-formed XML 1.0 whatever the keys, title and
// description hold: bytes that are not valid UTF-8, and characters XML 1.0
// does not allow (the C0 controls other than tab, newline and carriage
// return, the surrogates, U+FFFE and U+FFFF), are drawn as U+FFFD.
package simulate

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/replay"
)

// Request is one request of the traffic: its offset from the start (the
// Unix epoch, a window boundary for every period), key and cost.
type Request struct {
	At   time.Duration
	Key  string
	Cost int64
}

// Step is one request and the decision it got.
type Step struct {
	Request
	Decision sluice.Decision
}

// Sample is the state of the first key at one instant.
type Sample struct {
	At    time.Duration
	Level int64
}

// Result is a simulation.
type Result struct {
	Policy  sluice.Policy
	Steps   []Step
	Samples []Sample
	// Start and End bound the time drawn: by default from 0 to after the
	// last request, long enough to see the state recover; Zoom sets them.
	Start, End time.Duration
	// Desc, if set, is written as the picture's <desc>: how it was made.
	Desc string
}

// Samples is the number of evenly spaced state samples Run takes.
const Samples = 240

// ReadTrace reads a replay trace.
func ReadTrace(r io.Reader) ([]Request, error) {
	tr := replay.NewReader(r)
	var out []Request
	for {
		q, err := tr.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(out) == MaxRequests {
			return nil, fmt.Errorf("trace: more than %d requests", MaxRequests)
		}
		out = append(out, Request{At: q.At, Key: q.Key, Cost: q.Cost})
	}
}

// An Option changes what Run draws.
type Option func(*options)

type options struct{ from, to time.Duration }

// Zoom draws only the time from from to to (every request still runs),
// with the state sampled over that span: to look at a window's edge.
func Zoom(from, to time.Duration) Option {
	return func(o *options) { o.from, o.to = from, to }
}

// Run takes reqs, in time order, from a fresh memstore running p on a
// manual clock, and samples the first key's state.
func Run(ctx context.Context, p sluice.Policy, reqs []Request, opts ...Option) (*Result, error) {
	var o options
	for _, opt := range opts {
		if opt == nil {
			continue // a nil option is no option
		}
		opt(&o)
	}
	if o.from < 0 || o.to != 0 && o.to <= o.from {
		return nil, fmt.Errorf("simulate: zoom from %v to %v: want 0 ≤ from < to", o.from, o.to)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	if len(reqs) == 0 {
		return nil, fmt.Errorf("simulate: no requests")
	}
	if !sort.SliceIsSorted(reqs, func(i, j int) bool { return reqs[i].At < reqs[j].At }) {
		return nil, fmt.Errorf("simulate: requests are not in time order")
	}
	clock := new(replay.Clock)
	store := memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0))
	defer store.Close()
	last := reqs[len(reqs)-1].At
	end := last + max(last/5, p.Period)
	// Draw until the key is idle again if that comes soon enough: a dry
	// run of the same requests finds when.
	if idle, err := idleAt(ctx, p, reqs); err == nil && idle > end && idle <= 3*end {
		end = idle
	}
	start := time.Duration(0)
	if o.to != 0 {
		start, end = o.from, o.to
	}
	r := &Result{Policy: p, Start: start, End: end}
	key := reqs[0].Key
	peek := func(at time.Duration) error {
		clock.Set(time.Unix(0, int64(at)))
		d, err := store.Take(ctx, p, key, 0)
		if err != nil {
			return err
		}
		r.Samples = append(r.Samples, Sample{At: at, Level: level(p, d)})
		return nil
	}
	next := 0 // next sample index
	sampleAt := func(i int) time.Duration { return start + time.Duration(int64(end-start)*int64(i)/Samples) }
	for _, q := range reqs {
		for next <= Samples && sampleAt(next) < q.At {
			if err := peek(sampleAt(next)); err != nil {
				return nil, fmt.Errorf("simulate: %w", err)
			}
			next++
		}
		clock.Set(time.Unix(0, int64(q.At)))
		d, err := store.Take(ctx, p, q.Key, q.Cost)
		if err != nil {
			return nil, fmt.Errorf("simulate: %w", err)
		}
		r.Steps = append(r.Steps, Step{Request: q, Decision: d})
		if q.Key == key && q.At >= start && q.At <= end {
			r.Samples = append(r.Samples, Sample{At: q.At, Level: level(p, d)})
		}
	}
	for ; next <= Samples; next++ {
		if err := peek(sampleAt(next)); err != nil {
			return nil, fmt.Errorf("simulate: %w", err)
		}
	}
	return r, nil
}

// idleAt returns when the last request's key is back to its idle state.
func idleAt(ctx context.Context, p sluice.Policy, reqs []Request) (time.Duration, error) {
	clock := new(replay.Clock)
	store := memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0))
	defer store.Close()
	var idle time.Duration
	for _, q := range reqs {
		clock.Set(time.Unix(0, int64(q.At)))
		d, err := store.Take(ctx, p, q.Key, q.Cost)
		if err != nil {
			return 0, err
		}
		idle = max(idle, q.At+d.ResetAfter)
	}
	return idle, nil
}

// Densest returns the most cost admitted within one period, any window
// (t−P, t] of the policy's period, and the first and last admitted
// request in it: what a boundary attack gets through (twice the limit for
// a fixed window across its edge, the limit for the others).
func (r *Result) Densest() (units int64, from, to time.Duration) {
	var adm []Step
	for _, s := range r.Steps {
		if s.Decision.Allowed {
			adm = append(adm, s)
		}
	}
	var sum int64
	lo := 0
	for _, s := range adm {
		sum += s.Cost
		for adm[lo].At <= s.At-r.Policy.Period {
			sum -= adm[lo].Cost
			lo++
		}
		if sum > units {
			units, from, to = sum, adm[lo].At, s.At
		}
	}
	return units, from, to
}

// Capacity is the most Level can be: the burst for the bucket kinds, the
// limit for the window kinds.
func Capacity(p sluice.Policy) int64 {
	if p.Algorithm.IsBucket() && p.Burst > 0 {
		return p.Burst
	}
	return p.Limit
}

// StateName names what Level measures for p's algorithm.
func StateName(p sluice.Policy) string {
	switch p.Algorithm {
	case sluice.TokenBucket, sluice.GCRA:
		return "tokens in the bucket"
	case sluice.LeakyBucket:
		return "units in the queue"
	}
	return "units counted in the window"
}

func level(p sluice.Policy, d sluice.Decision) int64 {
	switch p.Algorithm {
	case sluice.TokenBucket, sluice.GCRA:
		return d.Remaining
	}
	return max(0, Capacity(p)-d.Remaining)
}

// Counts returns how many requests were admitted without delay, admitted
// with a delay (leaky-bucket) and refused.
func (r *Result) Counts() (admitted, delayed, refused int) {
	for _, s := range r.Steps {
		switch {
		case !s.Decision.Allowed:
			refused++
		case s.Decision.Delay > 0:
			delayed++
		default:
			admitted++
		}
	}
	return
}
