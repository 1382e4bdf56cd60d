// SPDX-License-Identifier: Apache-2.0

package lease_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
)

// TestZeroStore: every exported method of the zero Store answers without
// panicking (Take dereferenced the nil wrapped store and clock): those
// with an error fail with one wrapping sluice.ErrStoreClosed, Stats is
// zero and Close does nothing. A Limiter over it refuses, fail-open too.
func TestZeroStore(t *testing.T) {
	ctx := context.Background()
	p := sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 10, Period: time.Second}
	reqs := []sluice.Request{{Policy: p, Key: "k", Cost: 1}}
	// Each call returns the method's error (nil for one without).
	calls := map[string]func(s *lease.Store) error{
		"Take": func(s *lease.Store) error {
			d, err := s.Take(ctx, p, "k", 1)
			if d.Allowed {
				t.Errorf("Take admitted: %+v", d)
			}
			return err
		},
		"TakeAll": func(s *lease.Store) error { return s.TakeAll(ctx, reqs, make([]sluice.Decision, 1)) },
		"Reset":   func(s *lease.Store) error { return s.Reset(ctx, p, "k") },
		"Bind": func(s *lease.Store) error {
			_, err := s.Bind(p)
			return err
		},
		"Stats": func(s *lease.Store) error {
			if st := s.Stats(p); st != (lease.Stats{}) {
				t.Errorf("Stats = %+v, want zero", st)
			}
			return nil
		},
		"Release":    func(s *lease.Store) error { return s.Release(ctx, p) },
		"ReleaseAll": func(s *lease.Store) error { return s.ReleaseAll(ctx) },
		"Close":      func(s *lease.Store) error { return s.Close() },
	}
	noError := []string{"Stats", "Close"}
	typ := reflect.TypeFor[*lease.Store]()
	for i := range typ.NumMethod() {
		if name := typ.Method(i).Name; calls[name] == nil {
			t.Errorf("method %s is not in the table", name)
		}
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			var s lease.Store
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("%s on the zero Store panicked: %v", name, r)
					}
				}()
				err = call(&s)
			}()
			if slices.Contains(noError, name) {
				if err != nil {
					t.Errorf("%s: %v, want nil", name, err)
				}
			} else if !errors.Is(err, sluice.ErrStoreClosed) {
				t.Errorf("%s: %v, want an error wrapping sluice.ErrStoreClosed", name, err)
			}
		})
	}
	var s lease.Store
	l, err := sluice.NewLimiter(&s, p, sluice.WithFailureMode(sluice.FailOpen))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := l.Allow(ctx, "k"); d.Allowed || !errors.Is(err, sluice.ErrStoreClosed) {
		t.Errorf("a fail-open Limiter over the zero Store: %+v, %v; want refused with sluice.ErrStoreClosed", d, err)
	}
}
