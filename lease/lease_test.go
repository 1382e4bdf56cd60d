// SPDX-License-Identifier: Apache-2.0

package lease_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/sluicetest"
)

// leased is a Limiter over its own lease.Store, as one process has.
type leased struct {
	*sluice.Limiter
	ls *lease.Store
}

func newLeased(store sluice.Store, p sluice.Policy, target time.Duration, clock clock.Clock) (leased, error) {
	ls := lease.New(store, lease.WithTarget(target), lease.WithClock(clock))
	l, err := sluice.NewLimiter(ls, p)
	return leased{l, ls}, err
}

func (l leased) LeaseStats() lease.Stats { return l.ls.Stats(l.Policy()) }

func (l leased) ReleaseLeases(ctx context.Context) error { return l.ls.ReleasePolicy(ctx, l.Policy()) }

// TestLeaseUnitDeadline drives a token-bucket block to the edge of its
// validity: a unit of a block taken from the TAT A is good until A + (i−1)·T
// (here less the 1 ns ResetAfter may be rounded up by), and not after.
func TestLeaseUnitDeadline(t *testing.T) {
	t0 := time.Unix(0, 0)
	clock := sluicetest.NewClock(t0)
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	// T = 100 ms.
	p := sluice.Policy{Name: "edge", Algorithm: sluice.TokenBucket, Limit: 10, Period: time.Second}
	l, err := newLeased(store, p, 50*time.Millisecond, clock)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	allow := func(at time.Duration) (sluice.Decision, uint64) {
		t.Helper()
		clock.Set(t0.Add(at))
		calls := l.LeaseStats().StoreCalls
		d, err := l.Allow(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		return d, l.LeaseStats().StoreCalls - calls
	}
	// The first block is one unit: the TAT moves to 100 ms.
	if d, calls := allow(0); !d.Allowed || calls != 1 {
		t.Fatalf("t=0: %+v, %d store calls", d, calls)
	}
	// 1 ms later the rate (1 per ms) asks for more: a block of 2 (twice
	// the last), A = 100 ms, the TAT 300 ms; one unit spent now.
	if d, calls := allow(time.Millisecond); !d.Allowed || calls != 1 {
		t.Fatalf("t=1ms: %+v, %d store calls", d, calls)
	}
	if s := l.LeaseStats(); s.Taken != 3 || s.Spent != 2 {
		t.Fatalf("after the second block: %+v, want 3 taken, 2 spent", s)
	}
	// The block's second unit is good until A + T = 200 ms.
	if d, calls := allow(200*time.Millisecond - time.Nanosecond); !d.Allowed || calls != 0 {
		t.Errorf("1 ns before the unit's deadline: %+v, %d store calls; want a local admission", d, calls)
	}
	// A second block, spent to its last unit, then one past it.
	clock.Set(t0)
	store2 := memstore.New(memstore.WithClock(clock))
	defer store2.Close()
	l, _ = newLeased(store2, p, 50*time.Millisecond, clock)
	allow(0)
	allow(time.Millisecond)
	if d, calls := allow(200 * time.Millisecond); calls == 0 {
		t.Errorf("at the unit's deadline: %+v decided locally; want the store asked", d)
	}
}

// TestLeaseRefused: algorithms where a lease cannot keep the exact limit
// are refused with an error naming them, and shards reject bad counts.
// TestReleaseLeases: a retired limiter gives its unspent block back, and
// another process can take those units at once.
func TestReleaseLeases(t *testing.T) {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	p := sluice.Policy{Name: "rel", Algorithm: sluice.FixedWindow, Limit: 100, Period: time.Hour}
	a, _ := newLeased(store, p, time.Second, clock)
	b, _ := newLeased(store, p, time.Second, clock)
	ctx := context.Background()
	for range 20 { // a grows blocks: 1, 2, 4, 8, 16, ...
		clock.Advance(time.Millisecond)
		if d, err := a.Allow(ctx, "k"); err != nil || !d.Allowed {
			t.Fatalf("a: %+v %v", d, err)
		}
	}
	held := a.LeaseStats().Taken - a.LeaseStats().Spent
	if held == 0 {
		t.Fatal("a holds nothing: the test needs a live block")
	}
	if err := a.ReleaseLeases(ctx); err != nil {
		t.Fatal(err)
	}
	if s := a.LeaseStats(); s.Returned != held {
		t.Errorf("a returned %d of the %d units it held", s.Returned, held)
	}
	admitted := 0
	for range 100 {
		if d, err := b.Allow(ctx, "k"); err != nil {
			t.Fatal(err)
		} else if d.Allowed {
			admitted++
		}
	}
	if admitted != 80 {
		t.Errorf("b admitted %d after a released its block, want the 80 a did not spend", admitted)
	}
}

// TestLeaseManyKeys: a leasing limiter over many keys, from many goroutines,
// sweeps idle keys from its table while others are being decided: every
// key still gets exactly its limit.
func TestLeaseManyKeys(t *testing.T) {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	p := sluice.Policy{Name: "many", Algorithm: sluice.FixedWindow, Limit: 3, Period: time.Hour}
	l, _ := newLeased(store, p, 0, clock)
	ctx := context.Background()
	const keys, workers = 3000, 8
	var wg sync.WaitGroup
	admitted := make([]atomic.Int64, keys)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range keys {
				k := (i*7 + w*131) % keys
				d, err := l.Allow(ctx, "key-"+strconv.Itoa(k))
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted[k].Add(1)
				}
			}
		}()
	}
	wg.Wait()
	for k := range admitted {
		if n := admitted[k].Load(); n != 3 {
			t.Fatalf("key %d: admitted %d of %d requests, want exactly the limit 3", k, n, workers)
		}
	}
}

