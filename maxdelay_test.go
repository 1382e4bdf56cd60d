// SPDX-License-Identifier: Apache-2.0

package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// maxDelayStep is one request of a key: after advancing the clock, a
// check of cost with MaxDelay max, and its answer: the Delay of an
// admission or the RetryAfter of a refusal.
type maxDelayStep struct {
	advance time.Duration
	cost    int64
	max     time.Duration
	allowed bool
	wait    time.Duration
}

// maxDelayScripts are the edges of Check.MaxDelay: B_c = min(B,
// ⌊D·Limit/Period⌋ + c).
func maxDelayScripts() []struct {
	name   string
	policy sluice.Policy
	steps  []maxDelayStep
} {
	third := time.Second / 3
	return []struct {
		name   string
		policy sluice.Policy
		steps  []maxDelayStep
	}{{
		// T = 1/3 s, no whole number of nanoseconds, and 1 s a multiple of
		// it: exact. Queue delays of 0, 1/3, 2/3 and 1 s are admitted (a
		// Delay of exactly 1 s for the last, rounded up from 1 s − 2/3
		// ns); 1 s + 1/3 ns (a Delay of 1 s + 1 ns) is refused, taking
		// nothing.
		name:   "3/s, queue 10, max 1s",
		policy: sluice.Policy{Name: "frac", Algorithm: sluice.LeakyBucket, Limit: 3, Period: time.Second, Burst: 10},
		steps: []maxDelayStep{
			{0, 1, time.Second, true, 0},
			{0, 1, time.Second, true, third + 1},
			{0, 1, time.Second, true, 2*third + 1},
			{0, 1, time.Second, true, time.Second},
			{0, 1, time.Second, false, third + 1},
			{third, 1, time.Second, false, 1},
			{1, 1, time.Second, true, time.Second},
		},
	}, {
		// A cost of 3 on a queue of 30 at 1/s, max 10 s: B_3 = 13, so
		// delays 0, 3, 6 and 9 s are admitted, 12 and 11 s refused. A
		// negative MaxDelay holds nothing (a cost of 1 waits the whole
		// 11 s); one of 0 is no bound (the queue alone admits a delay of
		// 11 s). Then 11 s is refused again, 10 s admitted.
		name:   "1/s, queue 30, cost 3, max 10s",
		policy: sluice.Policy{Name: "cost", Algorithm: sluice.LeakyBucket, Limit: 1, Period: time.Second, Burst: 30},
		steps: []maxDelayStep{
			{0, 3, 10 * time.Second, true, 0},
			{0, 3, 10 * time.Second, true, 3 * time.Second},
			{0, 3, 10 * time.Second, true, 6 * time.Second},
			{0, 3, 10 * time.Second, true, 9 * time.Second},
			{0, 3, 10 * time.Second, false, 2 * time.Second},
			{time.Second, 3, 10 * time.Second, false, time.Second},
			{0, 1, -1, false, 11 * time.Second},
			{0, 3, 0, true, 11 * time.Second},
			{3 * time.Second, 3, 10 * time.Second, false, time.Second}, // delay 11 s again
			{time.Second, 3, 10 * time.Second, true, 10 * time.Second},
		},
	}, {
		// 10 s is no multiple of T = 3 s: the bound is ⌊10/3⌋·3 = 9 s, so
		// a delay of 9.5 s, within the maximum, is refused too (the
		// conservative side), and no Delay passes 10 s.
		name:   "1 per 3s, queue 30, max 10s",
		policy: sluice.Policy{Name: "third", Algorithm: sluice.LeakyBucket, Limit: 1, Period: 3 * time.Second, Burst: 30},
		steps: []maxDelayStep{
			{0, 1, 10 * time.Second, true, 0},
			{0, 1, 10 * time.Second, true, 3 * time.Second},
			{0, 1, 10 * time.Second, true, 6 * time.Second},
			{0, 1, 10 * time.Second, true, 9 * time.Second},
			{2500 * time.Millisecond, 1, 10 * time.Second, false, 500 * time.Millisecond}, // delay 9.5 s
			{500 * time.Millisecond, 1, 10 * time.Second, true, 9 * time.Second},
		},
	}, {
		// The largest limit over the longest period: T = 1/4 ns, and D·Limit
		// passes 64 bits for any D over 4 ns. A maximum of 1 s is 4·10⁹
		// intervals: after 4·10⁹ units, a delay of exactly 1 s is
		// admitted, and one of 1 s + 1/4 ns (a Delay of 1 s + 1 ns)
		// refused.
		name:   "2^62 per 2^60ns, max 1s",
		policy: sluice.Policy{Name: "huge", Algorithm: sluice.LeakyBucket, Limit: sluice.MaxLimit, Period: sluice.MaxPeriod},
		steps: []maxDelayStep{
			{0, 4_000_000_000, time.Second, true, 0},
			{0, 1, time.Second, true, time.Second},
			{0, 1, time.Second, false, 1},
		},
	}}
}

