// SPDX-License-Identifier: Apache-2.0

package memstore

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/sluicetest"
)

var t0 = time.Unix(0, 0)

// policies has one policy of every algorithm with awkward parameters: an
// emission interval that is not a whole number of nanoseconds.
func policies() []sluice.Policy {
	var ps []sluice.Policy
	for _, a := range sluice.Algorithms() {
		p := sluice.Policy{Name: "p-" + string(a), Algorithm: a, Limit: 7, Period: time.Second}
		if a.IsBucket() {
			p.Burst = 5
		}
		ps = append(ps, p)
	}
	return ps
}

// checkTables verifies the index invariants of every table of s: each entry
// is found by its key through the index, and the index holds nothing else.
func checkTables(t *testing.T, s *Store) {
	t.Helper()
	total := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n := 0
		for _, tb := range sh.tabs {
			if tb == nil {
				continue
			}
			used := 0
			for _, sl := range tb.slots {
				if sl != 0 {
					used++
				}
			}
			if used != tb.len() {
				t.Errorf("shard %d: %d slots used for %d entries", i, used, tb.len())
			}
			for e := range tb.len() {
				k := tb.keyOf(e)
				if _, got := tb.find(tb.hashOf(e), k); got != e {
					t.Errorf("shard %d: key %q (entry %d) found at entry %d", i, k, e, got)
				}
				if int(tb.hashOf(e)>>s.shift) != i {
					t.Errorf("key %q is in shard %d, hashes to %d", k, i, tb.hashOf(e)>>s.shift)
				}
			}
			n += tb.len()
		}
		if n != sh.n || int64(n) != sh.keys.Load() {
			t.Errorf("shard %d: %d entries, count %d, atomic count %d", i, n, sh.n, sh.keys.Load())
		}
		sh.mu.Unlock()
		total += n
	}
	if total != s.Len() {
		t.Errorf("Len() = %d, tables hold %d", s.Len(), total)
	}
}

// TestMatchesModel replays random, tie-heavy traces over many keys through
// the store and through the model kept per key in a map: every decision must
// be identical, and after Sweep the store must hold exactly the keys whose
// model state is not yet equivalent to none.
func TestMatchesModel(t *testing.T) {
	for _, p := range policies() {
		for _, shards := range []int{1, 4} {
			t.Run(fmt.Sprintf("alg=%s/shards=%d", p.Algorithm, shards), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(1, uint64(shards)))
				clock := sluicetest.NewClock(t0)
				s := New(WithClock(clock), WithSweepInterval(0), withShards(shards))
				defer s.Close()
				m, err := model.New(p)
				if err != nil {
					t.Fatal(err)
				}
				oracle := map[string]model.State{}
				now := int64(0)
				const keys = 300
				for step := range 20000 {
					switch rng.IntN(10) {
					case 0:
						now += rng.Int64N(int64(p.Period))
					case 1, 2:
						now += rng.Int64N(int64(p.Period) / 50)
					}
					clock.Set(time.Unix(0, now))
					key := fmt.Sprintf("key-%d", rng.IntN(keys))
					if rng.IntN(3) == 0 {
						key = strings.Repeat(key, 20) // keys longer than 127 bytes
					}
					cost := rng.Int64N(4)
					var want sluice.Decision
					oracle[key], want = m.Take(oracle[key], now, cost)
					got, err := s.Take(context.Background(), p, key, cost)
					if err != nil {
						t.Fatal(err)
					}
					if got != want {
						t.Fatalf("step %d: t=%d key %s cost %d: got %+v, want %+v", step, now, key, cost, got, want)
					}
					if step%2000 == 0 {
						checkTables(t, s)
					}
				}
				s.Sweep()
				live := 0
				for _, st := range oracle {
					if m.ExpiresAt(st) > now {
						live++
					}
				}
				if s.Len() != live {
					t.Errorf("after Sweep: Len() = %d, want %d live keys", s.Len(), live)
				}
				checkTables(t, s)
				st := s.Stats()
				if st.Keys != live || st.Evicted != 0 || st.ForcedEvictions != 0 || st.Expired == 0 {
					t.Errorf("Stats() = %+v, want %d keys, some expired, none evicted", st, live)
				}
			})
		}
	}
}

// step is one request at a fixed instant and the decision expected.
type step struct {
	at        time.Duration // since t0
	key       string
	cost      int64
	allowed   bool
	remaining int64
	keys      int // Len() after the request
}

func runSteps(t *testing.T, s *Store, clock *sluicetest.Clock, p sluice.Policy, steps []step) {
	t.Helper()
	for i, st := range steps {
		clock.Set(t0.Add(st.at))
		d, err := s.Take(context.Background(), p, st.key, st.cost)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if d.Allowed != st.allowed || d.Remaining != st.remaining || s.Len() != st.keys {
			t.Errorf("step %d (t=%v key %s cost %d): got allowed=%v remaining=%d keys=%d, want %v %d %d",
				i, st.at, st.key, st.cost, d.Allowed, d.Remaining, s.Len(), st.allowed, st.remaining, st.keys)
		}
	}
}

func TestRiderAppOpen(t *testing.T) {
	clock := sluicetest.NewClock(t0)
	s := New(WithClock(clock), WithSweepInterval(0))
	defer s.Close()
	p := sluice.Policy{Algorithm: sluice.TokenBucket, Limit: 5, Period: time.Second, Burst: 10}
	ms := time.Millisecond
	runSteps(t, s, clock, p, []step{
		{0, "rider", 0, true, 10, 0}, // a peek stores nothing
		{0, "rider", 1, true, 9, 1},
		{0, "rider", 1, true, 8, 1},
		{0, "rider", 1, true, 7, 1},
		{0, "rider", 1, true, 6, 1},
		{0, "rider", 1, true, 5, 1},
		{0, "rider", 1, true, 4, 1},
		{100 * ms, "rider", 1, true, 3, 1},
		{200 * ms, "rider", 1, true, 3, 1},
		{200 * ms, "other", 11, false, 10, 1}, // impossible: nothing stored
		{200 * ms, "other", 10, true, 0, 2},
		{1600*ms - 1, "rider", 0, true, 9, 2},
		{1600 * ms, "rider", 0, true, 10, 1}, // full again: dropped when touched
		{2200 * ms, "other", 0, true, 10, 0},
	})
}

