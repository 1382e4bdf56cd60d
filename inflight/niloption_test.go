// SPDX-License-Identifier: Apache-2.0

package inflight_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/inflight"
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
