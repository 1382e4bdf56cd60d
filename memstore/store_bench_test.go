// SPDX-License-Identifier: Apache-2.0

package memstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// BenchmarkTake measures decisions on keys the store already holds, from
// parallel goroutines (-cpu sets how many), on the default monotonic clock.
// The limit is high enough that every decision admits and changes the state.
func BenchmarkTake(b *testing.B) {
	for _, a := range sluice.Algorithms() {
		for _, keys := range []int{1, 100_000} {
			b.Run(fmt.Sprintf("alg=%s/keys=%d", a, keys), func(b *testing.B) {
				s := New(WithSweepInterval(0))
				defer s.Close()
				p := sluice.Policy{Algorithm: a, Limit: 1 << 40, Period: time.Millisecond}
				ctx := context.Background()
				names := make([]string, keys)
				for i := range names {
					var k [16]byte
					copy(k[:], "user-")
					binary.BigEndian.PutUint64(k[5:13], uint64(i))
					names[i] = string(k[:])
					s.Take(ctx, p, names[i], 1)
				}
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					i := 0
					for pb.Next() {
						i++
						if _, err := s.Take(ctx, p, names[i%keys], 1); err != nil {
							b.Fatal(err)
						}
					}
				})
			})
		}
	}
}

// BenchmarkTakeAll measures batches of three policies on held keys.
func BenchmarkTakeAll(b *testing.B) {
	s := New(WithSweepInterval(0))
	defer s.Close()
	ctx := context.Background()
	mk := func(name string) sluice.Policy {
		return sluice.Policy{Name: name, Algorithm: sluice.GCRA, Limit: 1 << 40, Period: time.Second}
	}
	reqs := []sluice.Request{{Policy: mk("ip"), Key: "10.0.0.1", Cost: 1}, {Policy: mk("user"), Key: "user-42", Cost: 1}, {Policy: mk("org"), Key: "acme", Cost: 1}}
	out := make([]sluice.Decision, len(reqs))
	b.ReportAllocs()
	for b.Loop() {
		if err := s.TakeAll(ctx, reqs, out); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMemory reports the heap in use per key for a million 16-byte keys.
func BenchmarkMemory(b *testing.B) {
	for _, a := range sluice.Algorithms() {
		b.Run("alg="+string(a), func(b *testing.B) {
			p := sluice.Policy{Algorithm: a, Limit: 3, Period: time.Hour}
			var bpk float64
			for range b.N {
				bpk = bytesPerKey(b, p, 1_000_000)
			}
			b.ReportMetric(bpk, "bytes/key")
		})
	}
}

// BenchmarkMemoryKeyLength is BenchmarkMemory with longer keys: a key's
// bytes past the 16 a row holds go to the arena. (sluice serve stores no
// key longer than 64 bytes; internal/server's storeKey.)
func BenchmarkMemoryKeyLength(b *testing.B) {
	for _, a := range []sluice.Algorithm{sluice.GCRA, sluice.FixedWindow, sluice.SlidingWindow, sluice.SlidingLog} {
		for _, n := range []int{26, 44, 64, 128} {
			b.Run("alg="+string(a)+"/key="+strconv.Itoa(n)+"B", func(b *testing.B) {
				p := sluice.Policy{Algorithm: a, Limit: 3, Period: time.Hour}
				var bpk float64
				for range b.N {
					bpk = bytesPerKeyOfLen(b, p, 1_000_000, n)
				}
				b.ReportMetric(bpk, "bytes/key")
			})
		}
	}
}

// BenchmarkTakeBursts measures decisions on one held key of a named bucket
// policy whose requests come with other bursts (sluice.Check.Burst: a
// leaky-bucket request's maximum delay is decided as a smaller burst):
// bursts=1 asks with the policy's own burst only, bursts=2 alternates it
// with another, bursts=64 cycles through 64. via=take asks Store.Take,
// via=takeall a one-request TakeAll (the path of sluice.AllowAll), and
// via=limiter Limiter.Allow on one limiter per burst. load=admit has room
// for every request; load=refuse starts from an empty bucket that refills
// 100 per minute, so nearly every request is refused (a hot key).
func BenchmarkTakeBursts(b *testing.B) {
	ctx := context.Background()
	for _, a := range []sluice.Algorithm{sluice.GCRA, sluice.LeakyBucket} {
		for _, load := range []string{"admit", "refuse"} {
			p := sluice.Policy{Name: "bench", Algorithm: a, Limit: 1 << 40, Period: time.Millisecond}
			if load == "refuse" {
				p.Limit, p.Period = 100, time.Minute
			}
			for _, via := range []string{"take", "takeall", "limiter"} {
				for _, n := range []int{1, 2, 64} {
					if via == "limiter" && n == 64 {
						continue
					}
					b.Run(fmt.Sprintf("alg=%s/load=%s/via=%s/bursts=%d", a, load, via, n), func(b *testing.B) {
						benchBursts(b, ctx, p, via, n)
					})
				}
			}
		}
	}
}

func benchBursts(b *testing.B, ctx context.Context, p sluice.Policy, via string, n int) {
	ps := make([]sluice.Policy, n)
	for i := range ps {
		ps[i] = p
		if i > 0 {
			ps[i].Burst = p.Capacity() - int64(i)
		}
	}
	benchPolicies(b, ctx, ps, via)
}

// benchPolicies measures decisions on one held key, cycling through the
// policies ps (of one name), asked via Store.Take, TakeAll or a Limiter
// per policy. The key is first filled up under ps[0].
func benchPolicies(b *testing.B, ctx context.Context, ps []sluice.Policy, via string) {
	s := New()
	defer s.Close()
	const key = "user-42"
	n := len(ps)
	if _, err := s.Take(ctx, ps[0], key, ps[0].Capacity()); err != nil {
		b.Fatal(err)
	}
	var take func(i int) error
	switch via {
	case "take":
		take = func(i int) error {
			_, err := s.Take(ctx, ps[i], key, 1)
			return err
		}
	case "takeall":
		reqs := make([][]sluice.Request, n)
		for i := range reqs {
			reqs[i] = []sluice.Request{{Policy: ps[i], Key: key, Cost: 1}}
		}
		out := make([]sluice.Decision, 1)
		take = func(i int) error { return s.TakeAll(ctx, reqs[i], out) }
	case "limiter":
		ls := make([]*sluice.Limiter, n)
		for i := range ls {
			var err error
			if ls[i], err = sluice.NewLimiter(s, ps[i]); err != nil {
				b.Fatal(err)
			}
		}
		take = func(i int) error {
			_, err := ls[i].Allow(ctx, key)
			return err
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := take(i); err != nil {
			b.Fatal(err)
		}
		if i++; i == n {
			i = 0
		}
	}
}

// BenchmarkTakeLimits measures decisions on one held key of a named
// fixed-window policy whose requests come with other limits (sluice
// serve's RLS: a descriptor's limit override shares the count of the rule
// it overrides, under its own limit): limits=1 asks with the policy's own
// limit only, limits=2 alternates it with another, limits=64 cycles
// through 64. via=take asks Store.Take, via=takeall a one-request TakeAll
// (the path of sluice.AllowAll and of the RLS), and via=limiter
// Limiter.Allow on one limiter per limit. load=admit has room for every
// request; load=refuse starts from a full window of a minute, so every
// request is refused (a hot key).
func BenchmarkTakeLimits(b *testing.B) {
	ctx := context.Background()
	for _, load := range []string{"admit", "refuse"} {
		p := sluice.Policy{Name: "bench", Algorithm: sluice.FixedWindow, Limit: 1 << 40, Period: time.Millisecond}
		if load == "refuse" {
			p.Limit, p.Period = 100, time.Minute
		}
		for _, via := range []string{"take", "takeall", "limiter"} {
			for _, n := range []int{1, 2, 64} {
				if via == "limiter" && n == 64 {
					continue
				}
				b.Run(fmt.Sprintf("alg=%s/load=%s/via=%s/limits=%d", p.Algorithm, load, via, n), func(b *testing.B) {
					ps := make([]sluice.Policy, n)
					for i := range ps {
						ps[i] = p
						ps[i].Limit = p.Limit - int64(i)
					}
					benchPolicies(b, ctx, ps, via)
				})
			}
		}
	}
}
