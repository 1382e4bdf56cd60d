// SPDX-License-Identifier: Apache-2.0

package inflight_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/memstore"
)

// TestNilOption: a nil Option is no option (New panicked on it).
func TestNilOption(t *testing.T) {
	if _, err := inflight.New(failing{}, "api", 5, nil); err != nil {
		t.Fatal(err)
	}
}

// TestZeroLimiter: the zero Limiter and a nil *Limiter refuse with an
// error (they panicked in Acquire).
func TestZeroLimiter(t *testing.T) {
	var zero inflight.Limiter
	var nilLimiter *inflight.Limiter
	for name, f := range map[string]*inflight.Limiter{"zero": &zero, "nil": nilLimiter} {
		h, s, err := f.Acquire(context.Background(), "k", true)
		if h != nil || s.Acquired || err == nil {
			t.Errorf("%s Limiter: Acquire = %v, %+v, %v; want refused with an error", name, h, s, err)
		}
	}
}

// TestZeroConcurrency: the zero Concurrency and a nil *Concurrency refuse
// at once (Acquire panicked on the zero one's nil map; with a map it
// would have waited forever for one of its zero slots).
func TestZeroConcurrency(t *testing.T) {
	var zero inflight.Concurrency
	var nilConcurrency *inflight.Concurrency
	for name, c := range map[string]*inflight.Concurrency{"zero": &zero, "nil": nilConcurrency} {
		if release, err := c.Acquire(context.Background(), "k"); release != nil || err == nil {
			t.Errorf("%s Concurrency: Acquire gave a slot (%v)", name, err)
		}
		if release, ok := c.TryAcquire("k"); release != nil || ok {
			t.Errorf("%s Concurrency: TryAcquire gave a slot", name)
		}
		if err := c.Do(context.Background(), "k", func() error { t.Errorf("%s Concurrency: Do ran fn", name); return nil }); err == nil {
			t.Errorf("%s Concurrency: Do without an error", name)
		}
	}
}

// TestNilClock: WithClock(nil) keeps time.Now (Acquire panicked calling
// the nil clock).
func TestNilClock(t *testing.T) {
	f, err := inflight.New(memstore.New(), "api", 2, inflight.WithClock(nil))
	if err != nil {
		t.Fatal(err)
	}
	h, _, err := f.Acquire(context.Background(), "k", false)
	if h == nil || err != nil {
		t.Fatalf("Acquire: %v, %v; want a holder", h, err)
	}
	h.Release(context.Background(), false)
}
