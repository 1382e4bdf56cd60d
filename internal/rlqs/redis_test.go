// SPDX-License-Identifier: Apache-2.0

package rlqs

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
			stores[i] = openOutsideBubble(t, addr)
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

// openOutsideBubble opens a store on the Redis at addr with everything its
// client runs in goroutines of its own started outside a synctest bubble:
// they block on the network, which would hold the bubble's clock, and wake
// the goroutines that wait for them. The client connects at its first
// call, and starts its pipelining goroutines at its first calls made at
// the same time (a replica's rounds make them): calls are made so, each
// write slowed by a millisecond so that they overlap.
func openOutsideBubble(t *testing.T, addr string) *redisstore.Store {
	t.Helper()
	var slow atomic.Bool
	slow.Store(true)
	s, err := redisstore.Open("redis://"+addr, redisstore.WithPrefix(t.Name()+":"),
		redisstore.WithConnWrapper(func(c net.Conn) net.Conn { return slowConn{c, &slow} }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := s.Ping(t.Context()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	slow.Store(false)
	return s
}

// slowConn delays each write by a millisecond while slow is set.
type slowConn struct {
	net.Conn
	slow *atomic.Bool
}

func (c slowConn) Write(b []byte) (int, error) {
	if c.slow.Load() {
		time.Sleep(time.Millisecond)
	}
	return c.Conn.Write(b)
}
