// SPDX-License-Identifier: Apache-2.0

package memstore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/sluicetest"
)

// tables returns the number of tables the store's shards hold.
func (s *Store) tables() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for _, t := range sh.tabs {
			if t != nil {
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n
}

// floodPolicy is the i-th of many distinct policies, as distinct RLS
// descriptor limit overrides make them.
func floodPolicy(i int) sluice.Policy {
	return sluice.Policy{Algorithm: sluice.FixedWindow, Limit: int64(1 + i), Period: time.Minute}
}

// TestPolicyFloodIsFreed: 100,000 distinct policies, each with a key, are
// created (on the old code in quadratic time: 10k took 5 s, 30k 50 s), and
// once their keys have expired the sweeper frees every table and policy.
// On the old code 30,000 tables stayed after every key expired.
func TestPolicyFloodIsFreed(t *testing.T) {
	clock := sluicetest.NewClock(t0)
	s := New(WithClock(clock), WithSweepInterval(0))
	defer s.Close()
	ctx := context.Background()
	const n = 100_000
	for i := range n {
		if d, err := s.Take(ctx, floodPolicy(i), "k", 1); err != nil || !d.Allowed {
			t.Fatalf("policy %d: %+v, %v", i, d, err)
		}
	}
	if st := s.Stats(); st.Policies != n || st.Keys != n {
		t.Fatalf("Stats() = %+v, want %d policies and keys", st, n)
	}
	clock.Set(t0.Add(time.Minute)) // every window has passed
	s.Sweep()
	if st, tabs := s.Stats(), s.tables(); st.Policies != 0 || st.Keys != 0 || tabs != 0 {
		t.Fatalf("after every key expired: Stats() = %+v and %d tables, want none", st, tabs)
	}
	for i := range s.shards {
		if sh := &s.shards[i]; sh.tabs != nil || sh.byPolicy != nil || sh.last != nil || sh.hotp != nil {
			t.Fatalf("shard %d keeps its table index after every table was freed", i)
		}
	}
	if s.reg.idle != nil {
		t.Errorf("the registry keeps its idle list (cap %d)", cap(s.reg.idle))
	}
	// A policy comes back as new, with no state.
	if d, err := s.Take(ctx, floodPolicy(7), "k", 8); err != nil || !d.Allowed {
		t.Fatalf("a freed policy, used again: %+v, %v", d, err)
	}
}

// TestPolicyFreedOnlyWithoutKeys: a policy that holds a key is never
// dropped; one that holds none (here, every request was refused) is, at
// the next sweep.
func TestPolicyFreedOnlyWithoutKeys(t *testing.T) {
	clock := sluicetest.NewClock(t0)
	s := New(WithClock(clock), WithSweepInterval(0))
	defer s.Close()
	ctx := context.Background()
	kept := sluice.Policy{Algorithm: sluice.GCRA, Limit: 1, Period: time.Hour}
	refused := sluice.Policy{Algorithm: sluice.GCRA, Limit: 1, Period: time.Minute}
	if _, err := s.Take(ctx, kept, "k", 1); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Take(ctx, refused, "k", 2); err != nil || d.Allowed {
		t.Fatalf("cost 2 of 1: %+v, %v", d, err)
	}
	clock.Set(t0.Add(30 * time.Minute))
	s.Sweep()
	if st := s.Stats(); st.Policies != 1 || st.Keys != 1 {
		t.Fatalf("Stats() = %+v, want the one policy with a key", st)
	}
	if d, err := s.Take(ctx, kept, "k", 1); err != nil || d.Allowed {
		t.Fatalf("the kept policy forgot its key: %+v, %v", d, err)
	}
}

// TestMaxPolicies: at the bound, a take for a policy the store does not
// hold fails with sluice.ErrStoreFull and admits nothing; policies with no
// keys make room without waiting for the sweeper, and a policy with keys
// never does.
func TestMaxPolicies(t *testing.T) {
	clock := sluicetest.NewClock(t0)
	s := New(WithClock(clock), WithSweepInterval(0), WithMaxPolicies(3))
	defer s.Close()
	ctx := context.Background()
	for i := range 3 {
		if _, err := s.Take(ctx, floodPolicy(i), "k", 1); err != nil {
			t.Fatal(err)
		}
	}
	d, err := s.Take(ctx, floodPolicy(3), "k", 1)
	if !errors.Is(err, sluice.ErrStoreFull) || d.Allowed {
		t.Fatalf("a fourth policy of 3: %+v, %v; want an error wrapping sluice.ErrStoreFull", d, err)
	}
	// The held policies still decide.
	if d, err := s.Take(ctx, floodPolicy(0), "k", 1); err != nil || d.Allowed {
		t.Fatalf("policy 0 (limit 1, used): %+v, %v", d, err)
	}
	// A Limiter is told (its failure mode decides; fail-closed refuses).
	l, err := sluice.NewLimiter(s, floodPolicy(4), sluice.WithFailureMode(sluice.FailClosed))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := l.Allow(ctx, "k"); d.Allowed || !errors.Is(err, sluice.ErrStoreFull) {
		t.Fatalf("a fail-closed Limiter of a fifth policy: %+v, %v; want refused with sluice.ErrStoreFull", d, err)
	}
	// Once policy 1's key has expired (its window passed; the others'
	// keys are renewed), its table is freed as it is touched, and the
	// policy makes room when a new one needs it: no sweep needed.
	clock.Set(t0.Add(time.Minute))
	for _, i := range []int{0, 2} {
		if _, err := s.Take(ctx, floodPolicy(i), "k", 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Take(ctx, floodPolicy(1), "k", 0); err != nil { // a peek at the expired key drops it
		t.Fatal(err)
	}
	if d, err := s.Take(ctx, floodPolicy(3), "k", 1); err != nil || !d.Allowed {
		t.Fatalf("a new policy once one was empty: %+v, %v", d, err)
	}
	if _, err := s.Take(ctx, floodPolicy(5), "k", 1); !errors.Is(err, sluice.ErrStoreFull) {
		t.Fatalf("again at the bound: %v, want sluice.ErrStoreFull", err)
	}
	// Reset and Give under a policy the store does not hold do nothing,
	// at the bound too, and hold nothing.
	if err := s.Reset(ctx, floodPolicy(6), "k"); err != nil {
		t.Fatalf("Reset under a policy not held, at the bound: %v", err)
	}
	if ok, err := s.Give(ctx, floodPolicy(6), "k", model.State{}, 1); err != nil || ok {
		t.Fatalf("Give under a policy not held, at the bound: %v, %v", ok, err)
	}
	if n := s.Stats().Policies; n != 3 {
		t.Fatalf("%d policies held, want 3", n)
	}
}

// TestMaxPoliciesFreesExpired: at the bound, a new policy frees the held
// policies whose keys have all expired, at once, with no sweeper and no
// Sweep (they kept it failing with sluice.ErrStoreFull until a Sweep); a
// policy with a key that has not expired is never freed, and keeps its
// state. One call frees at most reclaimBatch policies this way.
func TestMaxPoliciesFreesExpired(t *testing.T) {
	clock := sluicetest.NewClock(t0)
	s := New(WithClock(clock), WithSweepInterval(0), WithMaxPolicies(3))
	defer s.Close()
	ctx := context.Background()
	take := func(p sluice.Policy, key string, cost int64) (sluice.Decision, error) {
		t.Helper()
		return s.Take(ctx, p, key, cost)
	}
	minute := func(i int) sluice.Policy { // limit 2 per minute
		return sluice.Policy{Name: fmt.Sprint("m", i), Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Minute}
	}
	hour := sluice.Policy{Name: "h", Algorithm: sluice.FixedWindow, Limit: 2, Period: time.Hour}
	// Keys over many shards: the policies have tables in most of them.
	for _, p := range []sluice.Policy{minute(0), minute(1), minute(2)} {
		for k := range 200 {
			if d, err := take(p, fmt.Sprint(k), 1); err != nil || !d.Allowed {
				t.Fatalf("%s key %d: %+v, %v", p.Name, k, d, err)
			}
		}
	}
	if _, err := take(minute(3), "k", 1); !errors.Is(err, sluice.ErrStoreFull) {
		t.Fatalf("a fourth policy of 3, no key expired: %v, want sluice.ErrStoreFull", err)
	}
	clock.Set(t0.Add(time.Minute)) // every window has passed
	if d, err := take(hour, "k", 1); err != nil || !d.Allowed {
		t.Fatalf("a new policy once every key has expired: %+v, %v; want admitted", d, err)
	}
	if st := s.Stats(); st.Policies != 1 || st.Keys != 1 || st.Expired != 600 {
		t.Fatalf("Stats() = %+v, want the new policy's 1 key held and the 600 others expired", st)
	}
	// hour's key lives for an hour; the minute policies' for a minute.
	for i := 3; i < 5; i++ {
		if d, err := take(minute(i), "k", 1); err != nil || !d.Allowed {
			t.Fatalf("%s: %+v, %v", minute(i).Name, d, err)
		}
	}
	clock.Set(t0.Add(2 * time.Minute))
	for i := 5; i < 7; i++ { // m5 frees m3 and m4 (expired), never h
		if d, err := take(minute(i), "k", 1); err != nil || !d.Allowed {
			t.Fatalf("%s with %s and %s expired: %+v, %v; want admitted", minute(i).Name, minute(i-2).Name, minute(i-1).Name, d, err)
		}
	}
	if _, err := take(minute(7), "k", 1); !errors.Is(err, sluice.ErrStoreFull) {
		t.Fatalf("at the bound with no key expired: %v, want sluice.ErrStoreFull", err)
	}
	if d, err := take(hour, "k", 0); err != nil || d.Remaining != 1 {
		t.Fatalf("the policy with a live key, peeked: %+v, %v; want 1 remaining (its state kept)", d, err)
	}

	// At most reclaimBatch policies are freed by one call.
	const n = 4 * reclaimBatch
	s2 := New(WithClock(clock), WithSweepInterval(0), WithMaxPolicies(n))
	defer s2.Close()
	for i := range n {
		if _, err := s2.Take(ctx, minute(i), "k", 1); err != nil {
			t.Fatal(err)
		}
	}
	clock.Set(t0.Add(3 * time.Minute))
	if _, err := s2.Take(ctx, hour, "k", 1); err != nil {
		t.Fatal(err)
	}
	if got, want := s2.Stats().Policies, n-reclaimBatch+1; got != want {
		t.Fatalf("%d policies held after one new policy at the bound with %d expired; want %d", got, n, want)
	}
}

// TestMaxPoliciesFreesExpiredRace: new policies at the bound free expired
// ones while other goroutines take keys of held policies and sweep, and
// the clock moves: a policy's key that has not expired is never dropped
// (the keeper, limit 1 per hour, admits once), and creations succeed once
// the flood's one-second keys have expired.
func TestMaxPoliciesFreesExpiredRace(t *testing.T) {
	clock := sluicetest.NewClock(t0)
	s := New(WithClock(clock), WithSweepInterval(0), WithMaxPolicies(8), withShards(4))
	defer s.Close()
	ctx := context.Background()
	keeper := sluice.Policy{Name: "keeper", Algorithm: sluice.GCRA, Limit: 1, Period: time.Hour}
	second := func(g, i int) sluice.Policy {
		return sluice.Policy{Name: fmt.Sprint(g, "/", i), Algorithm: sluice.FixedWindow, Limit: 5, Period: time.Second}
	}
	rounds := 300
	if testing.Short() {
		rounds = 50
	}
	var admitted, created [4]int
	for r := range rounds {
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				if d, err := s.Take(ctx, keeper, "k", 1); err != nil {
					t.Error(err)
				} else if d.Allowed {
					admitted[g]++
				}
				for k := range 3 {
					if _, err := s.Take(ctx, second(g, r), fmt.Sprint(k), 1); err == nil {
						created[g]++
					} else if !errors.Is(err, sluice.ErrStoreFull) {
						t.Error(err)
					}
				}
			})
		}
		if r%16 == 0 {
			wg.Go(s.Sweep)
		}
		wg.Wait()
		clock.Advance(time.Second) // every key of the flood expires
	}
	t.Logf("%d of %d flood takes stored", created[0]+created[1]+created[2]+created[3], 12*rounds)
	if n := admitted[0] + admitted[1] + admitted[2] + admitted[3]; n != 1 {
		t.Fatalf("the keeper (limit 1 per hour) admitted %d times: a live key was dropped", n)
	}
	if n := created[0] + created[1] + created[2] + created[3]; n < 3*rounds {
		t.Errorf("only %d of %d flood takes were stored: expired policies did not make room", n, 12*rounds)
	}
}

