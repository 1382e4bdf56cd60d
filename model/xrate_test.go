// SPDX-License-Identifier: Apache-2.0

package model_test

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
)

// TestXRate compares token-bucket and gcra with golang.org/x/time/rate on
// random traces. Both start full and refill continuously, so they must agree
// on every decision, except where x/time/rate's float arithmetic rounds a
// tie the other way.
//
// A tie is recognised exactly: with the bucket's theoretical arrival time
// kept as a big.Rat, a request of cost c at t becomes admissible at
// t* = TAT + c·T − Burst·T (T = Period/Limit), and the model admits iff
// t ≥ t*. x/time/rate admits when its deficit, converted to a
// time.Duration, truncates to zero: up to 1ns early, give or take float
// error. So a disagreement is a tie iff δ = t* − t lies in
// (−ε, 1ns + ε), where ε bounds the float error (see xrateSlack). Every
// disagreement must be a tie, and ties must be rare.
//
// After a tie, the two disagree about the state; the trace goes on with
// both restarted (a new limiter, an idle state), which both see as a full
// bucket.
func TestXRate(t *testing.T) {
	cases := []struct {
		limit  int64
		period time.Duration
		burst  int64
	}{
		{5, time.Second, 10},
		{3, time.Second, 3},
		{7, time.Minute, 7},
		{7, time.Minute, 3},
		{1000, time.Hour, 1},
		{100, time.Millisecond, 50},
		{1_000_000, time.Second, 1000},
		{1, 90 * 24 * time.Hour, 4},
		{12345, 7 * time.Second, 6789},
	}
	var decisions, ties int
	for _, alg := range []sluice.Algorithm{sluice.TokenBucket, sluice.GCRA} {
		for i, c := range cases {
			p := sluice.Policy{Algorithm: alg, Limit: c.limit, Period: c.period, Burst: c.burst}
			t.Run(fmt.Sprintf("%s/%dper%v_burst%d", alg, c.limit, c.period, c.burst), func(t *testing.T) {
				n, k := xrateTrace(t, p, uint64(i))
				decisions += n
				ties += k
				if k*100 >= n {
					t.Errorf("%d ties in %d decisions: not rare", k, n)
				}
			})
		}
	}
	t.Logf("%d decisions, %d of them ties decided differently by x/time/rate", decisions, ties)
	// The traces aim at ties now and then; none at all would mean the
	// detection above was never exercised.
	if ties == 0 {
		t.Errorf("no ties in %d decisions: the traces no longer reach them", decisions)
	}
}

// xrateSlack is ε in TestXRate's tie window, in nanoseconds: float64 carries
// 53 bits, and x/time/rate's tokens, at most Burst, are converted to and
// from time over at most Burst·T, so its error stays far below
// Burst·T·2⁻⁴⁰ plus a small absolute margin.
func xrateSlack(burstDur *big.Rat) *big.Rat {
	eps := new(big.Rat).Mul(burstDur, big.NewRat(1, 1<<40))
	return eps.Add(eps, big.NewRat(1, 1000))
}

// xrateTrace runs one random trace and returns the number of decisions and
// of ties on which x/time/rate decided differently.
func xrateTrace(t *testing.T, p sluice.Policy, seed uint64) (decisions, ties int) {
	m, err := model.New(p)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 0xa11ce))
	perSecond := float64(p.Limit) / p.Period.Seconds()
	interval := big.NewRat(int64(p.Period), p.Limit) // T, in ns
	burstDur := new(big.Rat).Mul(interval, big.NewRat(p.Burst, 1))
	slack := xrateSlack(burstDur)
	lo := new(big.Rat).Neg(slack)
	hi := new(big.Rat).Add(big.NewRat(1, 1), slack)
	intervalNs := max(int64(p.Period)/p.Limit, 1)

	var (
		lim   *rate.Limiter
		state model.State
		tat   *big.Rat // exact TAT, ns since the epoch
	)
	restart := func() {
		lim = rate.NewLimiter(rate.Limit(perSecond), int(p.Burst))
		state = model.State{}
		tat = new(big.Rat)
	}
	restart()
	// admissibleAt returns t* for cost c: TAT + c·T − Burst·T.
	admissibleAt := func(c int64) *big.Rat {
		x := new(big.Rat).Mul(interval, big.NewRat(c, 1))
		x.Add(x, tat)
		return x.Sub(x, burstDur)
	}
	const start = 1_700_000_000_000_000_000
	now := int64(start)
	for i := range 5000 {
		if now > model.MaxTime/2 {
			// Long periods run far ahead: start over, well inside the
			// models' range.
			now = start
			restart()
		}
		var cost int64
		switch x := rng.IntN(100); {
		case x < 5:
			cost = 0
		case x < 60:
			cost = 1
		case x < 97:
			cost = 1 + rng.Int64N(p.Burst)
		default:
			cost = p.Burst + 1
		}
		switch x := rng.IntN(1000); {
		case x < 300:
		case x < 700:
			now += rng.Int64N(2 * intervalNs)
		case x < 900:
			now += rng.Int64N(max(cost, 1) * intervalNs)
		case x < 990:
			now += rng.Int64N(int64(p.Burst) * intervalNs)
		default:
			// Aim at the tie: the last whole nanosecond before t*, or
			// t* rounded up.
			at := admissibleAt(max(cost, 1))
			q := new(big.Int).Quo(at.Num(), at.Denom()) // toward zero; t* > 0 here when it matters
			target := q.Int64() + rng.Int64N(2)
			now = max(now, target)
		}
		at := admissibleAt(max(cost, 1)) // a peek is admitted iff cost 1 would be
		tNow := new(big.Rat).SetInt64(now)
		exact := cost <= p.Burst && tNow.Cmp(at) >= 0

		var d sluice.Decision
		state, d = m.Take(state, now, cost)
		if d.Allowed != exact {
			t.Fatalf("request %d (t=%dns cost %d): the model says %v, exact arithmetic %v (TAT %s)", i, now, cost, d.Allowed, exact, tat.FloatString(3))
		}
		if cost == 0 {
			continue // x/time/rate admits every AllowN of 0: nothing to compare
		}
		xr := lim.AllowN(time.Unix(0, now), int(cost))
		decisions++
		if exact {
			// TAT = max(TAT, t) + c·T
			if tat.Cmp(tNow) < 0 {
				tat.Set(tNow)
			}
			tat.Add(tat, new(big.Rat).Mul(interval, big.NewRat(cost, 1)))
		}
		if xr == exact {
			continue
		}
		delta := new(big.Rat).Sub(at, tNow) // how early the request is
		if cost > p.Burst || delta.Cmp(lo) <= 0 || delta.Cmp(hi) >= 0 {
			t.Fatalf("request %d (t=%dns cost %d): x/time/rate says %v, the model %v, and it is no tie: it becomes admissible %sns after it arrives",
				i, now, cost, xr, exact, delta.FloatString(6))
		}
		ties++
		restart()
	}
	return decisions, ties
}
