// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/redisstore"
)

// fallback is what serve's rules that fail local decide on while the store
// fails: a memory store and the replica count.
type fallback struct {
	local    *memstore.Store
	replicas sluice.ReplicaCounter
	describe string // for the log
	stop     func()
}

// startFallback makes serve's fallback. With --replicas n > 0 the count is
// n; otherwise on Redis the replicas count each other by heartbeats (until
// ctx ends or stop), and on the memory store, which never fails, it is 1.
// The local store holds at most maxKeys keys (0: no bound), as the memory
// store does.
func startFallback(ctx context.Context, store sluice.Store, n, maxKeys int, log *slog.Logger) (*fallback, error) {
	fb := &fallback{local: memstore.New(memstore.WithMaxKeys(maxKeys))}
	rs, isRedis := store.(*redisstore.Store)
	switch {
	case n > 0:
		fb.replicas, fb.describe = sluice.FixedReplicas(n), strconv.Itoa(n)+" (--replicas)"
	case !isRedis:
		fb.replicas, fb.describe = sluice.FixedReplicas(1), "1"
	default:
		host, _ := os.Hostname()
		id := fmt.Sprintf("%s/%d/%08x", host, os.Getpid(), rand.Uint32())
		r, err := redisstore.NewReplicas(rs, id, 0, 0)
		if err != nil {
			return nil, err
		}
		fb.replicas, fb.describe = r, "counted by heartbeats in Redis, id "+id
		// Count in before serving, so a fleet that starts together knows
		// its size at once (a failure here is logged by Run's retries).
		r.Beat(ctx)
		hctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		var lastLog time.Time
		go func() {
			defer wg.Done()
			r.Run(hctx, func(err error) {
				if time.Since(lastLog) >= time.Minute { // one line a minute at most
					lastLog = time.Now()
					log.Warn("replica heartbeat failed; keeping the last count", "replicas", r.Replicas(), "error", err)
				}
			})
		}()
		fb.stop = func() { cancel(); wg.Wait(); fb.local.Close() }
		return fb, nil
	}
	fb.stop = func() { fb.local.Close() }
	return fb, nil
}