// TestLeaseRemaining: a decision made from a lease reports what the key
// has left, as one without leases would: for one process on a fixed
// window, exactly the limit less what it admitted (not the few units its
// block still holds, which made every leased key look at its limit).
func TestLeaseRemaining(t *testing.T) {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	l, err := newLeased(store, sluice.Policy{Name: "w", Algorithm: sluice.FixedWindow, Limit: 100, Period: time.Second}, 0, clock)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 80 {
		d, err := l.Allow(ctx, "k")
		if err != nil || !d.Allowed {
			t.Fatalf("request %d: %+v %v", i, d, err)
		}
		if want := int64(100 - (i + 1)); d.Remaining != want {
			t.Errorf("request %d: Remaining %d, want %d", i, d.Remaining, want)
		}
		clock.Advance(time.Millisecond)
	}
	if st := l.LeaseStats(); st.Local == 0 {
		t.Errorf("LeaseStats() = %+v: no local decision, the test tests nothing", st)
	}
}

// slow is a store that takes 500ms to answer, whatever the caller's
// context says.
type slow struct{ sluice.Store }

func (s slow) Take(ctx context.Context, p sluice.Policy, key string, cost int64) (sluice.Decision, error) {
	time.Sleep(500 * time.Millisecond)
	return s.Store.Take(context.WithoutCancel(ctx), p, key, cost)
}

// TestLeaseWaitEndsWithCtx: a request waiting for another request of its
// key (which holds the key's lease across a slow store round trip) returns
// when its own context ends (on 1b40f8a, with a 500ms store a call with a
// 20ms deadline returned after 480ms).
func TestLeaseWaitEndsWithCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New(memstore.WithSweepInterval(0))
		defer mem.Close()
		ls := lease.New(slow{mem})
		l, err := sluice.NewLimiter(ls, sluice.Policy{Name: "p", Algorithm: sluice.GCRA, Limit: 10, Period: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		go l.Allow(ctx, "k") // holds k's lease for 500ms
		time.Sleep(time.Millisecond)
		short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		start := time.Now()
		d, err := l.Allow(short, "k")
		if took := time.Since(start); took > 20*time.Millisecond || !errors.Is(err, context.DeadlineExceeded) || d.Allowed {
			t.Errorf("a waiting Allow with a 20ms deadline: %+v %v after %v; want refused with DeadlineExceeded after 19ms", d, err, took)
		}
		synctest.Wait()
		time.Sleep(time.Second) // let the slow take finish inside the bubble
	})
}