// TestResetHoldsNoPolicy: resets under policies the store never saw (a
// flood of them) create nothing.
func TestResetHoldsNoPolicy(t *testing.T) {
	s := New(WithSweepInterval(0))
	defer s.Close()
	for i := range 1000 {
		if err := s.Reset(context.Background(), floodPolicy(i), "k"); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.Policies != 0 {
		t.Fatalf("Stats() = %+v after resets under unknown policies, want no policy", st)
	}
}

// TestDeadPolicyRetries: a take compiled against a policy the registry has
// dropped (it had no keys) decides under the policy that replaced it, so
// the key's state is never split between the two; a Limiter bound to the
// dropped one follows.
func TestDeadPolicyRetries(t *testing.T) {
	clock := sluicetest.NewClock(t0)
	s := New(WithClock(clock), WithSweepInterval(0))
	defer s.Close()
	ctx := context.Background()
	p := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Hour}
	l, err := sluice.NewLimiter(s, p)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := l.Allow(ctx, "a"); err != nil || !d.Allowed {
		t.Fatalf("first: %+v, %v", d, err)
	}
	old, err := s.compile(p)
	if err != nil {
		t.Fatal(err)
	}
	clock.Set(t0.Add(time.Hour))
	s.Sweep()
	if !old.pt.isDead() {
		t.Fatal("the policy with no keys left was not dropped")
	}
	var d sluice.Decision
	if o := s.take(old, "b", 1, p.Burst, &d); o != stale {
		t.Fatalf("a take on the dropped policy: outcome %d, want stale", o)
	}
	// The successor holds "b" once a take made on the dropped one retries.
	if err := s.decide(&p, old, "b", 1, &d); err != nil || !d.Allowed {
		t.Fatalf("a retried take: %+v, %v", d, err)
	}
	if d, err := s.Take(ctx, p, "b", 1); err != nil || d.Allowed {
		t.Fatalf("b again (limit 1): %+v, %v; the retried take's state was lost", d, err)
	}
	for _, want := range []bool{true, false} {
		if d, err := l.Allow(ctx, "a"); err != nil || d.Allowed != want {
			t.Fatalf("the Limiter after its policy was dropped: %+v, %v; want allowed %v", d, err, want)
		}
	}
}