// runMaxDelay runs the scripts on store (whose clock is clk), one key
// each, and returns what each step answered.
func runMaxDelay(t *testing.T, store sluice.Store, clk *sluicetest.Clock) []string {
	t.Helper()
	var got []string
	for _, s := range maxDelayScripts() {
		l, err := sluice.NewLimiter(store, s.policy)
		if err != nil {
			t.Fatal(err)
		}
		for i, st := range s.steps {
			clk.Advance(st.advance)
			res, err := sluice.AllowAll(context.Background(), sluice.Check{Limiter: l, Key: "k", Cost: st.cost, MaxDelay: st.max})
			if err != nil {
				t.Fatalf("%s, request %d: %v", s.name, i, err)
			}
			d := res.Decisions[0]
			wait := d.Delay
			if !d.Allowed {
				wait = d.RetryAfter
			}
			line := fmt.Sprintf("%s, request %d (cost %d, MaxDelay %v): allowed %v, wait %v", s.name, i, st.cost, st.max, d.Allowed, wait)
			got = append(got, line)
			if d.Allowed != st.allowed || wait != st.wait {
				t.Errorf("%s; want allowed %v, wait %v", line, st.allowed, st.wait)
			}
			if d.Allowed && st.max != 0 && d.Delay > max(st.max, 0) {
				t.Errorf("%s: admitted with a Delay past MaxDelay", line)
			}
		}
	}
	return got
}

// TestCheckMaxDelay: Check.MaxDelay at its edges (a delay of exactly the
// maximum admitted, one a nanosecond or a sub-nanosecond grid unit longer
// refused, the conservative side when the maximum is no multiple of the
// emission interval, costs above 1, 0 and negative maxima, products past
// 64 bits), with identical answers on memstore and on a real Redis.
func TestCheckMaxDelay(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	memClock := sluicetest.NewClock(t0)
	mem := memstore.New(memstore.WithClock(memClock), memstore.WithSweepInterval(0))
	defer mem.Close()
	onMem := runMaxDelay(t, mem, memClock)

	redisClock := sluicetest.NewClock(t0)
	rs, err := redisstore.Open("redis://"+sluicetest.StartRedis(t), redisstore.WithClock(redisClock), redisstore.WithPrefix(t.Name()+":"))
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	onRedis := runMaxDelay(t, rs, redisClock)
	if a, b := strings.Join(onMem, "\n"), strings.Join(onRedis, "\n"); a != b {
		t.Errorf("memstore and Redis differ:\n%s\n---\n%s", a, b)
	}
}

