// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// BenchmarkRedisCPU compares what one decision costs Redis, at 64 callers
// over 100k keys on one redis-server: sluice's fixed-window and
// token-bucket decisions by the one-request scripts, gathered into shared
// calls of singles.lua (script=singles, the default) or each its own call
// (script=alone, as before gathering), and by take.lua's general path (script=take.lua, what every
// decision ran before), against envoyproxy/ratelimit's fixed window (an
// INCRBY and an EXPIRE per descriptor, pipelined in one round trip, on
// go-redis's connection pool as envoy's radix pool). All at 1000 a minute,
// so nearly every decision admits and writes. Each reports Redis's CPU
// per decision (server-cpu-µs, from INFO cpu: the commands and the network
// I/O), the time INFO commandstats counts inside the commands sent
// (script-µs), and the commands per decision:
//
//	go test -run '^$' -bench RedisCPU -benchtime 200000x ./redisstore/
func BenchmarkRedisCPU(b *testing.B) {
	addr := sluicetest.StartRedis(b)
	fast, err := Open("redis://" + addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = fast.Close() })
	alone, err := Open("redis://"+addr, WithPrefix("a:"), WithGatherDelay(0))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = alone.Close() })
	general, err := Open("redis://"+addr, WithPrefix("g:"))
	if err != nil {
		b.Fatal(err)
	}
	general.generalOnly = true
	b.Cleanup(func() { _ = general.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	b.Cleanup(func() { _ = rdb.Close() })
	env := &benchEnv{keys: benchKeys(100_000), rdb: rdb}
	const callers = 64
	for _, alg := range []sluice.Algorithm{sluice.FixedWindow, sluice.TokenBucket} {
		p := sluice.Policy{Algorithm: alg, Limit: 1000, Period: time.Minute}
		for _, st := range []struct {
			name string
			s    *Store
		}{{"singles", fast}, {"alone", alone}, {"take.lua", general}} {
			b.Run(fmt.Sprintf("store=sluice/alg=%s/script=%s", alg, st.name), func(b *testing.B) {
				env.run(b, callers, func(ctx context.Context, key string) error {
					_, err := st.s.Take(ctx, p, key, 1)
					return err
				})
			})
		}
	}
	b.Run("store=envoy/alg=fixed-window/script=incrby+expire", func(b *testing.B) {
		env.run(b, callers, envoyTake(rdb))
	})
}

// envoyTake is envoyproxy/ratelimit's fixed window: an INCRBY and an
// EXPIRE of the window's key, pipelined in one round trip.
func envoyTake(rdb *redis.Client) func(ctx context.Context, key string) error {
	return func(ctx context.Context, key string) error {
		// envoy's key: prefix, domain, descriptor, window start.
		k := "envoy_d_k_" + key + "_" + strconv.FormatInt(time.Now().Unix()/60*60, 10)
		pipe := rdb.Pipeline()
		pipe.IncrBy(ctx, k, 1)
		pipe.Expire(ctx, k, time.Minute)
		_, err := pipe.Exec(ctx)
		return err
	}
}

// BenchmarkRedisCPUHotKeys is BenchmarkRedisCPU over 1000 keys instead of
// 100k, so that nearly every decision is a later one in its key's window
// (200 per key in a run of 200,000, all admitted): a fixed window's or a
// bucket's is then one HINCRBY.
//
//	go test -run '^$' -bench RedisCPUHotKeys -benchtime 200000x -count 3 ./redisstore/
func BenchmarkRedisCPUHotKeys(b *testing.B) { benchHotKeys(b, 1000) }

// BenchmarkRedisCPURefusals is BenchmarkRedisCPUHotKeys at 1 a minute:
// after each key's first, every decision is a refusal, as for a client
// over its limit (an HINCRBY and its taking back). envoy's case is the same
// INCRBY and EXPIRE:
//
//	go test -run '^$' -bench RedisCPURefusals -benchtime 200000x -count 3 ./redisstore/
func BenchmarkRedisCPURefusals(b *testing.B) { benchHotKeys(b, 1) }

// benchHotKeys compares sluice's fixed window and token bucket with envoy's
// fixed window on 1000 keys at limit a minute, 64 callers.
func benchHotKeys(b *testing.B, limit int64) {
	addr := sluicetest.StartRedis(b)
	s, err := Open("redis://" + addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	b.Cleanup(func() { _ = rdb.Close() })
	env := &benchEnv{keys: benchKeys(1000), rdb: rdb}
	const callers = 64
	for _, alg := range []sluice.Algorithm{sluice.FixedWindow, sluice.TokenBucket} {
		p := sluice.Policy{Algorithm: alg, Limit: limit, Period: time.Minute}
		b.Run(fmt.Sprintf("store=sluice/alg=%s/script=singles", alg), func(b *testing.B) {
			env.run(b, callers, func(ctx context.Context, key string) error {
				_, err := s.Take(ctx, p, key, 1)
				return err
			})
		})
	}
	b.Run("store=envoy/alg=fixed-window/script=incrby+expire", func(b *testing.B) {
		env.run(b, callers, envoyTake(rdb))
	})
}

// BenchmarkGather compares Takes gathered into shared calls of singles.lua
// (gather=on, the default) with each Take its own call (gather=off), at 1
// and 64 callers over 100k keys at 1000 a minute on one redis-server: the
// latency of a decision (p50, p99), decisions/s, and the CPU per decision
// of the client and of Redis. The cases take turns, so that a change in the
// machine's load affects them alike:
//
//	go test -run '^$' -bench Gather -benchtime 100000x -count 3 ./redisstore/
func BenchmarkGather(b *testing.B) {
	addr := sluicetest.StartRedis(b)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	b.Cleanup(func() { _ = rdb.Close() })
	env := &benchEnv{keys: benchKeys(100_000), rdb: rdb}
	stores := map[string]*Store{}
	for _, g := range []string{"on", "off"} {
		delay := DefaultGatherDelay
		if g == "off" {
			delay = 0
		}
		s, err := Open("redis://"+addr, WithPrefix(g+":"), WithGatherDelay(delay))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		stores[g] = s
	}
	for _, alg := range []sluice.Algorithm{sluice.FixedWindow, sluice.TokenBucket} {
		p := sluice.Policy{Algorithm: alg, Limit: 1000, Period: time.Minute}
		for _, callers := range []int{1, 64} {
			for _, g := range []string{"on", "off"} {
				s := stores[g]
				b.Run(fmt.Sprintf("alg=%s/callers=%d/gather=%s", alg, callers, g), func(b *testing.B) {
					env.run(b, callers, func(ctx context.Context, key string) error {
						_, err := s.Take(ctx, p, key, 1)
						return err
					})
				})
			}
		}
	}
}
