// SPDX-License-Identifier: Apache-2.0

package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/storetest"
)

// TestZeroStore: every exported method of the zero Store answers without
// panicking (Take dereferenced the nil wrapped store and clock): Stats is
// zero, and a Limiter over it refuses, fail-open too.
func TestZeroStore(t *testing.T) {
	ctx := context.Background()
	p := sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 10, Period: time.Second}
	storetest.ZeroStore(t, map[string]func(s *lease.Store) error{
		"Stats": func(s *lease.Store) error {
			if st := s.Stats(p); st != (lease.Stats{}) {
				t.Errorf("Stats = %+v, want zero", st)
			}
			return nil
		},
		"ReleasePolicy": func(s *lease.Store) error { return s.ReleasePolicy(ctx, p) },
		"ReleaseAll":    func(s *lease.Store) error { return s.ReleaseAll(ctx) },
	}, "Stats")
}
