// SPDX-License-Identifier: Apache-2.0

package decide

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/sluicetest"
)

// leakyStep is one request of a leaky-bucket script: after advancing the
// clock by advance, one request of cost 1, and its verdict.
type leakyStep struct {
	advance time.Duration
	outcome Outcome
	wait    time.Duration // the delay of an admission, the RetryAfter of a refusal
	left    int64         // Remaining
}

// leakyScript is a policy, a maximum delay and the requests of one key.
type leakyScript struct {
	name     string
	policy   sluice.Policy
	maxDelay time.Duration
	steps    []leakyStep
}

// leakyScripts are the edges of the bound B_c = min(B, ⌊D/T⌋ + c), which
// Decide asks for with sluice.Check.MaxDelay.
func leakyScripts() []leakyScript {
	admit := func(n int, wait func(i int) time.Duration, left func(i int) int64) []leakyStep {
		var s []leakyStep
		for i := range n {
			s = append(s, leakyStep{0, Admit, wait(i), left(i)})
		}
		return s
	}
	third := time.Second / 3
	return []leakyScript{{
		// D a multiple of T: exact. Delays 0 to 10 s are admitted, r
		// counting down what still fits within 10 s (not the 29 free
		// places of the queue); a delay of 10 s and 1 ns is refused, one of
		// exactly 10 s admitted.
		name:     "1/s, queue 30, max 10s",
		policy:   sluice.Policy{Name: "lb", Algorithm: sluice.LeakyBucket, Limit: 1, Period: time.Second, Burst: 30},
		maxDelay: 10 * time.Second,
		steps: append(admit(11, func(i int) time.Duration { return time.Duration(i) * time.Second }, func(i int) int64 { return int64(10 - i) }),
			leakyStep{0, Refuse, time.Second, 0},
			leakyStep{time.Second - 1, Refuse, 1, 0}, // delay 10 s + 1 ns
			leakyStep{1, Admit, 10 * time.Second, 0}, // delay exactly 10 s
		),
	}, {
		// D not a multiple of T = 3 s: the bound is ⌊D/T⌋·T = 9 s, so a
		// delay of 9.5 s (within D) is refused too: the conservative side.
		name:     "1 per 3s, queue 30, max 10s",
		policy:   sluice.Policy{Name: "third", Algorithm: sluice.LeakyBucket, Limit: 1, Period: 3 * time.Second, Burst: 30},
		maxDelay: 10 * time.Second,
		steps: append(admit(4, func(i int) time.Duration { return time.Duration(i) * 3 * time.Second }, func(i int) int64 { return int64(3 - i) }),
			leakyStep{0, Refuse, 3 * time.Second, 0},
			leakyStep{2500 * time.Millisecond, Refuse, 500 * time.Millisecond, 0}, // delay 9.5 s
			leakyStep{500 * time.Millisecond, Admit, 9 * time.Second, 0},
		),
	}, {
		// T = 1/3 s, not a whole number of nanoseconds: the queue delay
		// lies on a grid of 1/3 ns. A delay of 1 s + 1/3 ns is refused
		// (its Delay would be 1 s + 1 ns); one of 1 s − 2/3 ns is admitted
		// with a Delay of exactly 1 s.
		name:     "3/s, queue 10, max 1s",
		policy:   sluice.Policy{Name: "frac", Algorithm: sluice.LeakyBucket, Limit: 3, Period: time.Second, Burst: 10},
		maxDelay: time.Second,
		steps: append(admit(4, func(i int) time.Duration { return time.Duration(i)*third + min(time.Duration(i), 1) }, func(i int) int64 { return int64(3 - i) }),
			leakyStep{0, Refuse, third + 1, 0},
			leakyStep{third, Refuse, 1, 0},
			leakyStep{1, Admit, time.Second, 0},
		),
	}, {
		// The maximum is longer than the queue: the queue alone bounds,
		// and r is its free places.
		name:     "1/s, queue 5, max 10s",
		policy:   sluice.Policy{Name: "short", Algorithm: sluice.LeakyBucket, Limit: 1, Period: time.Second, Burst: 5},
		maxDelay: 10 * time.Second,
		steps: append(admit(5, func(i int) time.Duration { return time.Duration(i) * time.Second }, func(i int) int64 { return int64(4 - i) }),
			leakyStep{0, Refuse, time.Second, 0},
		),
	}, {
		// A maximum of 0 holds no request: only an empty queue admits.
		name:     "1/s, queue 5, max 0",
		policy:   sluice.Policy{Name: "none", Algorithm: sluice.LeakyBucket, Limit: 1, Period: time.Second, Burst: 5},
		maxDelay: 0,
		steps: []leakyStep{
			{0, Admit, 0, 0},
			{0, Refuse, time.Second, 0},
			{time.Second - 1, Refuse, 1, 0},
			{1, Admit, 0, 0},
		},
	}}
}