// TestExpiryExact checks that every algorithm's key is held until the
// instant its state is equivalent to none, and dropped from that instant,
// by Sweep, by the sweeper's step and when touched.
func TestExpiryExact(t *testing.T) {
	for _, p := range policies() {
		t.Run("alg="+string(p.Algorithm), func(t *testing.T) {
			m, _ := model.New(p)
			start := 1500 * time.Millisecond // inside a window
			st, _ := m.Take(model.State{}, int64(start), 3)
			exp := time.Duration(m.ExpiresAt(st))
			if exp <= start {
				t.Fatalf("ExpiresAt = %v, not after %v", exp, start)
			}
			for _, how := range []string{"sweep", "sweeper", "touch"} {
				clock := sluicetest.NewClock(t0.Add(start))
				s := New(WithClock(clock), WithSweepInterval(0))
				if _, err := s.Take(context.Background(), p, "k", 3); err != nil {
					t.Fatal(err)
				}
				drop := func() {
					switch how {
					case "sweep":
						s.Sweep()
					case "sweeper":
						now := s.now()
						for i := range s.shards {
							s.shards[i].mu.Lock()
							s.shards[i].sweepSome(now, 10)
							s.shards[i].mu.Unlock()
						}
					case "touch":
						if d, _ := s.Take(context.Background(), p, "k", 0); !d.Allowed {
							t.Errorf("%s: peek refused", how)
						}
					}
				}
				clock.Set(t0.Add(exp - 1))
				drop()
				if s.Len() != 1 {
					t.Errorf("%s: at ExpiresAt-1ns: Len() = %d, want 1", how, s.Len())
				}
				clock.Set(t0.Add(exp))
				drop()
				if s.Len() != 0 || s.Stats().Expired != 1 {
					t.Errorf("%s: at ExpiresAt: Len() = %d, Stats() = %+v, want 0 keys, 1 expired", how, s.Len(), s.Stats())
				}
				s.Close()
			}
		})
	}
}

func TestReconfiguredPolicyKeepsState(t *testing.T) {
	clock := sluicetest.NewClock(t0)
	s := New(WithClock(clock), WithSweepInterval(0))
	defer s.Close()
	ctx := context.Background()
	p := sluice.Policy{Name: "api", Algorithm: sluice.GCRA, Limit: 10, Period: time.Second}
	for range 10 {
		s.Take(ctx, p, "k", 1)
	}
	if d, _ := s.Take(ctx, p, "k", 1); d.Allowed {
		t.Fatalf("11th request admitted: %+v", d)
	}
	// Doubled: the 10 units taken still count against the new burst of 20.
	p2 := p
	p2.Burst = 20
	if d, _ := s.Take(ctx, p2, "k", 0); d.Remaining != 10 {
		t.Errorf("after doubling the burst: remaining %d, want 10", d.Remaining)
	}
	// An unnamed policy with the same parameters has its own state.
	p3 := p2
	p3.Name = ""
	if d, _ := s.Take(ctx, p3, "k", 0); d.Remaining != 20 {
		t.Errorf("unnamed policy: remaining %d, want 20", d.Remaining)
	}
	// A denominator change (1/3 ns per unit → 1/7) keeps the TAT, rounded
	// up to the new grid: the stored state is never interpreted as older.
	q := sluice.Policy{Name: "frac", Algorithm: sluice.TokenBucket, Limit: 3, Period: time.Second}
	s.Take(ctx, q, "k", 1) // TAT = 1/3 s
	q2 := q
	q2.Limit = 7 // T = 1/7 s; the TAT 333333333+1/3 ns becomes 333333333+3/7 ns
	d, _ := s.Take(ctx, q2, "k", 0)
	m2, _ := model.New(q2)
	_, want := m2.Take(model.State{Time: 333333333, Frac: 3}, 0, 0)
	if d != want {
		t.Errorf("after a denominator change: %+v, want %+v", d, want)
	}
	clock.Set(t0.Add(333333334))
	if s.Take(ctx, q2, "k", 0); s.Len() != 1 { // only p's key remains
		t.Errorf("Len() = %d, want 1 after the reconfigured key expired", s.Len())
	}
}