// TestChargeReachesStore: a charge through a lease store is recorded in the
// wrapped store at once (a second replica sees the debt), and the lease
// spends only the block it took before.
func TestChargeReachesStore(t *testing.T) {
	clock := sluicetest.NewClock(time.Unix(0, 0))
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	p := sluice.Policy{Name: "tokens", Algorithm: sluice.FixedWindow, Limit: 1000, Period: time.Minute}
	a, err := newLeased(store, p, 50*time.Millisecond, clock)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := newLeased(store, p, 50*time.Millisecond, clock)
	ctx := context.Background()
	if d, _ := a.Allow(ctx, "tenant"); !d.Allowed {
		t.Fatalf("first: %+v", d)
	}
	held := a.LeaseStats()
	d, err := a.Charge(ctx, "tenant", 2000)
	if err != nil || d.Allowed {
		t.Fatalf("charge 2000: %+v, %v; want the key in debt", d, err)
	}
	if d, _ := b.Allow(ctx, "tenant"); d.Allowed {
		t.Fatalf("another replica admits a key in debt: %+v", d)
	}
	if st := a.LeaseStats(); st.StoreCalls != held.StoreCalls {
		t.Fatalf("the charge went through the lease: %+v, was %+v", st, held)
	}
}

// TestChargeEndsBlock: a charge through the lease store (Limiter.Charge,
// "the key is then in debt and refuses until that is paid back") ends this
// process's block of the key, giving its unspent units back, so the next
// request asks the store and is refused, as the exact model of one key
// refuses it (the package's Contract). Before, the block kept admitting: 10
// of 10 requests after a Charge that answered Allowed false, Debt 109. A
// refusal being reused is dropped too: its RetryAfter, from before the
// charge, would be early.
func TestChargeEndsBlock(t *testing.T) {
	ctx := context.Background()
	clk := sluicetest.NewClock(time.Unix(0, 0))
	p := sluice.Policy{Name: "llm", Algorithm: sluice.TokenBucket, Limit: 100, Period: time.Second, Burst: 100}
	ls := lease.New(memstore.New(memstore.WithClock(clk), memstore.WithSweepInterval(0)), lease.WithClock(clk))
	defer ls.Close()
	lim, err := sluice.NewLimiter(ls, p)
	if err != nil {
		t.Fatal(err)
	}
	for range 40 {
		if d, err := lim.Allow(ctx, "tenant"); err != nil || !d.Allowed {
			t.Fatalf("warm-up Allow: %+v %v", d, err)
		}
		clk.Advance(time.Millisecond)
	}
	held := ls.Stats(p).Taken - ls.Stats(p).Spent
	if held == 0 {
		t.Fatal("no live block before the charge: the test needs one")
	}
	d, err := lim.Charge(ctx, "tenant", 150)
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed || d.Debt == 0 {
		t.Fatalf("Charge(150) left the key admitting: %+v", d)
	}
	if s := ls.Stats(p); s.Returned != held {
		t.Errorf("the charge gave back %d of the %d units the block held", s.Returned, held)
	}
	admitted := 0
	for range 10 {
		if d, err := lim.Allow(ctx, "tenant"); err == nil && d.Allowed {
			admitted++
		}
	}
	if admitted > 0 {
		t.Errorf("after Charge answered Allowed false (key in debt), %d of 10 Allow calls at the same instant were admitted", admitted)
	}
	if d, err := lim.AllowN(ctx, "tenant", 0); err != nil || d.Allowed {
		t.Errorf("a peek after the charge: %+v %v; want refused", d, err)
	}

	// A refusal reused from before a charge: T = 100 ms, the key emptied
	// at t0, its refusal (RetryAfter 100 ms) reused until then.
	p2 := sluice.Policy{Name: "reuse", Algorithm: sluice.TokenBucket, Limit: 10, Period: time.Second}
	lim2, err := sluice.NewLimiter(ls, p2)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if d, err := lim2.Allow(ctx, "k"); err != nil || !d.Allowed {
			t.Fatalf("Allow: %+v %v", d, err)
		}
	}
	calls := ls.Stats(p2).StoreCalls
	for range 2 {
		if d, err := lim2.Allow(ctx, "k"); err != nil || d.Allowed {
			t.Fatalf("Allow on the empty key: %+v %v", d, err)
		}
	}
	if ls.Stats(p2).StoreCalls-calls != 1 {
		t.Fatalf("the refusal was not reused (%d store calls): the test needs it", ls.Stats(p2).StoreCalls-calls)
	}
	charged, err := lim2.Charge(ctx, "k", 50)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := lim2.Allow(ctx, "k"); err != nil || d.Allowed || d.RetryAfter < charged.RetryAfter {
		t.Errorf("Allow after Charge(50) (RetryAfter %v): %+v %v; want refused, RetryAfter at least the charge's", charged.RetryAfter, d, err)
	}

	// A reservation that spent its block to the last unit (the first block
	// of a key is the request's size), then a charge: the reservation's
	// commit below its estimate puts nothing back into the ended block.
	p3 := sluice.Policy{Name: "last", Algorithm: sluice.FixedWindow, Limit: 10, Period: time.Hour}
	lim3, err := sluice.NewLimiter(ls, p3)
	if err != nil {
		t.Fatal(err)
	}
	r, err := lim3.Reserve(ctx, "k", 4)
	if err != nil || !r.Decision.Allowed {
		t.Fatalf("Reserve(4): %+v %v", r.Decision, err)
	}
	if _, err := lim3.Charge(ctx, "k", 20); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Commit(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if d, err := lim3.Allow(ctx, "k"); err != nil || d.Allowed {
		t.Errorf("Allow after Reserve(4), Charge(20), Commit(1) in a window of 10: %+v %v; want refused", d, err)
	}
}