// runLeaky runs the scripts on store (whose clock is clk) with decide (no
// hold), one key per script, and returns what each step answered.
func runLeaky(t *testing.T, store sluice.Store, clk *sluicetest.Clock) []string {
	t.Helper()
	var got []string
	for _, s := range leakyScripts() {
		l, err := sluice.NewLimiter(store, s.policy)
		if err != nil {
			t.Fatal(err)
		}
		for i, st := range s.steps {
			clk.Advance(st.advance)
			v := decide(context.Background(), Request{Checks: []sluice.Check{{Limiter: l, Key: "k", Cost: 1}}, Enforced: 1, MaxDelay: s.maxDelay, Leaky: true})
			if v.Err != nil || len(v.Decisions) != 1 {
				t.Fatalf("%s, request %d: %v, %d decisions, error %v", s.name, i, v.Outcome, len(v.Decisions), v.Err)
			}
			d := v.Decisions[0]
			line := fmt.Sprintf("%s, request %d: %v wait %v r=%d", s.name, i, v.Outcome, v.Wait, d.Remaining)
			got = append(got, line)
			if v.Outcome != st.outcome || v.Wait != st.wait || d.Remaining != st.left {
				t.Errorf("%s; want %v wait %v r=%d", line, st.outcome, st.wait, st.left)
			}
			if v.Outcome == Admit && d.Delay > s.maxDelay {
				t.Errorf("%s: admitted with a delay of %v, past the maximum %v", line, d.Delay, s.maxDelay)
			}
		}
	}
	return got
}

// TestLeakyBoundEdges: the bound at its edges (a delay of exactly the
// maximum admitted, one a nanosecond or a grid unit longer refused; the
// conservative side when the maximum is not a multiple of the emission
// interval; r what still fits within the maximum), with identical answers
// on memstore and on a real Redis.
func TestLeakyBoundEdges(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	memClock := sluicetest.NewClock(t0)
	mem := memstore.New(memstore.WithClock(memClock), memstore.WithSweepInterval(0))
	defer mem.Close()
	onMem := runLeaky(t, mem, memClock)

	redisClock := sluicetest.NewClock(t0)
	rs, err := redisstore.Open("redis://"+sluicetest.StartRedis(t), redisstore.WithClock(redisClock), redisstore.WithPrefix(t.Name()+":"))
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	onRedis := runLeaky(t, rs, redisClock)
	if a, b := strings.Join(onMem, "\n"), strings.Join(onRedis, "\n"); a != b {
		t.Errorf("memstore and Redis differ:\n%s\n---\n%s", a, b)
	}
}

// gate is a store whose TakeAll waits until n calls have arrived, so that
// n requests are decided together: what a peek before the take would see
// is the queue before any of them.
type gate struct {
	sluice.Store
	n       int
	mu      sync.Mutex
	arrived int
	open    chan struct{}
}

func (g *gate) TakeAll(ctx context.Context, reqs []sluice.Request, out []sluice.Decision) error {
	g.mu.Lock()
	if g.arrived++; g.arrived == g.n {
		close(g.open)
	}
	g.mu.Unlock()
	<-g.open
	return g.Store.TakeAll(ctx, reqs, out)
}

