// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestPeriodsOfOneName: policies of one name and algorithm with different
// periods, limits and bursts share a key's state; on a caller's clock,
// every decision of redisstore (singles.lua and take.lua) is memstore's and
// the models' on one state per key: single takes and peeks, batches that mix
// the policies (with charges, refused or not), TakeStamped and Give.
//
// Which policy judges a state idle is left out: memstore drops a key that
// a request finds idle under its own policy (a longer sibling may still
// count it), Redis on this clock keeps it for the slack. When memstore drops
// one, the test drops it from Redis and from the models too.
func TestPeriodsOfOneName(t *testing.T) {
	addr := sluicetest.StartRedis(t)
	groups := map[string][]sluice.Policy{
		// The bucket kinds' emission intervals are whole nanoseconds here
		// (TestTwoRatesRefusedBatch has fractions).
		"token-bucket": {
			{Algorithm: sluice.TokenBucket, Limit: 4, Period: time.Second},
			{Algorithm: sluice.TokenBucket, Limit: 5, Period: 3 * time.Second, Burst: 4},
			{Algorithm: sluice.TokenBucket, Limit: 8, Period: 700 * time.Millisecond, Burst: 2},
		},
		"gcra": {
			{Algorithm: sluice.GCRA, Limit: 2, Period: time.Second},
			{Algorithm: sluice.GCRA, Limit: 5, Period: 2 * time.Second, Burst: 7},
		},
		"leaky-bucket": {
			{Algorithm: sluice.LeakyBucket, Limit: 4, Period: time.Second, Burst: 3},
			{Algorithm: sluice.LeakyBucket, Limit: 8, Period: 2 * time.Second},
		},
		"fixed-window": {
			{Algorithm: sluice.FixedWindow, Limit: 5, Period: time.Second},
			{Algorithm: sluice.FixedWindow, Limit: 3, Period: 3 * time.Second},
			{Algorithm: sluice.FixedWindow, Limit: 8, Period: 1500 * time.Millisecond},
		},
		"sliding-window": {
			{Algorithm: sluice.SlidingWindow, Limit: 5, Period: time.Second},
			{Algorithm: sluice.SlidingWindow, Limit: 3, Period: 3 * time.Second},
			{Algorithm: sluice.SlidingWindow, Limit: 8, Period: 1500 * time.Millisecond},
		},
		"sliding-log": {
			{Algorithm: sluice.SlidingLog, Limit: 5, Period: time.Second},
			{Algorithm: sluice.SlidingLog, Limit: 3, Period: 3 * time.Second},
			{Algorithm: sluice.SlidingLog, Limit: 8, Period: 1500 * time.Millisecond},
		},
	}
	for name, ps := range groups {
		t.Run(name, func(t *testing.T) {
			for i := range ps {
				ps[i].Name = "api"
			}
			c := newClient(t, addr)
			t0 := time.Unix(1_700_000_000, 0)
			clock := sluicetest.NewClock(t0)
			rs := newStore(t, c, WithClock(clock), WithPrefix("p"+strconv.Itoa(len(name))+name+":"))
			ms := memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0))
			defer ms.Close()
			ctx := t.Context()
			rng := rand.New(rand.NewPCG(1, uint64(len(name))))
			var log []string
			fail := func(i int, format string, a ...any) {
				t.Helper()
				for _, l := range log[max(0, len(log)-30):] {
					t.Log(l)
				}
				t.Fatalf("step %d: "+format, append([]any{i}, a...)...)
			}
			o := newOracle(t, ps...)
			var at time.Duration
			for i := range 3000 {
				at += time.Duration(rng.IntN(400)) * time.Millisecond
				clock.Set(t0.Add(at))
				key := "k" + strconv.Itoa(rng.IntN(2))
				held := ms.Len()
				pick := func() sluice.Policy { return ps[rng.IntN(len(ps))] }
				cost := func() int64 { return []int64{0, 1, 1, 1, 2, 3, 9}[rng.IntN(7)] }
				switch op := rng.IntN(10); {
				case op < 5:
					p, c := pick(), cost()
					g, err1 := rs.Take(ctx, p, key, c)
					w, err2 := ms.Take(ctx, p, key, c)
					m := o.take(p, key, clock.Now().UnixNano(), c)
					log = append(log, fmt.Sprintf("%d at %v: take %v %s %d: redis %+v mem %+v model %+v", i, at, p, key, c, g, w, m))
					if err1 != nil || err2 != nil || g != w || g != m {
						fail(i, "take: %v %v", err1, err2)
					}
				case op < 8:
					n := 1 + rng.IntN(3)
					reqs := make([]sluice.Request, n)
					for j := range reqs {
						reqs[j] = sluice.Request{Policy: pick(), Key: key, Cost: cost(), Force: rng.IntN(5) == 0}
					}
					g, w := make([]sluice.Decision, n), make([]sluice.Decision, n)
					err1 := rs.TakeAll(ctx, reqs, g)
					err2 := ms.TakeAll(ctx, reqs, w)
					m := o.batch(clock.Now().UnixNano(), reqs)
					log = append(log, fmt.Sprintf("%d at %v: batch %+v:\n redis %+v\n mem   %+v\n model %+v", i, at, reqs, g, w, m))
					if err1 != nil || err2 != nil || !reflect.DeepEqual(g, w) || !reflect.DeepEqual(g, m) {
						fail(i, "batch: %v %v", err1, err2)
					}
				default:
					p, c := pick(), cost()
					g, gs, err1 := rs.TakeStamped(ctx, p, key, c)
					w, wst, err2 := ms.TakeStamped(ctx, p, key, c)
					m := o.take(p, key, clock.Now().UnixNano(), c)
					log = append(log, fmt.Sprintf("%d at %v: stamped %v %s %d: redis %+v %+v mem %+v %+v model %+v", i, at, p, key, c, g, gs, w, wst, m))
					if err1 != nil || err2 != nil || g != w || g != m {
						fail(i, "stamped: %v %v", err1, err2)
					}
					if g.Allowed && c > 0 {
						u := 1 + rng.Int64N(c)
						gg, err1 := rs.Give(ctx, p, key, gs, u)
						wg, err2 := ms.Give(ctx, p, key, wst, u)
						og := o.give(p, key, wst, u)
						log = append(log, fmt.Sprintf("%d: give %d: redis %v mem %v model %v", i, u, gg, wg, og))
						if err1 != nil || err2 != nil || gg != wg || gg != og {
							fail(i, "give: %v %v", err1, err2)
						}
					}
				}
				if ms.Len() < held {
					// memstore dropped the key: idle under the policy that
					// touched it. Redis on this clock keeps it for the
					// slack; with Redis TIME it would be gone too.
					st, lg := stateKey(rs.prefix, rs.slot, policyTag(ps[0]), key)
					if err := c.Do(ctx, c.B().Del().Key(st, lg).Build()).Error(); err != nil {
						t.Fatal(err)
					}
					o.drop(key)
					log = append(log, fmt.Sprintf("%d: memstore dropped %s", i, key))
				}
			}
		})
	}
}

