// SPDX-License-Identifier: Apache-2.0

package memstore_test

// Comparative benchmarks: memstore against golang.org/x/time/rate (one
// limiter, and one limiter per key in a mutex-guarded map) and
// github.com/sethvargo/go-limiter's memorystore, over the same keys and the
// same policy. BENCHMARKS.md at the repository root has the command, the
// machine and the results.
//
// What is measured:
//
//   - BenchmarkCompareTake: one decision (cost 1) per op on a key that already
//     exists, for 1, 100k and 1M keys, with procs = 1 or 2. procs is both
//     GOMAXPROCS and the number of goroutines calling the store (RunParallel
//     with parallelism 1); each goroutine walks the key set in one fixed
//     random order (benchWalk), from its own offset (its share of the keys),
//     so the keys a store is asked for follow no order it was filled in, and
//     with one key every goroutine hits the same key.
//   - BenchmarkCompareMemory: the heap a store retains per key after 1M fresh
//     16-byte keys have been inserted, measured with runtime.MemStats after a
//     GC (HeapAlloc after minus before, divided by the key count).
//
// The policy is 100 per minute (burst 100 for the bucket kinds). Before
// timing, each key receives one request for its whole burst (memstore and
// x/time/rate: cost 100; go-limiter, which only takes one token at a time:
// 100 takes), so every bucket is empty and every window full when timing
// starts, and no key can expire while it is measured. During timing a
// request is admitted only when refill allows it (one unit per key every
// 600 ms for the bucket kinds) or a new window begins; the admitted share is
// reported as admits/op.
//
// store=floor (compare_floor_test.go) is a sketch of the least work an exact
// per-key limiter can do: one hash, one lock, one clock read, one map probe.

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	limiter "github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/memorystore"
	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/sluicetest"
)

const (
	benchLimit  = 100
	benchPeriod = time.Minute
	// benchMaxKeys is the largest key set.
	benchMaxKeys = 1_000_000
)

var (
	benchKeySets = []struct {
		name string
		n    int
	}{{"1", 1}, {"100k", 100_000}, {"1M", benchMaxKeys}}
	benchProcs = []int{1, 2}
)

func benchPolicy(alg sluice.Algorithm) sluice.Policy {
	return sluice.Policy{Name: "bench", Algorithm: alg, Limit: benchLimit, Period: benchPeriod}
}

// benchKey returns the i-th benchmark key as a new 16-byte string:
// "user:" followed by i in 11 decimal digits.
func benchKey(i int) string {
	var buf [16]byte
	copy(buf[:], "user:")
	for j := len(buf) - 1; j >= len("user:"); j-- {
		buf[j] = byte('0' + i%10)
		i /= 10
	}
	return string(buf[:])
}

var (
	benchKeysOnce sync.Once
	benchKeysAll  []string
)

// benchKeys returns the first n keys, generated once, so that no key is
// formatted inside a timed loop.
func benchKeys(n int) []string {
	benchKeysOnce.Do(func() {
		benchKeysAll = make([]string, benchMaxKeys)
		for i := range benchKeysAll {
			benchKeysAll[i] = benchKey(i)
		}
	})
	return benchKeysAll[:n]
}

var (
	benchWalkMu sync.Mutex
	benchWalks  = map[int][]string{}
)

// benchWalk returns the first n keys in a fixed random order, as new
// strings laid out in memory in that order. The timed loops walk it, so the
// stores see keys in no order of their own (a store filled in key order gets
// no help from the processor's prefetcher) while the caller's key bytes are
// at hand, as a key just parsed from a request is.
func benchWalk(n int) []string {
	benchWalkMu.Lock()
	defer benchWalkMu.Unlock()
	if w, ok := benchWalks[n]; ok {
		return w
	}
	keys := benchKeys(n)
	rng := rand.New(rand.NewPCG(14, uint64(n)))
	perm := rng.Perm(n)
	buf := make([]byte, 0, n*len(keys[0]))
	for _, i := range perm {
		buf = append(buf, keys[i]...)
	}
	all := string(buf)
	w := make([]string, n)
	for j := range w {
		w[j] = all[j*len(keys[0]) : (j+1)*len(keys[0])]
	}
	benchWalks[n] = w
	return w
}

// taker is one store under test, reduced to the question every rate limiter
// answers: is one more request for key admitted now?
type taker interface {
	take(key string) (bool, error)
}

// memTaker is memstore with one policy, asked through sluice.Limiter.Allow:
// the path a user calls.
type memTaker struct{ l *sluice.Limiter }

func (t memTaker) take(key string) (bool, error) {
	d, err := t.l.Allow(context.Background(), key)
	return d.Allowed, err
}

// xrateOne is a single x/time/rate limiter: the cost of the arithmetic and
// one mutex, with no key lookup at all.
type xrateOne struct{ l *rate.Limiter }