// TestDecideLeakyTogether: 12 requests decided together on a queue of 30
// draining 1 per second, with the default maximum of 10 s: 11 are held
// for 0 to 10 s, the 12th is refused; none is held past the maximum. (With
// a peek at the queue before the take, all 12 passed the peek and the last
// was held 11 s.)
func TestDecideLeakyTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New(memstore.WithClock(clock.Monotonic()), memstore.WithSweepInterval(0))
		defer mem.Close()
		g := &gate{Store: mem, n: 12, open: make(chan struct{})}
		l, err := sluice.NewLimiter(g, sluice.Policy{Name: "lb", Algorithm: sluice.LeakyBucket, Limit: 1, Period: time.Second, Burst: 30})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var mu sync.Mutex
		var held []time.Duration
		refused := 0
		var wg sync.WaitGroup
		for range g.n {
			wg.Go(func() {
				v := Decide(context.Background(), Request{Checks: []sluice.Check{{Limiter: l, Key: "k", Cost: 1}}, Enforced: 1, MaxDelay: DefaultMaxDelay, Leaky: true})
				mu.Lock()
				defer mu.Unlock()
				switch v.Outcome {
				case Admit:
					held = append(held, time.Since(start))
				case Refuse:
					refused++
				}
			})
		}
		wg.Wait()
		for _, h := range held {
			if h > DefaultMaxDelay {
				t.Errorf("a request was held %v, past the maximum %v", h, DefaultMaxDelay)
			}
		}
		if len(held) != 11 || refused != 1 {
			t.Errorf("%d admitted, %d refused; want 11 and 1", len(held), refused)
		}
	})
}

// failing is a store whose every call fails.
type failing struct{ sluice.Store }

var errDown = errors.New("store down")

func (failing) Take(context.Context, sluice.Policy, string, int64) (sluice.Decision, error) {
	return sluice.Decision{}, errDown
}

func (failing) TakeAll(context.Context, []sluice.Request, []sluice.Decision) error { return errDown }

// TestDecideLeakyLocalShare: while the store fails, a FailLocal leaky
// bucket decides on its share, whose emission interval is not the
// policy's (3 per second over 2 replicas: 1 per second each, a queue of
// 15): no request is held past the maximum there either; the one whose
// local delay would pass it is refused.
func TestDecideLeakyLocalShare(t *testing.T) {
	clk := sluicetest.NewClock(time.Unix(0, 0))
	local := memstore.New(memstore.WithClock(clk), memstore.WithSweepInterval(0))
	defer local.Close()
	l, err := sluice.NewLimiter(failing{local}, sluice.Policy{Name: "lb", Algorithm: sluice.LeakyBucket, Limit: 3, Period: time.Second, Burst: 30},
		sluice.WithFailureMode(sluice.FailLocal), sluice.WithLocalStore(local, sluice.FixedReplicas(2)))
	if err != nil {
		t.Fatal(err)
	}
	q := Request{Checks: []sluice.Check{{Limiter: l, Key: "k", Cost: 1}}, Enforced: 1, MaxDelay: 10 * time.Second, Leaky: true}
	for i := range 11 {
		v := decide(context.Background(), q)
		if v.Outcome != Admit || v.Wait != time.Duration(i)*time.Second || !v.StoreFailed() {
			t.Fatalf("request %d: %v wait %v (store failed %v); want admitted on the local share, delay %ds", i, v.Outcome, v.Wait, v.StoreFailed(), i)
		}
	}
	v := decide(context.Background(), q)
	if v.Outcome != Refuse || v.Wait > time.Second {
		t.Fatalf("request 11 (a local delay of 11 s): %v wait %v; want refused, waiting at most 1s", v.Outcome, v.Wait)
	}
}

