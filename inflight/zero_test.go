// SPDX-License-Identifier: Apache-2.0

package inflight_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/inflight"
)

// TestNilAndZeroValuesAreSafe: no method of a nil or zero Concurrency,
// Limiter or Holder panics. A nil or zero Concurrency has no slots (Limit
// and InFlight answer 0) and refuses every request; a nil or zero Limiter
// answers zero values and its Acquire refuses with an error; a nil or zero
// Holder holds nothing and its methods do nothing.
func TestNilAndZeroValuesAreSafe(t *testing.T) {
	ctx := context.Background()
	safe := func(what string, call func() bool) {
		t.Helper()
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("%s panicked: %v", what, p)
			}
		}()
		if !call() {
			t.Errorf("%s: not the zero answer", what)
		}
	}
	for name, c := range map[string]*inflight.Concurrency{"nil": nil, "zero": {}} {
		safe(name+" Concurrency: Limit", func() bool { return c.Limit() == 0 })
		safe(name+" Concurrency: InFlight", func() bool { return c.InFlight("k") == 0 })
		safe(name+" Concurrency: TryAcquire", func() bool { r, ok := c.TryAcquire("k"); return r == nil && !ok })
		safe(name+" Concurrency: Acquire", func() bool { r, err := c.Acquire(ctx, "k"); return r == nil && err != nil })
		safe(name+" Concurrency: Do", func() bool {
			ran := false
			err := c.Do(ctx, "k", func() error { ran = true; return nil })
			return err != nil && !ran
		})
	}
	for name, f := range map[string]*inflight.Limiter{"nil": nil, "zero": {}} {
		safe(name+" Limiter: Name", func() bool { return f.Name() == "" })
		safe(name+" Limiter: Limit", func() bool { return f.Limit() == 0 })
		safe(name+" Limiter: LimitFor", func() bool { return f.LimitFor(false) == 0 && f.LimitFor(true) == 0 })
		safe(name+" Limiter: Reserved", func() bool { return f.Reserved(10) == 0 })
		safe(name+" Limiter: Adaptive", func() bool { return !f.Adaptive() })
		safe(name+" Limiter: TTL", func() bool { return f.TTL() == 0 })
		safe(name+" Limiter: FailureMode", func() bool { return f.FailureMode() == sluice.FailOpen })
		safe(name+" Limiter: Acquire", func() bool { h, _, err := f.Acquire(ctx, "k", false); return h == nil && err != nil })
	}
	for name, h := range map[string]*inflight.Holder{"nil": nil, "zero": {}} {
		safe(name+" Holder: ID", func() bool { return h.ID() == "" })
		safe(name+" Holder: Extend", func() bool { ok, err := h.Extend(ctx); return !ok && err == nil })
		safe(name+" Holder: KeepAlive", func() bool { h.KeepAlive(ctx); return true })
		safe(name+" Holder: Release", func() bool { return h.Release(ctx, false) == nil })
		safe(name+" Holder: Cancel", func() bool { return h.Cancel(ctx) == nil })
	}
}