// TestReconfiguredRefusalWritesNothing: a named token bucket reconfigured
// to another emission interval reads the stored TAT rounded up to the new
// grid (sluice.Policy), but a request it refuses, a peek, a refused batch
// and a Give that gives nothing back write nothing: the key's row and its
// table's grid stay as they were, and a later charge under the first
// parameters answers as if they had not been asked. (The old code wrote the
// rounded-up TAT back: the last charge reported Debt one unit higher and
// RetryAfter 1 ns later, where Redis, which keeps each key's grid, did not.)
func TestReconfiguredRefusalWritesNothing(t *testing.T) {
	ctx := context.Background()
	big := sluice.Policy{Name: "rtb", Algorithm: sluice.TokenBucket, Limit: 1 << 40, Period: time.Hour, Burst: 1 << 41}
	small := sluice.Policy{Name: "rtb", Algorithm: sluice.TokenBucket, Limit: 5, Period: time.Second, Burst: 10}
	between := []struct {
		name string
		ask  func(s *Store) error // refused, or gives nothing back
	}{
		{"none", nil},
		{"refused Take", func(s *Store) error {
			if d, err := s.Take(ctx, small, "k", 1); err != nil || d.Allowed {
				return fmt.Errorf("%+v, %v: want a refusal", d, err)
			}
			return nil
		}},
		{"refused peek", func(s *Store) error {
			if d, err := s.Take(ctx, small, "k", 0); err != nil || d.Allowed {
				return fmt.Errorf("%+v, %v: want a refusal", d, err)
			}
			return nil
		}},
		{"refused TakeStamped", func(s *Store) error {
			if d, _, err := s.TakeStamped(ctx, small, "k", 1); err != nil || d.Allowed {
				return fmt.Errorf("%+v, %v: want a refusal", d, err)
			}
			return nil
		}},
		{"refused TakeAll", func(s *Store) error {
			// Another key admitted, this one refused: nothing recorded.
			out := make([]sluice.Decision, 2)
			if err := s.TakeAll(ctx, []sluice.Request{req(small, "j", 1), req(small, "k", 1)}, out); err != nil || !out[0].Allowed || out[1].Allowed {
				return fmt.Errorf("%+v, %v: want j admitted, k refused", out, err)
			}
			return nil
		}},
		{"Give of nothing", func(s *Store) error {
			if ok, err := s.Give(ctx, small, "k", model.State{Time: 1}, 1); err != nil || ok {
				return fmt.Errorf("%v, %v: want nothing given back", ok, err)
			}
			return nil
		}},
	}
	var want sluice.Decision
	for _, b := range between {
		clock := sluicetest.NewClock(time.Unix(0, 1735730974710292966))
		s := New(WithClock(clock), WithSweepInterval(0))
		charge := func(n int64) sluice.Decision {
			out := make([]sluice.Decision, 1)
			if err := s.TakeAll(ctx, []sluice.Request{{Policy: big, Key: "k", Cost: n, Force: true}}, out); err != nil {
				t.Fatal(err)
			}
			return out[0]
		}
		charge(1 << 41)
		clock.Set(time.Unix(0, 1735737522066550676))
		if d := must(s.Take(ctx, big, "k", 1)); !d.Allowed {
			t.Fatalf("Take(1) under %v: %+v", big, d)
		}
		clock.Set(time.Unix(0, 1735737536052754610))
		c, _ := s.compile(big)
		h := hashString(s, "k")
		tb := s.shardOf(h).table(c.pt)
		_, e := tb.find(h, "k")
		if e < 0 {
			t.Fatal("key not stored")
		}
		row, den := tb.get(e), tb.den
		if b.ask != nil {
			if err := b.ask(s); err != nil {
				t.Fatalf("%s under %v: %v", b.name, small, err)
			}
			if _, e := tb.find(h, "k"); e < 0 || tb.get(e).Time != row.Time || tb.get(e).Frac != row.Frac || tb.den != den {
				t.Errorf("after a %s under %v: the row is %+v in 1/%d ns, want %+v in 1/%d", b.name, small, tb.get(e), tb.den, row, den)
			}
		}
		clock.Set(time.Unix(0, 1735737547282124761))
		got := charge(1 << 41)
		if b.ask == nil {
			want = got
		} else if got != want {
			t.Errorf("with a %s under %v in between, the last charge answers\n  %+v\nwithout it\n  %+v", b.name, small, got, want)
		}
		s.Close()
	}
}

func TestConvFrac(t *testing.T) {
	for _, c := range []struct{ ns, frac, from, to, wantNs, wantFrac int64 }{
		{5, 0, 3, 7, 5, 0},
		{5, 1, 3, 7, 5, 3},       // 1/3 = 2.33/7 → 3/7
		{5, 2, 3, 6, 5, 4},       // exact
		{5, 6, 7, 3, 6, 0},       // 6/7 → 3/3 carries
		{5, 1, 1 << 40, 2, 5, 1}, // tiny → 1/2
		{5, 1<<40 - 1, 1 << 40, 1 << 33, 6, 0},
	} {
		ns, frac := convFrac(c.ns, c.frac, c.from, c.to)
		if ns != c.wantNs || frac != c.wantFrac {
			t.Errorf("convFrac(%d, %d, %d, %d) = %d, %d, want %d, %d", c.ns, c.frac, c.from, c.to, ns, frac, c.wantNs, c.wantFrac)
		}
	}
}

// TestWideDenominator runs a bucket policy whose denominator needs the int64
// fraction column, and switches it to a narrow one and back.
func TestWideDenominator(t *testing.T) {
	clock := sluicetest.NewClock(t0)
	s := New(WithClock(clock), WithSweepInterval(0))
	defer s.Close()
	ctx := context.Background()
	wide := sluice.Policy{Name: "w", Algorithm: sluice.TokenBucket, Limit: 1<<33 + 1, Period: time.Second, Burst: 1 << 20}
	mw, err := model.New(wide)
	if err != nil {
		t.Fatal(err)
	}
	if mw.Denominator() < wideDen {
		t.Fatalf("denominator %d is not wide", mw.Denominator())
	}
	var st model.State
	for i := range 50 {
		clock.Set(t0.Add(time.Duration(i * 7)))
		var want sluice.Decision
		st, want = mw.Take(st, int64(i*7), 1<<19)
		got, _ := s.Take(ctx, wide, "k", 1<<19)
		if got != want {
			t.Fatalf("request %d: got %+v, want %+v", i, got, want)
		}
	}
	narrow := wide
	narrow.Limit = 1 << 30
	mn, _ := model.New(narrow)
	now := s.now()
	st.Time, st.Frac = convFrac(st.Time, st.Frac, mw.Denominator(), mn.Denominator())
	if _, want := mn.Take(st, now, 0); want != must(s.Take(ctx, narrow, "k", 0)) {
		t.Errorf("narrow: got %+v, want %+v", must(s.Take(ctx, narrow, "k", 0)), want)
	}
	st.Time, st.Frac = convFrac(st.Time, st.Frac, mn.Denominator(), mw.Denominator())
	if _, want := mw.Take(st, now, 0); want != must(s.Take(ctx, wide, "k", 0)) {
		t.Errorf("wide again: got %+v, want %+v", must(s.Take(ctx, wide, "k", 0)), want)
	}
	checkTables(t, s)
}