// TestDecideLeakyLocalRefusalTakesNoPlace: while the store fails, the
// local share (3 per second over 2 replicas: 1 per second each, a queue of
// 15) bounds the delay in the local call itself, with its own emission
// interval: a request whose local delay would pass the maximum (10 s) is
// refused and takes no place, so after its Retry-After the next one is
// admitted, and r counts down what still fits within the maximum there.
// (An outside review's test: the share used to admit it, and the refusal
// after the fact left its place taken, so a busy key stayed refused for
// the rest of the outage.)
func TestDecideLeakyLocalRefusalTakesNoPlace(t *testing.T) {
	clk := sluicetest.NewClock(time.Unix(0, 0))
	local := memstore.New(memstore.WithClock(clk), memstore.WithSweepInterval(0))
	defer local.Close()
	l, err := sluice.NewLimiter(failing{local}, sluice.Policy{Name: "lb", Algorithm: sluice.LeakyBucket, Limit: 3, Period: time.Second, Burst: 30},
		sluice.WithFailureMode(sluice.FailLocal), sluice.WithLocalStore(local, sluice.FixedReplicas(2)))
	if err != nil {
		t.Fatal(err)
	}
	q := Request{Checks: []sluice.Check{{Limiter: l, Key: "k", Cost: 1}}, Enforced: 1, MaxDelay: 10 * time.Second, Leaky: true}
	for i := range 11 { // local delays 0 to 10 s
		v := decide(context.Background(), q)
		if v.Outcome != Admit {
			t.Fatalf("request %d: %v; want admitted on the local share", i, v.Outcome)
		}
		if r := v.Decisions[0].Remaining; r != int64(10-i) {
			t.Errorf("request %d: r=%d; want %d (what still fits within 10 s there)", i, r, 10-i)
		}
	}
	v := decide(context.Background(), q)
	if v.Outcome != Refuse || v.Wait != time.Second {
		t.Fatalf("request 11 (a local delay of 11 s): %v wait %v; want refused, waiting 1s", v.Outcome, v.Wait)
	}
	clk.Advance(v.Wait)
	if v2 := decide(context.Background(), q); v2.Outcome != Admit || v2.Wait != 10*time.Second {
		t.Errorf("after the refusal's Retry-After (%v): %v, wait %v; want admitted with a delay of 10s (the refused request took no place in the queue)", v.Wait, v2.Outcome, v2.Wait)
	}
}

// TestDecideLeakyLocalDeadline: on the local share too, a request whose
// local delay is within the maximum but past its deadline is Gone at once
// and takes no place; one past the maximum as well is refused, waiting for
// the maximum (the share's delays: 1 per second).
func TestDecideLeakyLocalDeadline(t *testing.T) {
	clk := sluicetest.NewClock(time.Unix(0, 0))
	local := memstore.New(memstore.WithClock(clk), memstore.WithSweepInterval(0))
	defer local.Close()
	l, err := sluice.NewLimiter(failing{local}, sluice.Policy{Name: "lb", Algorithm: sluice.LeakyBucket, Limit: 3, Period: time.Second, Burst: 30},
		sluice.WithFailureMode(sluice.FailLocal), sluice.WithLocalStore(local, sluice.FixedReplicas(2)))
	if err != nil {
		t.Fatal(err)
	}
	ask := func(timeout time.Duration) Verdict {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return decide(ctx, Request{Checks: []sluice.Check{{Limiter: l, Key: "k", Cost: 1}}, Enforced: 1, MaxDelay: 10 * time.Second, Leaky: true})
	}
	for i := range 4 { // local delays 0 to 3 s
		if v := ask(time.Hour); v.Outcome != Admit || v.Wait != time.Duration(i)*time.Second {
			t.Fatalf("request %d: %v wait %v", i, v.Outcome, v.Wait)
		}
	}
	if v := ask(2 * time.Second); v.Outcome != Gone || !errors.Is(v.Err, context.DeadlineExceeded) {
		t.Fatalf("a local delay of 4s with 2s left: %v (%v); want Gone, DeadlineExceeded", v.Outcome, v.Err)
	}
	if v := ask(time.Hour); v.Outcome != Admit || v.Wait != 4*time.Second {
		t.Fatalf("after it: %v wait %v; want a delay of 4s (no place taken)", v.Outcome, v.Wait)
	}
	for range 6 { // local delays 5 to 10 s
		ask(time.Hour)
	}
	if v := ask(2 * time.Second); v.Outcome != Refuse || v.Wait != time.Second {
		t.Fatalf("a local delay of 11s with 2s left: %v wait %v; want refused, waiting 1s (for the maximum)", v.Outcome, v.Wait)
	}
	if v := ask(time.Hour); v.Outcome != Refuse || v.Wait != time.Second {
		t.Fatalf("after it: %v wait %v; want refused, waiting 1s (no place taken)", v.Outcome, v.Wait)
	}
}

