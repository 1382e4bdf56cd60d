// SPDX-License-Identifier: Apache-2.0

package memstore_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/storetest"
)

// TestSemaphoreConformance runs the in-flight suite on memstore.
func TestSemaphoreConformance(t *testing.T) {
	storetest.RunSemaphore(t, func(t *testing.T) storetest.SemaphoreHarness {
		clock := sluicetest.NewClock(time.Unix(0, 0))
		s := memstore.New(memstore.WithClock(clock))
		t.Cleanup(func() { s.Close() })
		return storetest.SemaphoreHarness{
			Semaphore: s,
			Clock:     clock,
			Len:       func() int { s.Sweep(); return s.Semaphores() },
		}
	})
}