// TestChargesExact is the Contract with charges and refunds for one
// process (C = 0): random requests, charges and reservations committed
// above, at or below their estimate (at once, or after other requests) on
// one leasing Limiter. Every request it admitted, replayed at its instant
// through the exact model with the charges at theirs (a reservation at its
// estimate less what its commit put back into its block), is admitted by
// the model.
func TestChargesExact(t *testing.T) {
	ctx := context.Background()
	for _, p := range []sluice.Policy{
		{Name: "tb", Algorithm: sluice.TokenBucket, Limit: 50, Period: time.Second, Burst: 20},
		{Name: "gcra", Algorithm: sluice.GCRA, Limit: 7, Period: 300 * time.Millisecond},
		{Name: "fw", Algorithm: sluice.FixedWindow, Limit: 40, Period: time.Second},
	} {
		t.Run(string(p.Algorithm), func(t *testing.T) {
			clk := sluicetest.NewClock(time.Unix(1_000_000, 0))
			mem := memstore.New(memstore.WithClock(clk), memstore.WithSweepInterval(0))
			ls := lease.New(mem, lease.WithClock(clk), lease.WithTarget(50*time.Millisecond))
			defer ls.Close()
			lim, err := sluice.NewLimiter(ls, p)
			if err != nil {
				t.Fatal(err)
			}
			m, err := model.New(p)
			if err != nil {
				t.Fatal(err)
			}
			// An event is an admission (or, charge, a charge) to replay.
			type event struct {
				at     int64
				key    string
				cost   int64
				charge bool
				what   string
			}
			type reservation struct {
				r     *sluice.Reservation
				key   string
				event int // its admission in events, or -1
			}
			var (
				events                       []event
				open                         []reservation
				rng                          = rand.New(rand.NewPCG(uint64(p.Limit), 16))
				keys                         = []string{"hot", "warm"}
				mean                         = p.Period / time.Duration(p.Limit) / 2
				admitted, refused, refunded  int64
				charges, reserved, committed int64
			)
			commit := func(at int64, rv reservation) {
				est := int64(0) // a refused reservation holds nothing
				if rv.event >= 0 {
					est = events[rv.event].cost
				}
				actual := rng.Int64N(est + 3)
				spent := ls.Stats(p).Spent
				if _, err := rv.r.Commit(ctx, actual); err != nil {
					t.Fatal(err)
				}
				committed++
				back := int64(spent - ls.Stats(p).Spent)
				if rv.event >= 0 {
					events[rv.event].cost -= back
					events[rv.event].what = fmt.Sprintf("reserve %d, committed %d, %d put back", est, actual, back)
					refunded += back
				}
				if actual > est {
					events = append(events, event{at, rv.key, actual - est, true, fmt.Sprintf("commit %d of %d", actual, est)})
				}
			}
			for i := range 3000 {
				step := time.Duration(rng.ExpFloat64() * float64(mean))
				if i%600 == 0 {
					step += 2 * p.Period
				}
				clk.Advance(step)
				at := clk.Now().UnixNano()
				key := keys[min(rng.IntN(4), 1)]
				switch op := rng.IntN(20); {
				case op == 0:
					c := 1 + rng.Int64N(p.Limit/2+1)
					if _, err := lim.Charge(ctx, key, c); err != nil {
						t.Fatal(err)
					}
					events = append(events, event{at, key, c, true, "charge"})
					charges++
				case op <= 3:
					est := 1 + rng.Int64N(4)
					r, err := lim.Reserve(ctx, key, est)
					if err != nil {
						t.Fatal(err)
					}
					rv := reservation{r, key, -1}
					if r.Decision.Allowed {
						rv.event = len(events)
						events = append(events, event{at, key, est, false, "reserve"})
						reserved++
					}
					if op <= 2 {
						commit(at, rv) // at once: nothing spent since
					} else {
						open = append(open, rv)
					}
				case op == 4 && len(open) > 0:
					j := rng.IntN(len(open))
					rv := open[j]
					open = append(open[:j], open[j+1:]...)
					commit(at, rv)
				default:
					cost := int64(1)
					if rng.IntN(8) == 0 {
						cost = 1 + rng.Int64N(3)
					}
					d, err := lim.AllowN(ctx, key, cost)
					if err != nil {
						t.Fatal(err)
					}
					if d.Allowed {
						events = append(events, event{at, key, cost, false, "allow"})
						admitted++
					} else {
						refused++
					}
				}
			}
			state := map[string]model.State{}
			for i, e := range events {
				if e.charge {
					state[e.key], _ = m.Charge(state[e.key], e.at, e.cost)
					continue
				}
				if e.cost == 0 {
					continue
				}
				next, d := m.Take(state[e.key], e.at, e.cost)
				if !d.Allowed {
					t.Fatalf("event %d (%s, %s, cost %d): admitted by the lease, refused by the exact model", i, e.key, e.what, e.cost)
				}
				state[e.key] = next
			}
			s := ls.Stats(p)
			if admitted == 0 || refused == 0 || s.Local == 0 || refunded == 0 || s.Returned == 0 {
				t.Errorf("a degenerate run: %d admitted, %d refused, %d local, %d units put back into blocks, %d given back", admitted, refused, s.Local, refunded, s.Returned)
			}
			t.Logf("%d requests admitted, %d refused; %d charges; %d reservations admitted, %d committed; %d local decisions, %d store calls; %d units put back into blocks, %d given back to the store",
				admitted, refused, charges, reserved, committed, s.Local, s.StoreCalls, refunded, s.Returned)
		})
	}
}
