// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/sluicetest"
)

// newStore returns a store on c with the defaults a user gets, and opts.
func newStore(t testing.TB, c rueidis.Client, opts ...Option) *Store {
	t.Helper()
	s, err := New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func take(t testing.TB, s *Store, p sluice.Policy, key string, cost int64) sluice.Decision {
	t.Helper()
	d, err := s.Take(t.Context(), p, key, cost)
	if err != nil {
		t.Fatalf("Take(%v, %q, %d): %v", p, key, cost, err)
	}
	return d
}

// admits takes one unit of key under p once per element of want, and fails
// the test unless each decision's Allowed is that element.
func admits(t testing.TB, s *Store, p sluice.Policy, key string, want ...bool) {
	t.Helper()
	for i, w := range want {
		if d := take(t, s, p, key, 1); d.Allowed != w {
			t.Fatalf("request %d for %q: %+v, want allowed %v", i, key, d, w)
		}
	}
}

// TestNoScript: after SCRIPT FLUSH the script is loaded again and no error
// reaches the caller.
func TestNoScript(t *testing.T) {
	c := newClient(t, sluicetest.StartRedis(t))
	s := newStore(t, c)
	p := sluice.Policy{Algorithm: sluice.GCRA, Limit: 10, Period: time.Hour}
	ctx := t.Context()
	sum := sha1.Sum([]byte(singlesText)) // a GCRA Take runs singles.lua
	sha := hex.EncodeToString(sum[:])
	for i := range 3 {
		if err := c.Do(ctx, c.B().ScriptFlush().Build()).Error(); err != nil {
			t.Fatal(err)
		}
		exists, err := c.Do(ctx, c.B().ScriptExists().Sha1(sha).Build()).AsIntSlice()
		if err != nil || exists[0] != 0 {
			t.Fatalf("SCRIPT EXISTS after SCRIPT FLUSH: %v %v", exists, err)
		}
		if d := take(t, s, p, "k", 1); !d.Allowed || d.Remaining != int64(9-i) {
			t.Fatalf("request %d after SCRIPT FLUSH: %+v", i, d)
		}
		exists, err = c.Do(ctx, c.B().ScriptExists().Sha1(sha).Build()).AsIntSlice()
		if err != nil || exists[0] != 1 {
			t.Fatalf("SCRIPT EXISTS after a Take: %v %v (the script was not reloaded)", exists, err)
		}
	}
}

// TestServerTime: with Redis TIME, two stores on separate connections
// whose callers' clocks are an hour apart make one coherent sequence of
// decisions on one key; stores that supply their own clocks, an hour apart,
// do not.
func TestServerTime(t *testing.T) {
	addr := sluicetest.StartRedis(t)
	p := sluice.Policy{Algorithm: sluice.GCRA, Limit: 10, Period: time.Hour}
	run := func(a, b *Store) []sluice.Decision {
		var ds []sluice.Decision
		for i := range 12 {
			s := a
			if i%2 == 1 {
				s = b
			}
			ds = append(ds, take(t, s, p, "shared", 1))
		}
		return ds
	}
	coherent := func(ds []sluice.Decision) error {
		for i, d := range ds {
			switch {
			case i < 10 && (!d.Allowed || d.Remaining != int64(9-i)):
				return fmt.Errorf("request %d: %+v, want admitted with remaining %d", i, d, 9-i)
			case i >= 10 && (d.Allowed || d.RetryAfter <= 5*time.Minute || d.RetryAfter > 6*time.Minute):
				return fmt.Errorf("request %d: %+v, want rejected, retry in (5m, 6m]", i, d)
			}
		}
		return nil
	}
	a := newStore(t, newClient(t, addr), WithPrefix("time:"))
	b := newStore(t, newClient(t, addr), WithPrefix("time:"))
	if err := coherent(run(a, b)); err != nil {
		t.Fatalf("Redis TIME: %v", err)
	}
	// The stored TAT is on the server's clock.
	c := newClient(t, addr)
	ctx := t.Context()
	tm, err := c.Do(ctx, c.B().Time().Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	sec, _ := strconv.ParseInt(tm[0], 10, 64)
	k := "time:{" + policyTag(p) + ":shared}"
	h, err := c.Do(ctx, c.B().Hgetall().Key(k).Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	tat := stateExpiry(t, k, h).Int64()
	if want := (sec + 3600) * 1e9; tat < want-5e9 || tat > want+5e9 {
		t.Fatalf("stored TAT %d, want about %d (server time + 1h)", tat, want)
	}
	pttl, err := c.Do(ctx, c.B().Pttl().Key(k).Build()).AsInt64()
	// The key outlives the TAT (an hour away), by at most 2H (H: the
	// burst's duration, an hour, plus 1 ms): bucket.lua's epochs.
	if err != nil || pttl <= 3590_000 || pttl > 7200_002 {
		t.Fatalf("PTTL %d %v, want between just under an hour and two hours", pttl, err)
	}

	// Control: caller clocks an hour apart disagree.
	ca := sluicetest.NewClock(time.Unix(1_700_000_000, 0))
	cb := sluicetest.NewClock(time.Unix(1_700_000_000+3600, 0))
	a = newStore(t, newClient(t, addr), WithPrefix("clock:"), WithClock(ca))
	b = newStore(t, newClient(t, addr), WithPrefix("clock:"), WithClock(cb))
	if err := coherent(run(a, b)); err == nil {
		t.Fatal("stores on caller clocks an hour apart made coherent decisions; the control is broken")
	}
}

// TestExpiryFlood: after many keys through every algorithm on Redis TIME,
// every key has a TTL no later than its state's expiry, and once the
// longest idle time has passed there are none.
func TestExpiryFlood(t *testing.T) {
	c := newClient(t, sluicetest.StartRedis(t))
	s := newStore(t, c)
	const keys = 100_000
	period := 200 * time.Millisecond
	var policies []sluice.Policy
	for _, alg := range sluice.Algorithms() {
		policies = append(policies, sluice.Policy{Algorithm: alg, Limit: 5, Period: period})
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < keys; i += 32 {
				p := policies[i%len(policies)]
				if _, err := s.Take(t.Context(), p, strconv.Itoa(i), 1+int64(i%3)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ctx := t.Context()
	n, err := c.Do(ctx, c.B().Dbsize().Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	// Keys whose state expired while the flood ran may be gone already.
	if elapsed < period && n < keys {
		t.Fatalf("DBSIZE %d right after %d keys, want at least %d", n, keys, keys)
	}
	var cursor uint64
	for {
		e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Count(1000).Build()).AsScanEntry()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range e.Elements {
			pttl, err := c.Do(ctx, c.B().Pttl().Key(k).Build()).AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			if pttl == -1 || pttl > int64(2*period/time.Millisecond) {
				t.Fatalf("key %q has PTTL %d, want at most %v", k, pttl, 2*period)
			}
		}
		if cursor = e.Cursor; cursor == 0 {
			break
		}
	}
	// The longest idle time is sliding-window's 2 periods; poll until Redis
	// has evicted the expired keys (it does so lazily and by sampling).
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := c.Do(ctx, c.B().Dbsize().Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d keys left 10s after the flood", n)
		}
		// Touching an expired key deletes it; SCAN touches every key.
		for cursor = 0; ; {
			e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Count(10000).Build()).AsScanEntry()
			if err != nil {
				t.Fatal(err)
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
		time.Sleep(50 * time.Millisecond) // waiting for real-time expiry
	}
}

// TestCluster: on a 3-master Cluster each (policy, key) has its own slot,
// decisions equal the model's, single-slot batches are atomic, and
// cross-slot batches are refused with ErrCrossSlot without effect.
func TestCluster(t *testing.T) {
	addrs := sluicetest.StartRedisCluster(t, 3)
	c := newClient(t, addrs...)
	clock := sluicetest.NewClock(time.Unix(0, 1_700_000_000_000_000_000))
	s := newStore(t, c, WithClock(clock))
	if !s.conn.Load().cluster {
		t.Fatal("the client is not in cluster mode")
	}
	var policies []sluice.Policy
	for _, alg := range sluice.Algorithms() {
		p := sluice.Policy{Algorithm: alg, Limit: 7, Period: 3 * time.Second}
		if alg.IsBucket() {
			p.Burst = 4
		}
		policies = append(policies, p)
	}
	modelTrace(t, s, clock, policies, 40, 3000, int64(time.Second))
	// The keys are spread over all masters.
	for _, n := range c.Nodes() {
		if k, err := n.Do(t.Context(), n.B().Dbsize().Build()).AsInt64(); err != nil || k == 0 {
			t.Fatalf("a master holds %d keys (%v): the keys are not spread", k, err)
		}
	}
	// One key under one policy: atomic.
	p := policies[0]
	out := make([]sluice.Decision, 2)
	if err := s.TakeAll(t.Context(), []sluice.Request{{Policy: p, Key: "solo", Cost: 3}, {Policy: p, Key: "solo", Cost: 2}}, out); err != nil {
		t.Fatal(err)
	}
	if out[0].Allowed != true || out[1].Allowed != false || out[0].Remaining != 4 {
		t.Fatalf("a refused single-slot batch: %+v", out)
	}
	// Two keys in different slots: refused, nothing consumed.
	var a, b string
	for i := 0; a == "" || b == ""; i++ {
		k := fmt.Sprint("x", i)
		st, _ := stateKey(s.prefix, "", policyTag(p), k)
		if a == "" {
			a = k
		} else if st0, _ := stateKey(s.prefix, "", policyTag(p), a); keySlot(st) != keySlot(st0) {
			b = k
		}
	}
	err := s.TakeAll(t.Context(), []sluice.Request{{Policy: p, Key: a, Cost: 1}, {Policy: p, Key: b, Cost: 1}}, out)
	if !errors.Is(err, ErrCrossSlot) {
		t.Fatalf("a cross-slot batch: error %v, want ErrCrossSlot", err)
	}
	for _, k := range []string{a, b} {
		if d := take(t, s, p, k, 0); d.Remaining != 4 {
			t.Fatalf("key %q after a refused cross-slot batch: %+v, want untouched", k, d)
		}
	}
}

// TestConformanceCluster runs the conformance suite on a 3-master Cluster
// with every key of a harness in one slot (WithSingleSlot), since the suite
// needs atomic batches over several keys.
func TestConformanceCluster(t *testing.T) {
	t.Parallel()
	c := newClient(t, sluicetest.StartRedisCluster(t, 3)...)
	conformance(t, c, WithSingleSlot("conformance"))
}

func TestNewRejectsBraces(t *testing.T) {
	c := newClient(t, sluicetest.StartRedis(t))
	for _, o := range []Option{WithPrefix("a{b"), WithPrefix("}"), WithSingleSlot("{x}"), WithExpirySlack(-1)} {
		if _, err := New(c, o); err == nil {
			t.Fatal("New accepted a bad option")
		}
	}
}

// modelTrace runs n random requests over policies and keys keys, moving the
// clock by random steps below maxStep, and fails unless every decision is
// the model's.
func modelTrace(t *testing.T, s *Store, clock *sluicetest.Clock, policies []sluice.Policy, keys, n int, maxStep int64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	models := map[sluice.Policy]*model.Model{}
	for _, p := range policies {
		m, err := model.New(p)
		if err != nil {
			t.Fatal(err)
		}
		models[p] = m
	}
	states := map[string]model.State{}
	now := clock.Now().UnixNano()
	for i := range n {
		if rng.IntN(4) == 0 {
			now += rng.Int64N(maxStep)
			clock.Set(time.Unix(0, now))
		}
		p := policies[rng.IntN(len(policies))]
		key := fmt.Sprint("user-", rng.IntN(keys))
		capacity := p.Limit
		if p.Burst != 0 {
			capacity = p.Burst
		}
		var cost int64
		switch rng.IntN(4) {
		case 0:
			cost = rng.Int64N(5)
		case 1:
			cost = capacity
		default:
			cost = rng.Int64N(capacity/3 + 1)
		}
		sk := policyTag(p) + key
		var want sluice.Decision
		states[sk], want = models[p].Take(states[sk], now, cost)
		if got := take(t, s, p, key, cost); got != want {
			t.Fatalf("request %d at %d: %v %q cost %d: got %+v, want %+v", i, now, p, key, cost, got, want)
		}
	}
}

// TestOddParameters drives the script's exact slow paths: periods that are
// neither whole seconds nor divisors of a second, at present-day instants
// (the window start needs a 63-bit remainder), and limits near
// sluice.MaxLimit (the sliding window's products exceed 2^53).
func TestOddParameters(t *testing.T) {
	c := newClient(t, sluicetest.StartRedis(t))
	clock := sluicetest.NewClock(time.Unix(0, 1_700_000_000_123_456_789))
	s := newStore(t, c, WithClock(clock))
	var policies []sluice.Policy
	for _, alg := range sluice.Algorithms() {
		policies = append(policies,
			sluice.Policy{Algorithm: alg, Limit: 7, Period: 1500 * time.Millisecond},
			sluice.Policy{Algorithm: alg, Limit: 3, Period: 7},
			sluice.Policy{Algorithm: alg, Limit: sluice.MaxLimit - 1, Period: 3*time.Hour + 1},
			sluice.Policy{Algorithm: alg, Limit: 1_000_000_007, Period: 999_999_937 * time.Second},
			sluice.Policy{Algorithm: alg, Limit: 1 << 60, Period: 1500 * time.Millisecond},
			sluice.Policy{Algorithm: alg, Limit: 1_000_000_000_000, Period: 2*time.Second + 1},
		)
	}
	modelTrace(t, s, clock, policies, 2, 20000, int64(200*time.Millisecond))
}

// TestDenominatorChange: a named bucket policy whose emission interval
// changes keeps its TAT, with the fraction rounded up to the new grid (as
// memstore does): 1/3 s per unit becomes 1/7 s, and the TAT 333333333+1/3 ns
// is read as 333333333+3/7 ns.
func TestDenominatorChange(t *testing.T) {
	c := newClient(t, sluicetest.StartRedis(t))
	clock := sluicetest.NewClock(time.Unix(0, 0))
	s := newStore(t, c, WithClock(clock))
	q := sluice.Policy{Name: "frac", Algorithm: sluice.TokenBucket, Limit: 3, Period: time.Second}
	take(t, s, q, "k", 1)
	q2 := q
	q2.Limit = 7
	m2, err := model.New(q2)
	if err != nil {
		t.Fatal(err)
	}
	for _, cost := range []int64{0, 7, 3} { // 3 units: the exact TAT is a whole ns
		_, want := m2.Take(model.State{Time: 333333333, Frac: 3}, 0, cost)
		if d := take(t, s, q2, "k", cost); d != want {
			t.Fatalf("cost %d after a denominator change: %+v, want %+v", cost, d, want)
		}
	}
}

// TestReconfiguredMatchesMemstore: named policies of every algorithm are
// reconfigured while a key is held (sluice.Policy: "the stored state is read
// with the new parameters"), and one seeded sequence of takes, peeks and
// charges runs on memstore and on Redis, on one fake clock: every decision
// must be the same ("Every algorithm is exact and identical on every
// store"). (memstore wrote back the TAT it had read rounded up onto another
// parameter set's grid on a refusal or a peek: at seed 1 step 89 a charge
// under the token bucket 2⁴⁰/1h burst 2⁴¹ answered Debt and RetryAfter one
// unit and 1 ns more than Redis.)
func TestReconfiguredMatchesMemstore(t *testing.T) {
	families := [][]sluice.Policy{
		{
			{Name: "rtb", Algorithm: sluice.TokenBucket, Limit: 5, Period: time.Second, Burst: 10},
			{Name: "rtb", Algorithm: sluice.TokenBucket, Limit: 7, Period: time.Second, Burst: 3},
			{Name: "rtb", Algorithm: sluice.TokenBucket, Limit: 3, Period: time.Second + 7, Burst: 20},
			{Name: "rtb", Algorithm: sluice.TokenBucket, Limit: 1 << 40, Period: time.Hour, Burst: 1 << 41},
		},
		{
			{Name: "rlb", Algorithm: sluice.LeakyBucket, Limit: 3, Period: time.Second, Burst: 5},
			{Name: "rlb", Algorithm: sluice.LeakyBucket, Limit: 11, Period: 3 * time.Second, Burst: 2},
		},
		{
			{Name: "rfw", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Minute},
			{Name: "rfw", Algorithm: sluice.FixedWindow, Limit: 4, Period: time.Second},
			{Name: "rfw", Algorithm: sluice.FixedWindow, Limit: 20, Period: time.Hour},
			{Name: "rfw", Algorithm: sluice.FixedWindow, Limit: 5, Period: 1500*time.Millisecond + 3},
		},
		{
			{Name: "rsw", Algorithm: sluice.SlidingWindow, Limit: 10, Period: time.Minute},
			{Name: "rsw", Algorithm: sluice.SlidingWindow, Limit: 3, Period: 10 * time.Second},
			{Name: "rsw", Algorithm: sluice.SlidingWindow, Limit: 30, Period: time.Hour},
		},
		{
			{Name: "rsl", Algorithm: sluice.SlidingLog, Limit: 5, Period: 10 * time.Second},
			{Name: "rsl", Algorithm: sluice.SlidingLog, Limit: 2, Period: time.Second},
			{Name: "rsl", Algorithm: sluice.SlidingLog, Limit: 9, Period: time.Minute},
		},
	}
	c := newClient(t, sluicetest.StartRedis(t))
	ctx := t.Context()
	for seed := uint64(1); seed <= 4; seed++ {
		clock := sluicetest.NewClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
		rs := newStore(t, c, WithClock(clock), WithPrefix(fmt.Sprintf("seed%d:", seed)))
		ms := memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0))
		rng := rand.New(rand.NewPCG(seed, 77))
		for step := range 4000 {
			fam := families[rng.IntN(len(families))]
			p := fam[rng.IntN(len(fam))]
			capacity := p.Capacity()
			cost := []int64{0, 1, 2, capacity, capacity + 1}[rng.IntN(5)]
			charge := rng.IntN(8) >= 6
			var got [2]sluice.Decision
			for i, st := range []sluice.Store{ms, rs} {
				var err error
				if charge {
					out := make([]sluice.Decision, 1)
					err = st.TakeAll(ctx, []sluice.Request{{Policy: p, Key: "k", Cost: cost, Force: true}}, out)
					got[i] = out[0]
				} else {
					got[i], err = st.Take(ctx, p, "k", cost)
				}
				if err != nil {
					t.Fatalf("seed %d step %d: %v cost %d (charge %v): %v", seed, step, p, cost, charge, err)
				}
			}
			if got[0] != got[1] {
				t.Fatalf("seed %d step %d at %v: %v cost %d (charge %v):\n  memstore: %+v\n  redis:    %+v",
					seed, step, clock.Now().UTC(), p, cost, charge, got[0], got[1])
			}
			clock.Advance(time.Duration(rng.Int64N([]int64{1, 1000, int64(300 * time.Millisecond), int64(20 * time.Second), int64(2 * time.Hour)}[rng.IntN(5)])))
		}
		ms.Close()
	}
}
