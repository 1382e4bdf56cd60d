// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/sluicetest"
)

// BenchmarkSinglesParts takes singles.lua apart: Redis's CPU per decision
// (server-cpu-µs, INFO cpu) for batches of 8 later admissions on 1000 hot
// keys, 8 connections, for the script as it is (fixed, bucket) and for
// bucket.lua cut short: returning at once (the call, its arguments and
// reply: the floor), after its HMGET, after parsing the state, and with no
// redis.call at all (its Lua alone). The differences are what each part
// costs:
//
//	go test -run '^$' -bench SinglesParts -benchtime 400000x -count 2 ./redisstore/
func BenchmarkSinglesParts(b *testing.B) {
	addr := sluicetest.StartRedis(b)
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 16})
	b.Cleanup(func() { _ = rdb.Close() })
	env := &benchEnv{rdb: rdb}
	keys := benchKeys(1000)
	// A fixed window of 100M a minute; a bucket of 1000 a minute (T = 60 ms).
	fixedArgs := []any{"", "", "0", "f", "8", "1", "100000000", "60000000"}
	bucketArgs := []any{"", "", "0", "b", "8", "60000000", "0", "60000000000", "0", "1", "1", "60000"}
	cut := func(from, to string) string {
		if !strings.Contains(singlesText, from) {
			b.Fatalf("singles.lua no longer has %q", from)
		}
		return strings.Replace(singlesText, from, to, 1)
	}
	const hmget = "local v = redis.call('HMGET', key, 't', 'f', 'd', 'e')"
	noCalls := strings.NewReplacer(
		hmget, "local v = {'1764134700123456789', nil, '1', '1764134800123:1764134700123456789'}",
		"redis.call('HSET', key, 't', tats, 'x', tats, 'e', es)", "",
		"if extend then redis.call('PEXPIRE', key, ttl + g.slack) end", "").Replace(singlesText)
	for _, v := range []struct {
		name, script string
		args         []any
	}{
		{"fixed", singlesText, fixedArgs},
		{"bucket", singlesText, bucketArgs},
		{"bucket-return", cut(hmget, "do return 1 end"), bucketArgs},
		{"bucket-hmget-return", cut(hmget, hmget+" do return 1 end"), bucketArgs},
		{"bucket-parse-return", cut("local xd, xf = d + g.cn, df + g.cf", "do return 1 end"), bucketArgs},
		{"bucket-no-calls", noCalls, bucketArgs},
	} {
		sha, err := rdb.ScriptLoad(context.Background(), v.script).Result()
		if err != nil {
			b.Fatal(err)
		}
		b.Run("script="+v.name, func(b *testing.B) {
			const batch, conns = 8, 8
			calls := b.N / batch / conns
			var wg sync.WaitGroup
			errs := make([]error, conns)
			srv0, _, _ := env.serverStats(b)
			b.ResetTimer()
			for g := range conns {
				wg.Go(func() {
					k := g * len(keys) / conns
					ks := make([]string, batch)
					for range calls {
						for j := range ks {
							ks[j] = keys[k]
							k = (k + 1) % len(keys)
						}
						if err := rdb.EvalSha(context.Background(), sha, ks, v.args...).Err(); err != nil {
							errs[g] = err
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			for _, err := range errs {
				if err != nil {
					b.Fatal(err)
				}
			}
			srv, _, _ := env.serverStats(b)
			b.ReportMetric(float64(srv-srv0)/float64(time.Microsecond)/float64(calls*conns*batch), "server-cpu-µs")
		})
	}
}
