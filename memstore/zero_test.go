// SPDX-License-Identifier: Apache-2.0

package memstore_test

import (
	"testing"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/storetest"
)

// TestZeroStore: every exported method of the zero Store answers without
// panicking (Acquire, Release, Extend and Sweep read its nil clock); a take
// fails with an error wrapping sluice.ErrStoreClosed (it failed with
// sluice.ErrStoreFull, on which a fail-open Limiter admitted); the others
// report nothing held.
func TestZeroStore(t *testing.T) {
	storetest.ZeroStore(t, map[string]func(s *memstore.Store) error{
		"Sweep": func(s *memstore.Store) error { s.Sweep(); return nil },
		"Len": func(s *memstore.Store) error {
			if n := s.Len(); n != 0 {
				t.Errorf("Len = %d, want 0", n)
			}
			return nil
		},
		"Stats": func(s *memstore.Store) error {
			if st := s.Stats(); st != (memstore.Stats{}) {
				t.Errorf("Stats = %+v, want zero", st)
			}
			return nil
		},
		"Semaphores": func(s *memstore.Store) error {
			if n := s.Semaphores(); n != 0 {
				t.Errorf("Semaphores = %d, want 0", n)
			}
			return nil
		},
	}, "Sweep", "Len", "Stats", "Semaphores")
}
