// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"fmt"
	"strconv"
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
// reply: the floor), and after its HINCRBY. The differences are what each
// part costs:
//
//	go test -run '^$' -bench SinglesParts -benchtime 400000x -count 2 ./redisstore/
func BenchmarkSinglesParts(b *testing.B) {
	addr := sluicetest.StartRedis(b)
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 16})
	b.Cleanup(func() { _ = rdb.Close() })
	env := &benchEnv{rdb: rdb}
	keys := benchKeys(1000)
	// A fixed window of 100M a minute; a bucket of 1000 a minute (T = 60
	// ms, num 60000000, den 1; burst 1000: bv 6e10, H 60001 ms).
	fixedArgs := []any{"", "", "0", "f", "8", "1", "100000000", "60000000"}
	bucketArgs := []any{"", "", "0", "b", "8", "60000000", "1", "60000000000", "60001", "1"}
	cut := func(from, to string) string {
		if !strings.Contains(singlesText, from) {
			b.Fatalf("singles.lua no longer has %q", from)
		}
		return strings.Replace(singlesText, from, to, 1)
	}
	const hincrby = "    local r = redis.pcall('HINCRBY', key, g.f, g.cvs)\n"
	for _, v := range []struct {
		name, script string
		args         []any
	}{
		{"fixed", singlesText, fixedArgs},
		{"bucket", singlesText, bucketArgs},
		{"bucket-return", cut(hincrby, "    do return 1 end\n"), bucketArgs},
		{"bucket-hincrby-return", cut(hincrby, hincrby+"    do return 1 end\n"), bucketArgs},
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
							ks[j] = v.name + ":" + keys[k] // each case its own keys
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

// BenchmarkCommandCost measures what one command run from Lua costs Redis,
// without the call it rides on: each op is a loop of 20,000 iterations
// inside one EVAL, and server-cpu-µs is Redis's CPU per iteration less that
// of the loop alone (building the key name). hot-* ops run on 1,000 keys
// that exist (a bucket's and a fixed window's state as bucket.lua and
// fixed.lua write them, and a string), new-* ops on keys made by the op,
// as a key's first decision in its window does:
//
//	go test -run '^$' -bench CommandCost -benchtime 5x -count 3 ./redisstore/
//
// (-benchtime Nx: N loops of 20,000.)
func BenchmarkCommandCost(b *testing.B) {
	addr := sluicetest.StartRedis(b)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	b.Cleanup(func() { _ = rdb.Close() })
	env := &benchEnv{rdb: rdb}
	const loop = 20000
	const field = "'1764150000000:1:1001'"
	hot := "local k = 'sluice:{n:p:token-bucket.2:user' .. (i % 1000) .. '}'\n"
	fresh := "local k = 'sluice:{n:p:fixed-window.2:user' .. ARGV[1] .. ':' .. i .. '}'\n"
	ops := []struct{ name, key, op string }{
		{"hot-loop-only", hot, ""},
		{"hot-hincrby", hot, "redis.call('HINCRBY', k, " + field + ", 1)"},
		{"hot-hincrby+hset", hot, "redis.call('HINCRBY', k, " + field + ", 1); redis.call('HSET', k, " + field + ", '123456789')"},
		{"hot-incrby", hot, "redis.call('INCRBY', k .. 's', 1)"},
		{"hot-set-px-get", hot, "redis.call('SET', k .. 's', '1764150000000:1:1001:123456789', 'PX', '60000', 'GET')"},
		{"new-loop-only", fresh, ""},
		{"new-hincrby+pexpire-nx", fresh, "redis.call('HINCRBY', k, " + field + ", 1); redis.call('PEXPIRE', k, '60000', 'NX')"},
		{"new-incrby+pexpire", fresh, "redis.call('INCRBY', k, 1); redis.call('PEXPIRE', k, '60000')"},
		{"new-set-nx-px", fresh, "redis.call('SET', k, '1', 'NX', 'PX', '60000')"},
	}
	var base float64
	run := 0
	for _, o := range ops {
		script := fmt.Sprintf("for i = 1, %d do\n%s%s\nend\nreturn 0", loop, o.key, o.op)
		b.Run("op="+o.name, func(b *testing.B) {
			ctx := context.Background()
			if strings.HasPrefix(o.name, "hot-") {
				// The hot keys exist before the first timed loop.
				if err := rdb.Eval(ctx, script, nil, "warm").Err(); err != nil {
					b.Fatal(err)
				}
			}
			srv0, _, _ := env.serverStats(b)
			b.ResetTimer()
			for range b.N {
				run++
				if err := rdb.Eval(ctx, script, nil, strconv.Itoa(run)).Err(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			srv, _, _ := env.serverStats(b)
			per := float64(srv-srv0) / float64(time.Microsecond) / float64(b.N*loop)
			if strings.HasSuffix(o.name, "loop-only") {
				base = per
			}
			b.ReportMetric(per-base, "server-cpu-µs")
			if err := rdb.FlushAll(ctx).Err(); err != nil && strings.HasPrefix(o.name, "new-") {
				b.Fatal(err)
			}
		})
	}
}