// TestPolicyCollectionRace: takes of a policy race with sweeps that drop
// it whenever it has no key. Each round resets the key (freeing the table),
// then two goroutines take the key, limit 1, while a third sweeps: exactly
// one is admitted, whichever policy table each found.
func TestPolicyCollectionRace(t *testing.T) {
	s := New(WithSweepInterval(0), withShards(1))
	defer s.Close()
	ctx := context.Background()
	p := sluice.Policy{Algorithm: sluice.FixedWindow, Limit: 1, Period: time.Hour}
	rounds := 2000
	if testing.Short() {
		rounds = 200
	}
	for r := range rounds {
		if err := s.Reset(ctx, p, "k"); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var admitted [2]bool
		for g := range 2 {
			wg.Go(func() {
				d, err := s.Take(ctx, p, "k", 1)
				if err != nil {
					t.Error(err)
				}
				admitted[g] = d.Allowed
			})
		}
		wg.Go(func() {
			s.Sweep()
			runtime.Gosched()
			s.Sweep()
		})
		wg.Wait()
		if admitted[0] == admitted[1] {
			t.Fatalf("round %d: admitted %v of limit 1", r, admitted)
		}
	}
}

// BenchmarkNewPolicy measures a take for a policy the store has never seen
// (one op: one new policy and its key). ns/op stays flat as b.N grows: a
// policy is created in O(1) amortized. On the old code it grew with the
// number of policies (10k: 0.5 ms each; the next 10k, 1.6 ms).
func BenchmarkNewPolicy(b *testing.B) {
	clock := sluicetest.NewClock(t0)
	s := New(WithClock(clock), WithSweepInterval(0), WithMaxPolicies(1<<30))
	defer s.Close()
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := s.Take(ctx, floodPolicy(i), "k", 1); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(s.Stats().Policies), "policies")
}