// oracle is the models on one state per key, as the stores share it among
// the policies of one name: each request reads a bucket's fraction on its
// own grid (den), rounded up, and a write keeps the writer's.
type oracle struct {
	models map[sluice.Policy]*model.Model
	st     map[string]model.State
	den    map[string]int64 // the grid of st's fraction
}

func newOracle(t *testing.T, ps ...sluice.Policy) *oracle {
	o := &oracle{models: map[sluice.Policy]*model.Model{}, st: map[string]model.State{}, den: map[string]int64{}}
	for _, p := range ps {
		m, err := model.New(p)
		if err != nil {
			t.Fatal(err)
		}
		o.models[p] = m
	}
	return o
}

// read returns st (on the grid den) on m's grid.
func (o *oracle) read(st model.State, den int64, m *model.Model) model.State {
	to := m.Denominator()
	if den == 0 || den == to || st.Frac == 0 {
		return st
	}
	f := new(big.Int).Mul(big.NewInt(st.Frac), big.NewInt(to))
	q, r := f.QuoRem(f, big.NewInt(den), new(big.Int))
	st.Frac = q.Int64()
	if r.Sign() > 0 {
		st.Frac++
	}
	if st.Frac == to {
		st.Time, st.Frac = st.Time+1, 0
	}
	return st
}

// drop forgets key.
func (o *oracle) drop(key string) { delete(o.st, key); delete(o.den, key) }

// take is Store.Take.
func (o *oracle) take(p sluice.Policy, key string, now, cost int64) sluice.Decision {
	m := o.models[p]
	next, d := m.Take(o.read(o.st[key], o.den[key], m), now, cost)
	if d.Allowed && cost > 0 {
		o.st[key], o.den[key] = next, m.Denominator()
	}
	return d
}

// give is Give.
func (o *oracle) give(p sluice.Policy, key string, stamp model.State, units int64) bool {
	m := o.models[p]
	next, ok := m.Give(o.read(o.st[key], o.den[key], m), stamp, units)
	if ok {
		o.st[key], o.den[key] = next, m.Denominator()
	}
	return ok
}

