// SPDX-License-Identifier: Apache-2.0

package memstore_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/storetest"
)

// TestConformance runs the storetest suite: memstore gives the models'
// decisions, forgets keys exactly when they expire, and is atomic.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		clock := sluicetest.NewClock(time.Unix(0, 0))
		s := memstore.New(memstore.WithClock(clock))
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return storetest.Harness{
			Store: s,
			Clock: clock,
			Len:   func() int { s.Sweep(); return s.Len() },
		}
	})
}

// TestLeases runs the lease oracle over memstore: three leasing replicas
// never admit what the exact model refuses.
func TestLeases(t *testing.T) {
	storetest.Leases(t, func(t *testing.T) storetest.Harness {
		clock := sluicetest.NewClock(time.Unix(0, 0))
		s := memstore.New(memstore.WithClock(clock))
		t.Cleanup(func() { _ = s.Close() })
		return storetest.Harness{Store: s, Clock: clock}
	})
}

// TestShards runs the shard oracle over memstore: a sharded key never
// admits what one exact key refuses.
func TestShards(t *testing.T) {
	storetest.Shards(t, func(t *testing.T) storetest.Harness {
		clock := sluicetest.NewClock(time.Unix(0, 0))
		s := memstore.New(memstore.WithClock(clock))
		t.Cleanup(func() { _ = s.Close() })
		return storetest.Harness{Store: s, Clock: clock}
	})
}