func (t xrateOne) take(string) (bool, error) { return t.l.Allow(), nil }

func newXrateLimiter() *rate.Limiter {
	return rate.NewLimiter(rate.Every(benchPeriod/benchLimit), benchLimit)
}

// xrateMap is the usual way to limit per key with x/time/rate: a limiter per
// key, created on its first request, in a map guarded by one mutex that is
// held only for the lookup.
type xrateMap struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
}

func newXrateMap() *xrateMap { return &xrateMap{m: make(map[string]*rate.Limiter)} }

func (t *xrateMap) limiter(key string) *rate.Limiter {
	t.mu.Lock()
	l, ok := t.m[key]
	if !ok {
		l = newXrateLimiter()
		t.m[key] = l
	}
	t.mu.Unlock()
	return l
}

func (t *xrateMap) take(key string) (bool, error) { return t.limiter(key).Allow(), nil }

func (t *xrateMap) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// sethvargoTaker is go-limiter's memorystore.
type sethvargoTaker struct{ s limiter.Store }

func newSethvargo(b *testing.B) sethvargoTaker { return newSethvargoRate(b, benchLimit, benchPeriod) }

func newSethvargoRate(b *testing.B, tokens uint64, interval time.Duration) sethvargoTaker {
	s, err := memorystore.New(&memorystore.Config{Tokens: tokens, Interval: interval})
	if err != nil {
		b.Fatal(err)
	}
	return sethvargoTaker{s}
}

func (t sethvargoTaker) take(key string) (bool, error) {
	_, _, _, ok, err := t.s.Take(context.Background(), key)
	return ok, err
}

func (t sethvargoTaker) close() { t.s.Close(context.Background()) }

// BenchmarkCompareTake measures one decision on an existing key.
// Sub-benchmarks are named store=S[/alg=A]/keys=K/procs=P; see the comment
// at the top of the file. memstore runs with its defaults (the monotonic
// clock, no key bound, the sweeper every second).
func BenchmarkCompareTake(b *testing.B) {
	ctx := context.Background()
	for _, alg := range sluice.Algorithms() {
		p := benchPolicy(alg)
		b.Run("store=mem/alg="+string(alg), func(b *testing.B) {
			forKeySets(b, func(b *testing.B, keys []string) (taker, func()) {
				s := memstore.New()
				for _, k := range keys {
					if _, err := s.Take(ctx, p, k, benchLimit); err != nil {
						b.Fatal(err)
					}
				}
				if s.Len() != len(keys) {
					b.Fatalf("memstore holds %d keys after the prefill, want %d", s.Len(), len(keys))
				}
				l, err := sluice.NewLimiter(s, p)
				if err != nil {
					b.Fatal(err)
				}
				return memTaker{l}, func() { s.Close() }
			})
		})
	}
	b.Run("store=xrate/keys=1", func(b *testing.B) {
		l := newXrateLimiter()
		l.AllowN(time.Now(), benchLimit)
		forProcs(b, xrateOne{l}, benchWalk(1))
	})
	b.Run("store=xrate-map", func(b *testing.B) {
		forKeySets(b, func(b *testing.B, keys []string) (taker, func()) {
			t := newXrateMap()
			for _, k := range keys {
				t.limiter(k).AllowN(time.Now(), benchLimit)
			}
			return t, func() {}
		})
	})
	b.Run("store=sethvargo", func(b *testing.B) {
		forKeySets(b, func(b *testing.B, keys []string) (taker, func()) {
			t := newSethvargo(b)
			for _, k := range keys {
				for range benchLimit {
					if _, err := t.take(k); err != nil {
						b.Fatal(err)
					}
				}
			}
			return t, t.close
		})
	})
	b.Run("store=floor", func(b *testing.B) {
		forKeySets(b, func(b *testing.B, keys []string) (taker, func()) {
			t := newFloor()
			for _, k := range keys {
				t.fill(k)
			}
			return t, func() {}
		})
	})
}

// forKeySets runs keys=K sub-benchmarks for every key set, each over a store
// that setup builds and fills with the keys before anything is timed.
func forKeySets(b *testing.B, setup func(b *testing.B, keys []string) (taker, func())) {
	for _, ks := range benchKeySets {
		b.Run("keys="+ks.name, func(b *testing.B) {
			keys := benchKeys(ks.n)
			runtime.GC() // drop the previous store before building this one
			t, done := setup(b, keys)
			defer done()
			forProcs(b, t, benchWalk(ks.n))
		})
	}
}

// forProcs runs procs=P sub-benchmarks of t over keys.
func forProcs(b *testing.B, t taker, keys []string) {
	runtime.GC() // finish with the set-up's garbage before timing
	for _, procs := range benchProcs {
		b.Run(fmt.Sprintf("procs=%d", procs), func(b *testing.B) {
			benchTake(b, t, keys, procs)
		})
	}
}