func TestErrors(t *testing.T) {
	clock := sluicetest.NewClock(t0)
	s := New(WithClock(clock), WithSweepInterval(0))
	ctx := context.Background()
	good := sluice.Policy{Algorithm: sluice.GCRA, Limit: 1, Period: time.Second}
	bad := sluice.Policy{Name: "bad", Algorithm: sluice.GCRA, Limit: 0, Period: time.Second}

	if _, err := s.Take(ctx, good, "k", -1); err == nil || err.Error() != `memstore: take "k": cost -1: must be >= 0` {
		t.Errorf("negative cost: %v", err)
	}
	if _, err := s.Take(ctx, bad, "k", 1); err == nil || !strings.Contains(err.Error(), bad.Validate().Error()) {
		t.Errorf("invalid policy: %v, want it to contain %q", err, bad.Validate())
	}
	if _, err := s.Take(ctx, sluice.Policy{Algorithm: "nope", Limit: 1, Period: 1}, "k", 1); err == nil {
		t.Error("unknown algorithm: no error")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Take(cctx, good, "k", 1); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
	out := make([]sluice.Decision, 1)
	if err := s.TakeAll(cctx, []sluice.Request{req(good, "k", 1)}, out); !errors.Is(err, context.Canceled) {
		t.Errorf("TakeAll, cancelled context: %v", err)
	}
	if err := s.TakeAll(ctx, []sluice.Request{req(good, "k", 1)}, nil); err == nil {
		t.Error("TakeAll with len(out) != len(reqs): no error")
	}
	reqs := []sluice.Request{req(good, "a", 1), req(good, "b", -2)}
	if err := s.TakeAll(ctx, reqs, make([]sluice.Decision, 2)); err == nil || err.Error() != `memstore: take all: request 1 (key "b"): cost -2: must be >= 0` {
		t.Errorf("TakeAll, negative cost: %v", err)
	}
	if err := s.TakeAll(ctx, []sluice.Request{req(bad, "a", 1)}, out); err == nil || !strings.Contains(err.Error(), "limit 0") {
		t.Errorf("TakeAll, invalid policy: %v", err)
	}
	if s.Len() != 0 {
		t.Errorf("failed calls stored %d keys", s.Len())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.Take(ctx, good, "k", 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Take after Close: %v", err)
	}
	if err := s.TakeAll(ctx, []sluice.Request{req(good, "k", 1)}, out); !errors.Is(err, ErrClosed) {
		t.Errorf("TakeAll after Close: %v", err)
	}
}

// TestConcurrentOneKey: 256 goroutines released together make 20,000
// attempts on one key with limit 1,000 and negligible refill; exactly 1,000
// units are admitted (142 requests of cost 7), for every algorithm.
func TestConcurrentOneKey(t *testing.T) {
	for _, a := range sluice.Algorithms() {
		for _, cost := range []int64{1, 7} {
			t.Run(fmt.Sprintf("alg=%s/cost=%d", a, cost), func(t *testing.T) {
				clock := sluicetest.NewClock(t0.Add(time.Hour / 2))
				s := New(WithClock(clock), WithSweepInterval(0))
				defer s.Close()
				p := sluice.Policy{Algorithm: a, Limit: 1000, Period: time.Hour}
				var admitted atomic.Int64
				var wg sync.WaitGroup
				start := make(chan struct{})
				for g := range 256 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						for i := g; i < 20000; i += 256 {
							d, err := s.Take(context.Background(), p, "hot", cost)
							if err != nil {
								t.Error(err)
								return
							}
							if d.Allowed {
								admitted.Add(1)
							}
						}
					}()
				}
				close(start)
				wg.Wait()
				if want := 1000 / cost; admitted.Load() != want {
					t.Errorf("admitted %d, want %d", admitted.Load(), want)
				}
			})
		}
	}
}