// BenchmarkNewPolicyAtBound measures a take for a new policy at the
// policy bound (1024 held, 8 keys each): refused when every held key is
// live (keys=live: after the first pass each policy looked at is skipped
// until its key's expiry), or stored once the policy it looks at first has
// expired (keys=expired: the clock moves a window per op, so each op frees
// the expired policies it looks at, dropping their keys).
func BenchmarkNewPolicyAtBound(b *testing.B) {
	for _, expired := range []bool{false, true} {
		name := "keys=live"
		if expired {
			name = "keys=expired"
		}
		b.Run(name, func(b *testing.B) {
			const n = 1024
			clock := sluicetest.NewClock(t0)
			s := New(WithClock(clock), WithSweepInterval(0), WithMaxPolicies(n))
			defer s.Close()
			ctx := context.Background()
			p := func(i int) sluice.Policy {
				return sluice.Policy{Algorithm: sluice.FixedWindow, Limit: int64(1 + i), Period: time.Second}
			}
			for i := range n {
				for k := range 8 {
					if _, err := s.Take(ctx, p(i), fmt.Sprint(k), 1); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportAllocs()
			i := n
			for b.Loop() {
				if expired {
					clock.Advance(time.Second)
				}
				_, err := s.Take(ctx, p(i), "k", 1)
				if expired != (err == nil) {
					b.Fatalf("take %d: %v", i, err)
				}
				i++
			}
		})
	}
}

// TestPolicyMemory reports the heap a policy with one key costs (the
// figure DefaultMaxPolicies's comment cites); run with -v.
func TestPolicyMemory(t *testing.T) {
	clock := sluicetest.NewClock(t0)
	ctx := context.Background()
	const n = 20_000
	for _, keys := range []int{1, 64} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s := New(WithClock(clock), WithSweepInterval(0))
		for i := range n {
			for k := range keys {
				if _, err := s.Take(ctx, floodPolicy(i), fmt.Sprint(k), 1); err != nil {
					t.Fatal(err)
				}
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		st := s.Stats()
		s.Close()
		t.Logf("%d policies with %d keys: %.0f bytes per policy (%d tables)", st.Policies, keys, float64(after.HeapAlloc-before.HeapAlloc)/n, s.tables())
	}
}
