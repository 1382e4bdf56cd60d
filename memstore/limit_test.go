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

// TestLimitsShareTheCompiledPolicy: requests of one named window policy
// that differ only in Limit (sluice serve's RLS: a descriptor's limit
// override shares the count of the fixed-window rule it overrides, and
// overrides of one period on a descriptor that matches no rule share one
// name) are decided by the policy's one compiled form, each under its own
// limit: through Take, TakeAll (takes and charges), a bound Limiter,
// TakeStamped and Give, none recompiles the table (which made a new model,
// bumped the store's policy generation, so that every shard's sweep bound
// was void, and retired the hot key), and a held key's decisions allocate
// nothing. Each decision is the model's for the request's policy, on the
// key's one state. Another Period still recompiles it, as before.
func TestLimitsShareTheCompiledPolicy(t *testing.T) {
	for _, a := range []sluice.Algorithm{sluice.FixedWindow, sluice.SlidingWindow, sluice.SlidingLog} {
		t.Run("alg="+string(a), func(t *testing.T) {
			clock := sluicetest.NewClock(t0)
			s := New(WithClock(clock), WithSweepInterval(0))
			defer s.Close()
			ctx := context.Background()
			p := sluice.Policy{Name: "q", Algorithm: a, Limit: 7, Period: time.Second}
			with := func(l int64) sluice.Policy { q := p; q.Limit = l; return q }
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
			for _, l := range []int64{7, 1, 3, 5, 12} {
				ls[l] = must2(sluice.NewLimiter(s, with(l)))
			}
			var outcomes [2]int // refused, admitted
			for i, l := range []int64{5, 7, 1, 12, 3, 5, 5, 7, 12, 3, 1, 7, 3, 12, 5, 1, 12, 12, 7, 3} {
				clock.Set(t0.Add(time.Duration(i) * 130 * time.Millisecond))
				q := with(l)
				var got sluice.Decision
				var err error
				switch i % 5 {
				case 0:
					got, err = s.Take(ctx, q, "k", 1)
				case 1:
					out := make([]sluice.Decision, 1)
					err = s.TakeAll(ctx, []sluice.Request{req(q, "k", 1)}, out)
					got = out[0]
				case 2:
					got, err = ls[l].Allow(ctx, "k")
				case 3:
					// A charge: recorded past the limit, and the peek after
					// it judged under the request's limit.
					out := make([]sluice.Decision, 1)
					r := req(q, "k", 2)
					r.Force = true
					if err = s.TakeAll(ctx, []sluice.Request{r}, out); err != nil {
						t.Fatal(err)
					}
					next, w := must2(model.New(q)).Charge(st, clock.Now().UnixNano(), 2)
					st = next
					if out[0] != w {
						t.Fatalf("step %d, limit %d: a charge %+v, want %+v", i, l, out[0], w)
					}
					unchanged("a charge")
					continue
				case 4:
					var stamp model.State
					if got, stamp, err = s.TakeStamped(ctx, q, "k", 2); err != nil {
						t.Fatal(err)
					}
					if w := want(q, 2); got != w {
						t.Fatalf("step %d, limit %d: TakeStamped %+v, want %+v", i, l, got, w)
					}
					outcomes[b2i(got.Allowed)]++
					unchanged("TakeStamped")
					if !got.Allowed {
						continue
					}
					gave, err := s.Give(ctx, q, "k", stamp, 1)
					next, ok := must2(model.New(q)).Give(st, stamp, 1)
					if err != nil || gave != ok {
						t.Fatalf("step %d, limit %d: Give %v, %v; the model %v", i, l, gave, err, ok)
					}
					if ok {
						st = next
					}
					unchanged("Give")
					continue
				}
				if w := want(q, 1); err != nil || got != w {
					t.Fatalf("step %d, limit %d (way %d): %+v, %v; want %+v", i, l, i%5, got, err, w)
				}
				outcomes[b2i(got.Allowed)]++
				unchanged("a take")
			}
			if outcomes[0] == 0 || outcomes[1] == 0 {
				t.Fatalf("%d refused, %d admitted: want some of each", outcomes[0], outcomes[1])
			}

			// A held key's decisions under alternating limits allocate
			// nothing, whichever way they are asked. (A sliding log's
			// admissions append entries; its keys are asked with a cost of
			// 0 here, peeks, which append none.)
			clock.Set(t0.Add(time.Hour))
			s.Take(ctx, p, "k", 1)
			cost := int64(1)
			if a == sluice.SlidingLog {
				cost = 0
			}
			n := 0
			out := make([]sluice.Decision, 1)
			reqs := [][]sluice.Request{{req(with(3), "k", cost)}, {req(p, "k", cost)}}
			for name, f := range map[string]func(){
				"Take":    func() { s.Take(ctx, with(3+int64(n%2)*9), "k", cost) },
				"TakeAll": func() { s.TakeAll(ctx, reqs[n%2], out) },
				"Limiter": func() { ls[[]int64{1, 12}[n%2]].AllowN(ctx, "k", cost) },
			} {
				if m := mallocs(2000, func() { n++; f() }); m != 0 {
					t.Errorf("%s with two limits on a held key: %d allocations in 2000 calls, want 0", name, m)
				}
			}
			unchanged("the allocation rounds")

			// Another period is another window: that recompiles.
			if _, err := s.Take(ctx, sluice.Policy{Name: "q", Algorithm: a, Limit: 7, Period: 2 * time.Second}, "k", 0); err != nil {
				t.Fatal(err)
			}
			if c.pt.cur.Load() == c || s.gen.Load() == gen {
				t.Error("a request with another Period did not recompile the table")
			}
		})
	}
}