// TestTakeAll runs batches at fixed instants: all-or-nothing, the same key
// twice, and the re-reported unconsumed state of a refused batch.
func TestTakeAll(t *testing.T) {
	clock := sluicetest.NewClock(t0)
	s := New(WithClock(clock), WithSweepInterval(0), withShards(4))
	defer s.Close()
	ctx := context.Background()
	ip := sluice.Policy{Name: "ip", Algorithm: sluice.FixedWindow, Limit: 5, Period: time.Minute}
	org := sluice.Policy{Name: "org", Algorithm: sluice.TokenBucket, Limit: 3, Period: time.Minute}
	type dec struct {
		allowed   bool
		remaining int64
	}
	batches := []struct {
		reqs []sluice.Request
		want []dec
		keys int
	}{
		{[]sluice.Request{req(ip, "1.2.3.4", 2), req(org, "acme", 2)}, []dec{{true, 3}, {true, 1}}, 2},
		// org has 1 left: refused; ip reports its unconsumed state.
		{[]sluice.Request{req(ip, "1.2.3.4", 1), req(org, "acme", 2)}, []dec{{true, 3}, {false, 1}}, 2},
		// The same key twice sees its earlier effect, and a refused batch
		// re-reports the first as unconsumed.
		{[]sluice.Request{req(ip, "1.2.3.4", 2), req(ip, "1.2.3.4", 2), req(org, "acme", 1), req(ip, "5.6.7.8", 5)}, []dec{{true, 3}, {false, 1}, {true, 1}, {true, 5}}, 2},
		{[]sluice.Request{req(ip, "1.2.3.4", 2), req(ip, "1.2.3.4", 1), req(org, "acme", 1), req(ip, "5.6.7.8", 5)}, []dec{{true, 1}, {true, 0}, {true, 0}, {true, 0}}, 3},
		{[]sluice.Request{req(ip, "1.2.3.4", 0), req(org, "acme", 0), req(ip, "new", 0)}, []dec{{false, 0}, {false, 0}, {true, 5}}, 3}, // peeks at spent keys are refused
		{[]sluice.Request{req(org, "acme", 1), req(ip, "new", 1)}, []dec{{false, 0}, {true, 5}}, 3},
	}
	for i, b := range batches {
		out := make([]sluice.Decision, len(b.reqs))
		if err := s.TakeAll(ctx, b.reqs, out); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		for j, d := range out {
			if d.Allowed != b.want[j].allowed || d.Remaining != b.want[j].remaining {
				t.Errorf("batch %d request %d: got allowed=%v remaining=%d, want %+v", i, j, d.Allowed, d.Remaining, b.want[j])
			}
		}
		if s.Len() != b.keys {
			t.Errorf("batch %d: Len() = %d, want %d", i, s.Len(), b.keys)
		}
	}
	checkTables(t, s)
}

// TestTakeAllMatchesModel compares random batches against the models applied
// to working copies, committing iff all are admitted.
func TestTakeAllMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	clock := sluicetest.NewClock(t0)
	s := New(WithClock(clock), WithSweepInterval(0), withShards(4))
	defer s.Close()
	ps := policies()
	models := make([]*model.Model, len(ps))
	for i, p := range ps {
		models[i], _ = model.New(p)
	}
	type okey struct {
		pol int
		key string
	}
	oracle := map[okey]model.State{}
	now := int64(0)
	for batch := range 3000 {
		now += rng.Int64N(int64(time.Second) / 20)
		clock.Set(time.Unix(0, now))
		n := 1 + rng.IntN(12) // some batches exceed the stack buffer
		reqs := make([]sluice.Request, n)
		pols := make([]int, n)
		for i := range reqs {
			pols[i] = rng.IntN(len(ps))
			reqs[i] = sluice.Request{Policy: ps[pols[i]], Key: fmt.Sprint("k", rng.IntN(6)), Cost: rng.Int64N(3)}
		}
		want, _ := modelBatch(oracle, reqs, now,
			func(i int) okey { return okey{pols[i], reqs[i].Key} },
			func(i int) *model.Model { return models[pols[i]] })
		got := make([]sluice.Decision, n)
		if err := s.TakeAll(context.Background(), reqs, got); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("batch %d request %d (%s %q cost %d): got %+v, want %+v", batch, i, reqs[i].Policy.Algorithm, reqs[i].Key, reqs[i].Cost, got[i], want[i])
			}
		}
	}
	checkTables(t, s)
}

// modelBatch evaluates reqs on the oracle's states as TakeAll documents:
// in order, each seeing the earlier ones, all or nothing. It returns the
// decisions TakeAll must give and whether all were admitted, in which case
// it has updated oracle. key(i) and modelOf(i) are request i's state key and
// model.
func modelBatch[K comparable](oracle map[K]model.State, reqs []sluice.Request, now int64, key func(int) K, modelOf func(int) *model.Model) ([]sluice.Decision, bool) {
	work := map[K]model.State{}
	want := make([]sluice.Decision, len(reqs))
	all := true
	for i, r := range reqs {
		k := key(i)
		st, ok := work[k]
		if !ok {
			st = cloneState(oracle[k])
		}
		work[k], want[i] = modelOf(i).Take(st, now, r.Cost)
		all = all && want[i].Allowed
	}
	if all {
		maps.Copy(oracle, work)
		return want, true
	}
	for i := range reqs {
		if want[i].Allowed {
			_, want[i] = modelOf(i).Take(oracle[key(i)], now, 0)
		}
	}
	return want, false
}

func cloneState(s model.State) model.State {
	s.Log = append([]model.LogEntry(nil), s.Log...)
	return s
}