// benchTake times b.N decisions made by procs goroutines, with GOMAXPROCS
// set to procs.
func benchTake(b *testing.B, t taker, keys []string, procs int) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	b.ReportAllocs()
	var goroutines, admitted atomic.Int64
	cpu0, cpuOK := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		g := int(goroutines.Add(1) - 1)
		i := g * len(keys) / procs % len(keys)
		var n int64
		for pb.Next() {
			ok, err := t.take(keys[i])
			if err != nil {
				b.Error(err)
				return
			}
			if ok {
				n++
			}
			if i++; i == len(keys) {
				i = 0
			}
		}
		admitted.Add(n)
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	b.ReportMetric(float64(admitted.Load())/float64(b.N), "admits/op")
	if cpu1, ok := processCPU(); ok && cpuOK {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	}
}

// processCPU returns the CPU time (user and system) the process has used so
// far, from /proc/self/stat, with the kernel's 10 ms resolution. ok is false
// where there is no such file. On a shared machine, cpu-ns/op well below
// ns/op × procs shows that the benchmark did not have its cores to itself.
func processCPU() (ns int64, ok bool) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, false
	}
	// The fields after the command name, which is in parentheses, start
	// with the state (field 3); utime and stime are fields 14 and 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const tick = int64(10 * time.Millisecond) // USER_HZ is 100
	return (utime + stime) * tick, true
}

// BenchmarkCompareMemory reports the heap each store retains per key, all-in
// (the store's copy of the key, its state, its share of the index), after
// benchMaxKeys new 16-byte keys have each had one request. The keys are new
// strings the benchmark does not keep, so a store that keeps the caller's
// string is charged for it. bytes/key is the growth of HeapAlloc (live
// objects), inuse-bytes/key that of HeapInuse (their spans, so it includes
// the unused part of partly filled spans). One op is filling one store;
// ns/op, B/op and allocs/op are per fill of benchMaxKeys keys.
func BenchmarkCompareMemory(b *testing.B) {
	ctx := context.Background()
	for _, alg := range sluice.Algorithms() {
		p := benchPolicy(alg)
		b.Run("store=mem/alg="+string(alg), func(b *testing.B) {
			measurePerKey(b, func() (func(string) error, func() int, func()) {
				// A clock that stands still: nothing expires while the store fills.
				clock := sluicetest.NewClock(time.Unix(1_700_000_000, 0))
				s := memstore.New(memstore.WithClock(clock))
				insert := func(key string) error {
					_, err := s.Take(ctx, p, key, benchLimit)
					return err
				}
				return insert, s.Len, func() { s.Close() }
			})
		})
	}
	b.Run("store=xrate-map", func(b *testing.B) {
		measurePerKey(b, func() (func(string) error, func() int, func()) {
			t := newXrateMap()
			insert := func(key string) error {
				t.limiter(key).AllowN(time.Now(), benchLimit)
				return nil
			}
			return insert, t.len, func() {}
		})
	})
	b.Run("store=sethvargo", func(b *testing.B) {
		measurePerKey(b, func() (func(string) error, func() int, func()) {
			t := newSethvargo(b)
			n := 0
			insert := func(key string) error {
				n++
				_, err := t.take(key)
				return err
			}
			// go-limiter has no key count; it never drops a key before
			// its sweep, hours away, so every insert is a new key.
			return insert, func() int { return n }, t.close
		})
	})
}

// measurePerKey fills a new store from build with benchMaxKeys keys per op
// and reports the heap it retains per key.
func measurePerKey(b *testing.B, build func() (insert func(string) error, count func() int, done func())) {
	if bt := flag.Lookup("test.benchtime"); bt != nil && strings.HasSuffix(bt.Value.String(), "x") {
		b.Skip("each op fills a store with 1M keys: run with a time -benchtime (such as 1s), not a count")
	}
	b.ReportAllocs()
	var perKey, inusePerKey float64
	for b.Loop() {
		b.StopTimer()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.StartTimer()

		insert, count, done := build()
		for i := range benchMaxKeys {
			if err := insert(benchKey(i)); err != nil {
				b.Fatal(err)
			}
		}

		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		if n := count(); n != benchMaxKeys { // also keeps the store alive until here
			b.Fatalf("the store holds %d keys, want %d", n, benchMaxKeys)
		}
		perKey = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / benchMaxKeys
		inusePerKey = float64(int64(after.HeapInuse)-int64(before.HeapInuse)) / benchMaxKeys
		done()
		b.StartTimer()
	}
	b.ReportMetric(perKey, "bytes/key")
	b.ReportMetric(inusePerKey, "inuse-bytes/key")
}