// TestDecideLeakyDeadline: a request whose queue delay is within the
// maximum but past its deadline is Gone at once and takes no place in the
// queue; one past the maximum too is refused, waiting for the maximum, not
// its deadline; one that fits its deadline is admitted. On memstore and on
// Redis.
func TestDecideLeakyDeadline(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	redisClock := sluicetest.NewClock(t0)
	rs, err := redisstore.Open("redis://"+sluicetest.StartRedis(t), redisstore.WithClock(redisClock), redisstore.WithPrefix(t.Name()+":"))
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	memClock := sluicetest.NewClock(t0)
	mem := memstore.New(memstore.WithClock(memClock), memstore.WithSweepInterval(0))
	defer mem.Close()
	for name, store := range map[string]sluice.Store{"mem": mem, "redis": rs} {
		t.Run(name, func(t *testing.T) {
			l, err := sluice.NewLimiter(store, sluice.Policy{Name: "lb", Algorithm: sluice.LeakyBucket, Limit: 1, Period: time.Second, Burst: 30})
			if err != nil {
				t.Fatal(err)
			}
			ask := func(timeout time.Duration) Verdict {
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				defer cancel()
				return decide(ctx, Request{Checks: []sluice.Check{{Limiter: l, Key: "k", Cost: 1}}, Enforced: 1, MaxDelay: 10 * time.Second, Leaky: true})
			}
			for i := range 4 { // delays 0 to 3 s
				if v := ask(time.Hour); v.Outcome != Admit || v.Wait != time.Duration(i)*time.Second {
					t.Fatalf("request %d: %v wait %v", i, v.Outcome, v.Wait)
				}
			}
			// A delay of 4 s, 2 s left before the deadline.
			if v := ask(2 * time.Second); v.Outcome != Gone || !errors.Is(v.Err, context.DeadlineExceeded) {
				t.Fatalf("a delay of 4s with 2s left: %v (%v); want Gone, DeadlineExceeded", v.Outcome, v.Err)
			}
			if v := ask(time.Hour); v.Outcome != Admit || v.Wait != 4*time.Second {
				t.Fatalf("after it: %v wait %v; want a delay of 4s (no place taken)", v.Outcome, v.Wait)
			}
			for range 6 { // delays 5 to 10 s
				ask(time.Hour)
			}
			// A delay of 11 s: past the maximum as well as the deadline.
			if v := ask(2 * time.Second); v.Outcome != Refuse || v.Wait != time.Second {
				t.Fatalf("a delay of 11s with 2s left: %v wait %v; want refused, waiting 1s (for the maximum)", v.Outcome, v.Wait)
			}
		})
	}
}

// Capacity is B_1 = min(B, ⌊D/T⌋ + 1) for leaky-bucket, and the policy's
// capacity otherwise.
func TestCapacity(t *testing.T) {
	p := sluice.Policy{Name: "lb", Algorithm: sluice.LeakyBucket, Limit: 1, Period: time.Second, Burst: 30}
	for _, c := range []struct {
		p    sluice.Policy
		d    time.Duration
		want int64
	}{
		{p, 10 * time.Second, 11},
		{p, 10*time.Second - 1, 10},
		{p, 0, 1},
		{p, time.Hour, 30},
		{sluice.Policy{Algorithm: sluice.TokenBucket, Limit: 1, Period: time.Second, Burst: 30}, 0, 30},
	} {
		if got := Capacity(c.p, c.d); got != c.want {
			t.Errorf("Capacity(%v, %v) = %d; want %d", c.p, c.d, got, c.want)
		}
	}
}

// Order refuses an enforced leaky-bucket policy without a Name whose queue
// could hold a request (its bound is decided on a named policy's state),
// and accepts one as a shadow or one that holds nothing.
func TestOrderLeakyNeedsName(t *testing.T) {
	store := newStore(t)
	unnamed := func(burst int64) *sluice.Limiter {
		l, err := sluice.NewLimiter(store, sluice.Policy{Algorithm: sluice.LeakyBucket, Limit: 1, Period: time.Second, Burst: burst})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if _, _, err := Order("Default", 1, 0, []Spec{{Limiter: unnamed(30), Keyed: true}}); err == nil || !strings.Contains(err.Error(), "Default: limit 0: policy leaky-bucket 1/1s burst 30 has no Name") {
		t.Errorf("an unnamed leaky bucket: %v; want an error naming it", err)
	}
	if _, _, err := Order("Default", 1, 0, []Spec{{Limiter: unnamed(30), Keyed: true, Shadow: true}}); err != nil {
		t.Errorf("an unnamed shadow leaky bucket: %v", err)
	}
	if _, _, err := Order("Default", 2, 0, []Spec{{Limiter: unnamed(2), Keyed: true}}); err != nil {
		t.Errorf("an unnamed leaky bucket no longer than the cost: %v", err)
	}
}