// TestTakeAllNoDeadlock runs overlapping batches in opposite key orders from
// many goroutines, mixed with single takes.
func TestTakeAllNoDeadlock(t *testing.T) {
	s := New(WithSweepInterval(0), withShards(8))
	defer s.Close()
	p := sluice.Policy{Algorithm: sluice.GCRA, Limit: 1 << 30, Period: time.Second}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]sluice.Decision, 10)
			reqs := make([]sluice.Request, 10)
			for i := range 300 {
				for j := range reqs {
					k := j
					if g%2 == 1 {
						k = len(reqs) - 1 - j
					}
					reqs[j] = sluice.Request{Policy: p, Key: fmt.Sprint("key", k), Cost: 1}
				}
				if err := s.TakeAll(context.Background(), reqs, out); err != nil {
					t.Error(err)
					return
				}
				if _, err := s.Take(context.Background(), p, fmt.Sprint("key", i%10), 1); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestMaxKeys inserts many more keys than the bound: the store never holds
// more, evicts expired keys before live ones, and counts forced evictions.
func TestMaxKeys(t *testing.T) {
	for _, shards := range []int{1, 8} {
		t.Run(fmt.Sprint("shards=", shards), func(t *testing.T) {
			clock := sluicetest.NewClock(t0)
			const max = 1001
			s := New(WithClock(clock), WithSweepInterval(0), WithMaxKeys(max), withShards(shards))
			defer s.Close()
			quota := 0
			for i := range s.shards {
				quota += s.shards[i].quota
			}
			if quota != max {
				t.Fatalf("quotas add up to %d, want %d", quota, max)
			}
			ps := policies()
			ctx := context.Background()
			// Fill with keys that expire within a second.
			for i := range 5000 {
				if _, err := s.Take(ctx, ps[i%len(ps)], fmt.Sprint("short", i), 1); err != nil {
					t.Fatal(err)
				}
				if s.Len() > max {
					t.Fatalf("after %d keys: Len() = %d > %d", i+1, s.Len(), max)
				}
			}
			st := s.Stats()
			if st.ForcedEvictions == 0 || st.Keys < max-max/10 {
				t.Errorf("after filling: %+v, want forced evictions and nearly %d keys", st, max)
			}
			checkTables(t, s)
			// Two hours later everything has expired: new keys replace
			// expired ones and nothing more is forced out.
			clock.Advance(2 * time.Hour)
			long := sluice.Policy{Name: "long", Algorithm: sluice.SlidingWindow, Limit: 10, Period: time.Hour}
			for i := range max / 2 {
				s.Take(ctx, long, fmt.Sprint("long", i), 1)
			}
			after := s.Stats()
			if after.ForcedEvictions != st.ForcedEvictions || after.Evicted+after.Expired == st.Evicted+st.Expired {
				t.Errorf("after expiry: %+v (before %+v), want expired keys evicted, none forced", after, st)
			}
			if after.Keys > max {
				t.Errorf("Len() = %d > %d", after.Keys, max)
			}
			s.Sweep()
			if got := s.Len(); got != max/2 {
				t.Errorf("after Sweep: Len() = %d, want the %d long keys", got, max/2)
			}
			// Every drop is counted exactly once.
			final := s.Stats()
			if total := uint64(final.Keys) + final.Expired + final.Evicted + final.ForcedEvictions; total != 5000+max/2 {
				t.Errorf("%+v accounts for %d keys, want %d", final, total, 5000+max/2)
			}
			checkTables(t, s)
		})
	}
}

// TestMaxKeysPrefersExpired: while expired keys remain, making room never
// forces out a live key, even when the live keys outnumber them and come
// first in the shard.
func TestMaxKeysPrefersExpired(t *testing.T) {
	clock := sluicetest.NewClock(t0)
	s := New(WithClock(clock), WithSweepInterval(0), WithMaxKeys(200), withShards(1))
	defer s.Close()
	ctx := context.Background()
	live := sluice.Policy{Name: "live", Algorithm: sluice.GCRA, Limit: 10, Period: time.Hour}
	short := sluice.Policy{Name: "short", Algorithm: sluice.GCRA, Limit: 10, Period: time.Second}
	for i := range 150 {
		s.Take(ctx, live, fmt.Sprint("live", i), 1)
	}
	for i := range 50 {
		s.Take(ctx, short, fmt.Sprint("short", i), 1)
	}
	clock.Advance(time.Second)
	for i := range 50 {
		s.Take(ctx, live, fmt.Sprint("new", i), 1)
	}
	if st := s.Stats(); st.Keys != 200 || st.ForcedEvictions != 0 || st.Evicted != 50 {
		t.Errorf("Stats() = %+v, want 200 keys, the 50 expired evicted, none forced", st)
	}
}

// TestMaxKeysTakeAll: a batch of more new keys than a shard may hold keeps
// the bound, evicting the batch's own keys last.
func TestMaxKeysTakeAll(t *testing.T) {
	clock := sluicetest.NewClock(t0)
	s := New(WithClock(clock), WithSweepInterval(0), WithMaxKeys(2))
	defer s.Close()
	p := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 5, Period: time.Minute}
	ctx := context.Background()
	s.Take(ctx, p, "old", 1)
	reqs := []sluice.Request{req(p, "a", 1), req(p, "b", 1), req(p, "c", 1)}
	out := make([]sluice.Decision, 3)
	if err := s.TakeAll(ctx, reqs, out); err != nil {
		t.Fatal(err)
	}
	for i, d := range out {
		if !d.Allowed {
			t.Errorf("request %d refused", i)
		}
	}
	if st := s.Stats(); st.Keys != 2 || st.ForcedEvictions != 2 {
		t.Errorf("Stats() = %+v, want 2 keys and 2 forced evictions (old, and c not stored)", st)
	}
	for _, k := range []string{"a", "b"} {
		if d, _ := s.Take(ctx, p, k, 0); d.Remaining != 4 {
			t.Errorf("%s: remaining %d, want 4 (kept)", k, d.Remaining)
		}
	}
}

