// SPDX-License-Identifier: Apache-2.0

package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// testContract checks the Store contract beyond the decisions: Reset
// forgets a key (and resetting an unknown key is no error), and after
// Close every method returns an error that is sluice.ErrStoreClosed (and
// Close may be called again).
func testContract(t *testing.T, newHarness func(t *testing.T) Harness) {
	ctx := context.Background()
	p := sluice.Policy{Name: "contract", Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Hour}
	h := newHarness(t)
	h.Clock.Set(time.Unix(3_000_000, 0))
	s := h.Store
	if d, err := s.Take(ctx, p, "k", 1); err != nil || !d.Allowed {
		t.Fatalf("first take: %+v %v", d, err)
	}
	if d, err := s.Take(ctx, p, "k", 1); err != nil || d.Allowed {
		t.Fatalf("second take at 1/hour: %+v %v, want refused", d, err)
	}
	if err := s.Reset(ctx, p, "k"); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if err := s.Reset(ctx, p, "never-seen"); err != nil {
		t.Errorf("Reset of a key with no state: %v, want nil", err)
	}
	if d, err := s.Take(ctx, p, "k", 1); err != nil || !d.Allowed {
		t.Errorf("take after Reset: %+v %v, want admitted (Reset forgets the key)", d, err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := s.Take(ctx, p, "k", 1); !errors.Is(err, sluice.ErrStoreClosed) {
		t.Errorf("Take after Close: %v, want sluice.ErrStoreClosed", err)
	}
	out := make([]sluice.Decision, 1)
	if err := s.TakeAll(ctx, []sluice.Request{{Policy: p, Key: "k", Cost: 1}}, out); !errors.Is(err, sluice.ErrStoreClosed) {
		t.Errorf("TakeAll after Close: %v, want sluice.ErrStoreClosed", err)
	}
	if err := s.Reset(ctx, p, "k"); !errors.Is(err, sluice.ErrStoreClosed) {
		t.Errorf("Reset after Close: %v, want sluice.ErrStoreClosed", err)
	}
	if err := s.Close(); err != nil && !errors.Is(err, sluice.ErrStoreClosed) {
		t.Errorf("a second Close: %v", err)
	}
}