// A MaxDelay needs a named leaky-bucket policy (an unnamed one shares its
// state only with identical policies) unless its queue is no longer than
// the cost (no request waits there); other algorithms never delay, and
// ignore it.
func TestCheckMaxDelayInvalid(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	limiter := func(p sluice.Policy) *sluice.Limiter {
		l, err := sluice.NewLimiter(store, p)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	unnamed := limiter(sluice.Policy{Algorithm: sluice.LeakyBucket, Limit: 1, Period: time.Second, Burst: 10})
	res, err := sluice.AllowAll(context.Background(), sluice.Check{Limiter: unnamed, Key: "k", MaxDelay: time.Hour})
	if want := "check 0: policy (no Name) leaky-bucket 1/1s burst 10: MaxDelay 1h0m0s: an unnamed policy shares its state only with identical ones"; err == nil || !strings.Contains(err.Error(), want) || res.Allowed {
		t.Errorf("an unnamed leaky bucket with a MaxDelay: %+v, %v; want refused, an error containing %q", res, err, want)
	}
	short := limiter(sluice.Policy{Algorithm: sluice.LeakyBucket, Limit: 1, Period: time.Second, Burst: 2})
	if res, err := sluice.AllowAll(context.Background(), sluice.Check{Limiter: short, Key: "k", Cost: 2, MaxDelay: time.Second}); err != nil || !res.Allowed {
		t.Errorf("an unnamed leaky bucket no longer than the cost: %+v, %v; want admitted", res, err)
	}
	bucket := limiter(sluice.Policy{Algorithm: sluice.TokenBucket, Limit: 1, Period: time.Second, Burst: 10})
	for i := range 11 {
		res, err := sluice.AllowAll(context.Background(), sluice.Check{Limiter: bucket, Key: "k", MaxDelay: -1})
		if err != nil || res.Allowed != (i < 10) {
			t.Fatalf("token bucket of 10 with MaxDelay -1, request %d: %+v, %v; want its own burst", i, res, err)
		}
	}
}

// TestCheckMaxDelayLocalShare: while the store fails, a FailLocal check's
// MaxDelay bounds its local share with the share's own emission interval
// and queue (3 per second over 2 replicas: 1 per second each, a queue of
// 15): with a maximum of 10 s, 11 requests are admitted (delays 0 to 10
// s), and the refused ones take nothing: after the RetryAfter (1 s), one
// is admitted with a delay of 10 s. (Check.Burst, its predecessor, was
// bounded with the policy's interval: min(30, 30 + 1) = 30, a share of
// 15, delays up to 14 s.)
func TestCheckMaxDelayLocalShare(t *testing.T) {
	clk := sluicetest.NewClock(time.Unix(0, 0))
	local := memstore.New(memstore.WithClock(clk), memstore.WithSweepInterval(0))
	defer local.Close()
	l, err := sluice.NewLimiter(failingStore{local}, sluice.Policy{Name: "b", Algorithm: sluice.LeakyBucket, Limit: 3, Period: time.Second, Burst: 30},
		sluice.WithFailureMode(sluice.FailLocal), sluice.WithLocalStore(local, sluice.FixedReplicas(2)))
	if err != nil {
		t.Fatal(err)
	}
	check := sluice.Check{Limiter: l, Key: "k", MaxDelay: 10 * time.Second}
	var admitted []time.Duration
	var last sluice.Decision
	for range 20 {
		res, err := sluice.AllowAll(context.Background(), check)
		if !errors.Is(err, errDown) {
			t.Fatalf("AllowAll: %v; want the store's error", err)
		}
		if last = res.Decisions[0]; last.Allowed {
			admitted = append(admitted, last.Delay)
		}
	}
	if len(admitted) != 11 || admitted[10] != 10*time.Second {
		t.Errorf("admitted on the local share with delays %v; want 11, 0 to 10s", admitted)
	}
	if last.RetryAfter != time.Second {
		t.Fatalf("the last refusal: %+v; want RetryAfter 1s", last)
	}
	clk.Advance(last.RetryAfter)
	if res, _ := sluice.AllowAll(context.Background(), check); !res.Allowed || res.Decisions[0].Delay != 10*time.Second {
		t.Errorf("after the RetryAfter: %+v; want admitted with a delay of 10s (the refusals took no place)", res.Decisions[0])
	}
}