// TestAllocs: a decision on a key the store holds allocates nothing, for
// every algorithm, and neither does a small batch of such keys.
func TestAllocs(t *testing.T) {
	ctx := context.Background()
	for _, p := range policies() {
		t.Run("alg="+string(p.Algorithm), func(t *testing.T) {
			clock := sluicetest.NewClock(t0)
			s := New(WithClock(clock), WithSweepInterval(0))
			defer s.Close()
			// Admit everything, so the state changes each time; sliding-log
			// entries leave the window as fast as they come.
			p.Limit, p.Period = 1<<40, 100*time.Millisecond
			if p.Algorithm.IsBucket() {
				p.Burst = 1 << 40
			}
			for i := range 100 {
				s.Take(ctx, p, fmt.Sprint("key", i), 1)
			}
			step := 0
			allocs := testing.AllocsPerRun(2000, func() {
				step++
				clock.Set(t0.Add(time.Duration(step) * time.Millisecond))
				d, err := s.Take(ctx, p, "key7", 1)
				if err != nil || !d.Allowed {
					t.Fatalf("%+v %v", d, err)
				}
			})
			if allocs != 0 {
				t.Errorf("Take on an existing key: %v allocs/op, want 0", allocs)
			}
			// Not even now and then (AllocsPerRun rounds down).
			if n := mallocs(6000, func() {
				step++
				clock.Set(t0.Add(time.Duration(step) * time.Millisecond))
				s.Take(ctx, p, "key7", 1)
			}); n != 0 {
				t.Errorf("Take on an existing key: %d allocations in 6000 calls, want 0", n)
			}
			reqs := []sluice.Request{req(p, "key1", 1), req(p, "key2", 1), req(p, "key1", 1), req(p, "key90", 0)}
			out := make([]sluice.Decision, len(reqs))
			allocs = testing.AllocsPerRun(2000, func() {
				step++
				clock.Set(t0.Add(time.Duration(step) * time.Millisecond))
				if err := s.TakeAll(ctx, reqs, out); err != nil || !out[0].Allowed {
					t.Fatal(out, err)
				}
			})
			if allocs != 0 {
				t.Errorf("TakeAll of existing keys: %v allocs/op, want 0", allocs)
			}
			if n := mallocs(6000, func() {
				step++
				clock.Set(t0.Add(time.Duration(step) * time.Millisecond))
				s.TakeAll(ctx, reqs, out)
			}); n != 0 {
				t.Errorf("TakeAll of existing keys: %d allocations in 6000 calls, want 0", n)
			}
		})
	}
}

// mallocs returns the number of heap allocations made by n calls of f,
// less one stray: a single allocation in the n calls is taken as another
// goroutine's (the runtime counts every goroutine's, and another test's
// sweeper or timer may allocate meanwhile), so 0 is returned for it. An
// allocation of f's own at least twice in n calls counts.
func mallocs(n int, f func()) uint64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		f()
	}
	runtime.ReadMemStats(&after)
	if m := after.Mallocs - before.Mallocs; m > 1 {
		return m
	}
	return 0
}

// TestIndexChurn inserts and removes keys at random in one table and checks
// it against a map, exercising backward-shift deletion, growth, shrinking
// and arena compaction.
func TestIndexChurn(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s := New(WithSweepInterval(0))
	defer s.Close()
	c, _ := s.compile(sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Second})
	tb := newTable(c.pt, c, s.seed)
	want := map[string]int64{}
	n := 50
	for i := range 90000 { // ends with a phase of few keys
		if i%10000 == 0 {
			n = 50
			if (i/10000)%2 == 1 {
				n = 5000 // grow
			} else {
				// Shrink back: drop the keys outside the small key space.
				for k := range want {
					var j int
					fmt.Sscanf(k, "k%d", &j)
					if j >= n {
						slot, e := tb.find(hashString(s, k), k)
						if e < 0 {
							t.Fatalf("op %d: key %q lost", i, k)
						}
						tb.remove(slot, e)
						delete(want, k)
					}
				}
			}
		}
		k := fmt.Sprint("k", rng.IntN(n), strings.Repeat("x", rng.IntN(3)*100))
		h := hashString(s, k)
		slot, e := tb.find(h, k)
		if _, ok := want[k]; ok != (e >= 0) {
			t.Fatalf("op %d: key %q present %v, want %v", i, k, e >= 0, ok)
		}
		switch {
		case e >= 0 && tb.get(e).Count != want[k]:
			t.Fatalf("op %d: key %q count %d, want %d", i, k, tb.get(e).Count, want[k])
		case e >= 0 && rng.IntN(2) == 0:
			tb.remove(slot, e)
			delete(want, k)
		case e < 0:
			e = tb.insert(h, k)
			tb.set(e, model.State{Time: 1, Count: int64(i)})
			want[k] = int64(i)
		}
		if tb.len() != len(want) {
			t.Fatalf("op %d: %d entries, want %d", i, tb.len(), len(want))
		}
		if 2*tb.dead > len(tb.arena) && tb.dead > 1024 {
			t.Fatalf("op %d: arena %d bytes with %d dead", i, len(tb.arena), tb.dead)
		}
	}
	if len(tb.slots) > 64 && 8*tb.len() < len(tb.slots) || cap(tb.rs.(*fixedRows).r) > 4*tb.len()+16 {
		t.Errorf("%d slots and %d rows for %d entries", len(tb.slots), cap(tb.rs.(*fixedRows).r), tb.len())
	}
	for k, v := range want {
		if _, e := tb.find(hashString(s, k), k); e < 0 || tb.get(e).Count != v {
			t.Errorf("key %q lost", k)
		}
	}
}

func hashString(s *Store, k string) uint64 { return maphash.String(s.seed, k) }

func must(d sluice.Decision, err error) sluice.Decision {
	if err != nil {
		panic(err)
	}
	return d
}

func req(p sluice.Policy, key string, cost int64) sluice.Request {
	return sluice.Request{Policy: p, Key: key, Cost: cost}
}