// batch is TakeAll: in order on one state per key, recorded only if no
// request (but a charge) is refused, else the admitted requests and the
// charges report a peek on the state before the batch.
func (o *oracle) batch(now int64, reqs []sluice.Request) []sluice.Decision {
	out := make([]sluice.Decision, len(reqs))
	st, den := map[string]model.State{}, map[string]int64{}
	for _, r := range reqs {
		if _, ok := st[r.Key]; !ok {
			st[r.Key], den[r.Key] = o.st[r.Key], o.den[r.Key]
		}
	}
	refused := false
	for i, r := range reqs {
		m := o.models[r.Policy]
		s := o.read(st[r.Key], den[r.Key], m)
		if r.Force {
			s, out[i] = m.Charge(s, now, r.Cost)
		} else {
			s, out[i] = m.Take(s, now, r.Cost)
			refused = refused || !out[i].Allowed
		}
		st[r.Key], den[r.Key] = s, m.Denominator()
	}
	if refused {
		for i, r := range reqs {
			if out[i].Allowed || r.Force {
				m := o.models[r.Policy]
				_, out[i] = m.Take(o.read(o.st[r.Key], o.den[r.Key], m), now, 0)
			}
		}
		return out
	}
	for k := range st {
		o.st[k], o.den[k] = st[k], den[k]
	}
	return out
}

// TestRefusedBatchOfTwoPeriods: in a refused batch, each admitted request
// reports a peek on its key's stored state as its own policy reads it, not
// as the key's first request (a policy of the same name) read it: a
// bucket's fraction is on the request's own grid (it was read on another:
// Remaining 18446744076), a log's entries are those inside the request's
// own window (a shorter period had dropped some: admitted, Remaining 2).
// And a peek under a shorter period leaves a longer one's entries to it
// (Redis admitted a third unit of 2 per 10 s).
func TestRefusedBatchOfTwoPeriods(t *testing.T) {
	c := newClient(t, sluicetest.StartRedis(t))
	t0 := time.Unix(1_700_000_000, 0)
	bucket7 := sluice.Policy{Name: "b", Algorithm: sluice.TokenBucket, Limit: 7, Period: time.Second} // sevenths of a ns
	bucket3 := sluice.Policy{Name: "b", Algorithm: sluice.TokenBucket, Limit: 3, Period: time.Second} // thirds
	short := sluice.Policy{Name: "l", Algorithm: sluice.SlidingLog, Limit: 10, Period: time.Second}
	long := sluice.Policy{Name: "l", Algorithm: sluice.SlidingLog, Limit: 2, Period: 10 * time.Second}
	for _, tc := range []struct {
		name  string
		setup sluice.Request // at t0
		batch []sluice.Request
	}{
		{"bucket", sluice.Request{Policy: bucket7, Key: "k", Cost: 3}, []sluice.Request{
			{Policy: bucket7, Key: "k", Cost: 0}, {Policy: bucket3, Key: "k", Cost: 1}, {Policy: bucket3, Key: "k", Cost: 9}}},
		{"log-refused", sluice.Request{Policy: long, Key: "k", Cost: 2}, []sluice.Request{
			{Policy: short, Key: "k", Cost: 1}, {Policy: long, Key: "k", Cost: 0}, {Policy: short, Key: "k", Cost: 99}}},
		{"log-peek", sluice.Request{Policy: long, Key: "k", Cost: 2}, []sluice.Request{
			{Policy: short, Key: "k", Cost: 0}, {Policy: long, Key: "k", Cost: 1}}},
		{"log-charge", sluice.Request{Policy: long, Key: "k", Cost: 2}, []sluice.Request{
			{Policy: short, Key: "k", Cost: 0, Force: true}, {Policy: long, Key: "k", Cost: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := sluicetest.NewClock(t0)
			rs := newStore(t, c, WithClock(clock), WithPrefix("refused-"+tc.name+":"))
			ms := memstore.New(memstore.WithClock(clock), memstore.WithSweepInterval(0))
			defer ms.Close()
			ctx := t.Context()
			var ps []sluice.Policy
			for _, r := range append([]sluice.Request{tc.setup}, tc.batch...) {
				ps = append(ps, r.Policy)
			}
			o := newOracle(t, ps...)
			o.batch(t0.UnixNano(), []sluice.Request{tc.setup})
			for _, s := range []sluice.Store{rs, ms} {
				if err := s.TakeAll(ctx, []sluice.Request{tc.setup}, make([]sluice.Decision, 1)); err != nil {
					t.Fatal(err)
				}
			}
			clock.Advance(5 * time.Second)
			if tc.name == "bucket" {
				clock.Set(t0) // the TAT's fraction matters
			}
			want := o.batch(clock.Now().UnixNano(), tc.batch)
			for _, s := range []sluice.Store{rs, ms} {
				got := make([]sluice.Decision, len(tc.batch))
				if err := s.TakeAll(ctx, tc.batch, got); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%T: %+v\n want %+v", s, got, want)
				}
			}
		})
	}
}
