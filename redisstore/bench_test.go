// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// benchCallers are the numbers of concurrent callers every store is
// measured at.
var benchCallers = []int{1, 16, 64, 256}

// benchKeys returns n distinct 16-byte keys, scattered so that neighbours
// share no prefix.
func benchKeys(n int) []string {
	keys := make([]string, n)
	x := uint64(0x9e3779b97f4a7c15)
	for i := range keys {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		keys[i] = fmt.Sprintf("%016x", z^z>>31)
	}
	return keys
}

// BenchmarkTake measures decisions on Redis TIME over 100k 16-byte keys at
// each of benchCallers: the store from Open (store=redis) for every
// algorithm and, for GCRA, the same limit through
// github.com/go-redis/redis_rate on go-redis with its default pool
// (store=redis_rate). All share one redis-server, so that
//
//	go test -run '^$' -bench 'Take/store=/alg=gcra/' ./redisstore/ | benchstat -col /store -
//
// compares them. Each reports decisions/s, the p50 and p99 latency of one
// decision, and CPU time per decision in this process and in redis-server.
func BenchmarkTake(b *testing.B) {
	addr := sluicetest.StartRedis(b)
	s, err := Open("redis://" + addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	b.Cleanup(func() { _ = rdb.Close() })
	rl := redis_rate.NewLimiter(rdb)

	env := &benchEnv{keys: benchKeys(100_000), rdb: rdb}
	type store struct {
		name string
		take func(ctx context.Context, p sluice.Policy, key string) error
	}
	stores := []store{
		{"redis", func(ctx context.Context, p sluice.Policy, key string) error {
			_, err := s.Take(ctx, p, key, 1)
			return err
		}},
		{"redis_rate", func(ctx context.Context, p sluice.Policy, key string) error {
			// The same limit: p.Limit per second, burst p.Limit.
			_, err := rl.Allow(ctx, key, redis_rate.PerSecond(int(p.Limit)))
			return err
		}},
	}
	for _, alg := range sluice.Algorithms() {
		p := sluice.Policy{Algorithm: alg, Limit: 100, Period: time.Second}
		// The stores take turns at each number of callers, so that a
		// change in the machine's load affects them alike.
		for _, callers := range benchCallers {
			for _, st := range stores {
				if st.name != "redis" && alg != sluice.GCRA {
					continue
				}
				b.Run(fmt.Sprintf("store=%s/alg=%s/callers=%d", st.name, alg, callers), func(b *testing.B) {
					env.run(b, callers, func(ctx context.Context, key string) error { return st.take(ctx, p, key) })
				})
			}
		}
	}
}

// benchEnv is what the stores' benchmarks share: the keys, and a client of
// the server for its CPU counters.
type benchEnv struct {
	keys []string
	rdb  *redis.Client
}

// serverStats returns the CPU time (user and system) redis-server has
// used, the time it has spent inside the commands clients sent (EVALSHA
// and EVAL, including the commands the scripts call, and the INCRBY and
// EXPIRE of envoyproxy/ratelimit's pattern), and how many of those there
// were.
func (e *benchEnv) serverStats(b *testing.B) (cpu, scripts time.Duration, calls int64) {
	info, err := e.rdb.Info(context.Background(), "cpu", "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(info) {
		name, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch name {
		case "used_cpu_user", "used_cpu_sys":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("INFO cpu: %q: %v", line, err)
			}
			cpu += time.Duration(f * float64(time.Second))
		case "cmdstat_evalsha", "cmdstat_eval", "cmdstat_incrby", "cmdstat_expire":
			for field := range strings.SplitSeq(v, ",") {
				v, isUsec := strings.CutPrefix(field, "usec=")
				if !isUsec {
					var isCalls bool
					if v, isCalls = strings.CutPrefix(field, "calls="); !isCalls {
						continue
					}
				}
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					b.Fatalf("INFO commandstats: %q: %v", line, err)
				}
				if isUsec {
					scripts += time.Duration(n) * time.Microsecond
				} else {
					calls += n
				}
			}
		}
	}
	return cpu, scripts, calls
}

// run makes b.N calls of take, shared out evenly among exactly callers
// goroutines, each walking the keys from its own offset, and reports
// decisions/s, the p50 and p99 latency of a call, and the CPU time per
// decision of this process (client-cpu-µs, where the platform tells) and of
// redis-server (server-cpu-µs), and the part of the latter that Redis
// counts inside the commands sent (script-µs: the scripts, or INCRBY and
// EXPIRE), and how many commands a decision sent (calls/decision).
// (b.RunParallel would run GOMAXPROCS×n
// goroutines, and give no goroutine a count known in advance to size its
// latency record.)
func (e *benchEnv) run(b *testing.B, callers int, take func(context.Context, string) error) {
	b.ReportAllocs()
	ctx := b.Context()
	keys := e.keys
	lat := make([][]time.Duration, callers)
	for w := range lat {
		n := b.N / callers
		if w < b.N%callers {
			n++
		}
		lat[w] = make([]time.Duration, n)
	}
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, callers)
	for w := range callers {
		ready.Add(1)
		done.Go(func() {
			rec := lat[w]
			k := w * len(keys) / callers
			ready.Done()
			<-start
			for i := range rec {
				t0 := time.Now()
				if err := take(ctx, keys[k]); err != nil {
					errs[w] = err
					return
				}
				rec[i] = time.Since(t0)
				if k++; k == len(keys) {
					k = 0
				}
			}
		})
	}
	ready.Wait()
	srv0, lua0, calls0 := e.serverStats(b)
	cli0 := processCPU()
	b.ResetTimer()
	close(start)
	done.Wait()
	b.StopTimer()
	cli := processCPU() - cli0
	srv, lua, calls := e.serverStats(b)
	srv, lua, calls = srv-srv0, lua-lua0, calls-calls0
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	pct := func(q int) float64 {
		return float64(all[(len(all)-1)*q/100]) / float64(time.Microsecond)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	b.ReportMetric(pct(50), "p50-µs")
	b.ReportMetric(pct(99), "p99-µs")
	perOp := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(b.N) }
	if cli > 0 {
		b.ReportMetric(perOp(cli), "client-cpu-µs")
	}
	b.ReportMetric(perOp(srv), "server-cpu-µs")
	b.ReportMetric(perOp(lua), "script-µs")
	b.ReportMetric(float64(calls)/float64(b.N), "calls/decision")
}