// TestTakeAllReconfigured: one named policy with two denominators in one
// batch on one key; the working copy is carried between them exactly as the
// stored state would be.
func TestTakeAllReconfigured(t *testing.T) {
	clock := sluicetest.NewClock(t0)
	s := New(WithClock(clock), WithSweepInterval(0))
	defer s.Close()
	p3 := sluice.Policy{Name: "x", Algorithm: sluice.GCRA, Limit: 3, Period: time.Second}
	p7 := p3
	p7.Limit = 7
	m3, _ := model.New(p3)
	m7, _ := model.New(p7)
	st, _ := m3.Take(model.State{}, 0, 1)
	st.Time, st.Frac = convFrac(st.Time, st.Frac, m3.Denominator(), m7.Denominator())
	st, _ = m7.Take(st, 0, 2)
	_, want := m7.Take(st, 0, 0)

	out := make([]sluice.Decision, 2)
	if err := s.TakeAll(context.Background(), []sluice.Request{req(p3, "k", 1), req(p7, "k", 2)}, out); err != nil {
		t.Fatal(err)
	}
	if !out[0].Allowed || !out[1].Allowed {
		t.Fatalf("refused: %+v", out)
	}
	if got := must(s.Take(context.Background(), p7, "k", 0)); got != want {
		t.Errorf("after the batch: %+v, want %+v", got, want)
	}
	c, _ := s.compile(p7)
	h := hashString(s, "k")
	tb := s.shardOf(h).table(c.pt)
	_, e := tb.find(h, "k")
	if e < 0 {
		t.Fatal("key not stored")
	}
	if tb.get(e).Time != st.Time || tb.get(e).Frac != st.Frac || tb.den != m7.Denominator() {
		t.Errorf("stored state %+v in 1/%d ns, want %+v in 1/%d", tb.get(e), tb.den, st, m7.Denominator())
	}
}

// TestTakeAllExpiryOfTheWriter: a batch's state expires when the policy
// that wrote it says, not a later request of the batch that only read it:
// a peek under a shorter period of the same name, which finds idle the
// window a longer one just counted in, does not forget the admission (the
// old code dropped it: Remaining 8).
func TestTakeAllExpiryOfTheWriter(t *testing.T) {
	clock := sluicetest.NewClock(t0.Add(2700 * time.Millisecond))
	s := New(WithClock(clock), WithSweepInterval(0))
	defer s.Close()
	long := sluice.Policy{Name: "x", Algorithm: sluice.FixedWindow, Limit: 8, Period: 1500 * time.Millisecond} // [1.5 s, 3 s)
	short := sluice.Policy{Name: "x", Algorithm: sluice.FixedWindow, Limit: 5, Period: time.Second}            // idle at 2.5 s
	out := make([]sluice.Decision, 2)
	if err := s.TakeAll(context.Background(), []sluice.Request{req(long, "k", 2), req(short, "k", 0)}, out); err != nil {
		t.Fatal(err)
	}
	if !out[0].Allowed || !out[1].Allowed {
		t.Fatalf("refused: %+v", out)
	}
	m, _ := model.New(long)
	st, _ := m.Take(model.State{}, clock.Now().UnixNano(), 2)
	_, want := m.Take(st, clock.Now().UnixNano(), 0)
	if got := must(s.Take(context.Background(), long, "k", 0)); got != want || got.Remaining != 6 {
		t.Errorf("after the batch: %+v, want %+v", got, want)
	}
}

// TestRefundForeignStampClosed: Refund with a stamp that is not the
// store's own (nil, as a wrapper store with no stamp passes on) fails with
// an error wrapping sluice.ErrStoreClosed after Close and on the zero
// Store, as every method does. (It answered false and nil, as an open
// store.)
func TestRefundForeignStampClosed(t *testing.T) {
	ctx := context.Background()
	p := sluice.Policy{Name: "r", Algorithm: sluice.GCRA, Limit: 5, Period: time.Second}
	s := New(WithSweepInterval(0))
	for _, stamp := range []any{nil, "foreign"} {
		if ok, err := s.Refund(ctx, p, "k", stamp, 1); ok || err != nil {
			t.Errorf("Refund(%v) on an open store: %v, %v; want false, nil", stamp, ok, err)
		}
	}
	s.Close()
	var zero Store
	for _, st := range []struct {
		name string
		s    *Store
	}{{"a closed Store", s}, {"the zero Store", &zero}} {
		for _, stamp := range []any{nil, "foreign"} {
			if ok, err := st.s.Refund(ctx, p, "k", stamp, 1); ok || !errors.Is(err, sluice.ErrStoreClosed) {
				t.Errorf("Refund(%v) on %s: %v, %v; want false and an error wrapping sluice.ErrStoreClosed", stamp, st.name, ok, err)
			}
		}
	}
}

// TestClosedEveryMethod: after Close every method that returns an error
// returns one wrapping sluice.ErrStoreClosed, and a closed store admits
// nothing. (Bind succeeded on the old code.)
func TestClosedEveryMethod(t *testing.T) {
	s := New(WithSweepInterval(0))
	ctx := context.Background()
	p := sluice.Policy{Algorithm: sluice.GCRA, Limit: 10, Period: time.Second}
	_, stamp, err := s.TakeStamped(ctx, p, "k", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	check := func(method string, err error) {
		t.Helper()
		if !errors.Is(err, sluice.ErrStoreClosed) {
			t.Errorf("%s after Close: %v, want sluice.ErrStoreClosed", method, err)
		}
	}
	d, err := s.Take(ctx, p, "k", 1)
	check("Take", err)
	if d.Allowed {
		t.Error("Take after Close admitted")
	}
	out := make([]sluice.Decision, 1)
	check("TakeAll", s.TakeAll(ctx, []sluice.Request{{Policy: p, Key: "k", Cost: 1}}, out))
	if out[0].Allowed {
		t.Error("TakeAll after Close admitted")
	}
	check("Reset", s.Reset(ctx, p, "k"))
	_, _, err = s.TakeStamped(ctx, p, "k", 1)
	check("TakeStamped", err)
	_, err = s.Give(ctx, p, "k", stamp, 1)
	check("Give", err)
	_, err = s.Bind(p)
	check("Bind", err)
	_, err = s.Acquire(ctx, "n", "k", "h", 1, time.Second)
	check("Acquire", err)
	_, err = s.Release(ctx, "n", "k", "h")
	check("Release", err)
	_, err = s.Extend(ctx, "n", "k", "h", time.Second)
	check("Extend", err)
	if err := s.Close(); err != nil {
		t.Errorf("a second Close: %v, want nil", err)
	}
}
