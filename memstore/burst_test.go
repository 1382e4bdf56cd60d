// SPDX-License-Identifier: Apache-2.0

package memstore

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestBurstsShareTheCompiledPolicy: requests of one named bucket policy
// that differ only in Burst (sluice.Check.Burst: a leaky-bucket request's
// maximum delay as a burst per deadline) are decided by the policy's one
// compiled form, each under its own burst: through Take, TakeAll, a bound
// Limiter, TakeStamped and Give, none recompiles the table (which made a
// new model, bumped the store's policy generation, so that every shard's
// sweep bound was void, and retired the hot key: 3 to 6 allocations and
// 0.47 to 0.65 µs a request where the policy's own burst costs none and
// 0.06 to 0.24 µs, BenchmarkTakeBursts), and a held key's decisions
// allocate nothing. Each decision is the model's for the request's policy,
// on the key's one state. Another Limit still recompiles it, as before.
func TestBurstsShareTheCompiledPolicy(t *testing.T) {
	for _, a := range []sluice.Algorithm{sluice.TokenBucket, sluice.GCRA, sluice.LeakyBucket} {
		t.Run("alg="+string(a), func(t *testing.T) {
			clock := sluicetest.NewClock(t0)
			s := New(WithClock(clock), WithSweepInterval(0))
			defer s.Close()
			ctx := context.Background()
			p := sluice.Policy{Name: "q", Algorithm: a, Limit: 7, Period: time.Second, Burst: 12}
			with := func(b int64) sluice.Policy { q := p; q.Burst = b; return q }
			var st model.State // the key's state, as the model keeps it
			want := func(q sluice.Policy, cost int64) sluice.Decision {
				next, d := must2(model.New(q)).Take(st, clock.Now().UnixNano(), cost)
				st = next
				return d
			}
			if d, err := s.Take(ctx, p, "k", 4); err != nil || d != want(p, 4) {
				t.Fatalf("the first take: %+v, %v", d, err)
			}
			c := must2(s.compile(p))
			gen := s.gen.Load()
			unchanged := func(what string) {
				t.Helper()
				if cur := c.pt.cur.Load(); cur != c || s.gen.Load() != gen {
					t.Fatalf("%s: the table was recompiled (generation %d, was %d)", what, s.gen.Load(), gen)
				}
			}
			ls := map[int64]*sluice.Limiter{}
			for _, b := range []int64{12, 0, 1, 5, 9} {
				ls[b] = must2(sluice.NewLimiter(s, with(b)))
			}
			var outcomes [2]int // refused, admitted
			for i, b := range []int64{5, 12, 1, 0, 9, 5, 5, 12, 0, 9, 1, 12, 9, 9, 5, 0} {
				clock.Set(t0.Add(time.Duration(i) * 70 * time.Millisecond))
				q := with(b)
				var got sluice.Decision
				var err error
				switch i % 4 {
				case 0:
					got, err = s.Take(ctx, q, "k", 1)
				case 1:
					out := make([]sluice.Decision, 1)
					err = s.TakeAll(ctx, []sluice.Request{req(q, "k", 1)}, out)
					got = out[0]
				case 2:
					got, err = ls[b].Allow(ctx, "k")
				case 3:
					var stamp model.State
					if got, stamp, err = s.TakeStamped(ctx, q, "k", 2); err != nil {
						t.Fatal(err)
					}
					if w := want(q, 2); got != w {
						t.Fatalf("step %d, burst %d: TakeStamped %+v, want %+v", i, b, got, w)
					}
					outcomes[b2i(got.Allowed)]++
					unchanged("TakeStamped")
					if !got.Allowed {
						continue
					}
					gave, err := s.Give(ctx, q, "k", stamp, 1)
					next, ok := must2(model.New(q)).Give(st, stamp, 1)
					if err != nil || gave != ok {
						t.Fatalf("step %d, burst %d: Give %v, %v; the model %v", i, b, gave, err, ok)
					}
					if ok {
						st = next
					}
					unchanged("Give")
					continue
				}
				if w := want(q, 1); err != nil || got != w {
					t.Fatalf("step %d, burst %d (way %d): %+v, %v; want %+v", i, b, i%4, got, err, w)
				}
				outcomes[b2i(got.Allowed)]++
				unchanged("a take")
			}
			if outcomes[0] == 0 || outcomes[1] == 0 {
				t.Fatalf("%d refused, %d admitted: want some of each", outcomes[0], outcomes[1])
			}

			// A held key's decisions under alternating bursts allocate
			// nothing, whichever way they are asked.
			clock.Set(t0.Add(time.Hour))
			s.Take(ctx, p, "k", 1)
			n := 0
			out := make([]sluice.Decision, 1)
			reqs := [][]sluice.Request{{req(with(3), "k", 1)}, {req(p, "k", 1)}}
			for name, f := range map[string]func(){
				"Take":    func() { s.Take(ctx, with(3+int64(n%2)*6), "k", 1) },
				"TakeAll": func() { s.TakeAll(ctx, reqs[n%2], out) },
				"Limiter": func() { ls[[]int64{1, 12}[n%2]].Allow(ctx, "k") },
			} {
				if m := mallocs(2000, func() { n++; f() }); m != 0 {
					t.Errorf("%s with two bursts on a held key: %d allocations in 2000 calls, want 0", name, m)
				}
			}
			unchanged("the allocation rounds")

			// Another emission interval is another grid: that recompiles.
			if _, err := s.Take(ctx, sluice.Policy{Name: "q", Algorithm: a, Limit: 9, Period: time.Second}, "k", 0); err != nil {
				t.Fatal(err)
			}
			if c.pt.cur.Load() == c || s.gen.Load() == gen {
				t.Error("a request with another Limit did not recompile the table")
			}
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
