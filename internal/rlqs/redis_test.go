// SPDX-License-Identifier: Apache-2.0

package rlqs

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestFleetRedis: issue 21's scenarios with one sluice replica per stream,
// all on one real Redis: the division holds across replicas.
func TestFleetRedis(t *testing.T) {
	addr := sluicetest.StartRedis(t)
	fleetCases(t, func(t *testing.T, n int) func(t *testing.T) []*replica {
		stores := make([]*redisstore.Store, n)
		for i := range stores {
			s, err := redisstore.Open("redis://"+addr, redisstore.WithPrefix(t.Name()+":"))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Ping(t.Context()); err != nil { // connect outside the bubble
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			stores[i] = s
		}
		return func(t *testing.T) []*replica {
			cfg := loadConfig(t, apiRule)
			reps := make([]*replica, n)
			for i, s := range stores {
				reps[i] = startReplica(t, cfg, WithBoard(RedisBoard(s)), WithReplicaID(fmt.Sprint("r", i)))
			}
			return reps
		}
	})
}
