// SPDX-License-Identifier: Apache-2.0

package redisstore

import (
	"math/big"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/sluicetest"
)

// pttl returns key's PTTL in milliseconds.
func pttl(t *testing.T, c rueidis.Client, key string) int64 {
	t.Helper()
	ms, err := c.Do(t.Context(), c.B().Pttl().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatalf("PTTL %s: %v", key, err)
	}
	return ms
}

// TestBucketEpochExpiry: bucket.lua's epochs. The first take on a key
// sets it to expire at its epoch's start plus 2H (H = dur(burst) in whole
// ms, plus 1); a later take in the epoch leaves the expiry alone; the first
// take of the next epoch moves the state to that epoch's field and the
// expiry with it.
func TestBucketEpochExpiry(t *testing.T) {
	c := newClient(t, sluicetest.StartRedis(t))
	// T = 100 ms, burst 30: dur(burst) = 3 s, H = 3001 ms. The clock starts
	// in the middle of an epoch.
	const h = 3001
	b0 := int64(1_700_000_000_000) - 1_700_000_000_000%h
	t0 := time.UnixMilli(b0 + h/2)
	clock := sluicetest.NewClock(t0)
	s := newStore(t, c, WithClock(clock), WithExpirySlack(0))
	p := sluice.Policy{Algorithm: sluice.TokenBucket, Limit: 10, Period: time.Second, Burst: 30}
	key, _ := stateKey(s.prefix, s.slot, policyTag(p), "k")
	epoch := func(at time.Time) int64 { ms := at.UnixMilli(); return ms - ms%h }
	// want checks the key's one field and its expiry: at most the epoch's
	// start plus 2H, and no less than that minus a second (of real time).
	want := func(what string, at time.Time) {
		t.Helper()
		fields, err := c.Do(t.Context(), c.B().Hkeys().Key(key).Build()).AsStrSlice()
		b := epoch(at)
		if err != nil || len(fields) != 1 || fields[0] != strconv.FormatInt(b, 10)+":1:3001" {
			t.Fatalf("%s: fields %q, %v; want one, %d:1:3001", what, fields, err, b)
		}
		end := b + 2*h - at.UnixMilli()
		if got := pttl(t, c, key); got > end || got <= end-1000 {
			t.Fatalf("%s: PTTL %d ms, want in (%d, %d]", what, got, end-1000, end)
		}
	}
	take(t, s, p, "k", 1)
	want("the first take", clock.Now())
	before := pttl(t, c, key)
	take(t, s, p, "k", 29) // TAT now + 3 s: within B + 2H
	if got := pttl(t, c, key); got > before {
		t.Fatalf("PTTL after a take in the same epoch = %d ms, want at most %d (left alone)", got, before)
	}
	// 1 ms into the next epoch (1.5 s on), whose end is half an epoch
	// later: the TAT (t0 + 3 s) is carried over and the expiry moved.
	clock.Set(time.UnixMilli(b0 + h + 1))
	take(t, s, p, "k", 2)
	want("the next epoch's first take", clock.Now())
	// The TAT is t0 + 3.2 s, 1.7 s from now: 13 units remain.
	if d := take(t, s, p, "k", 0); d.Remaining != 13 {
		t.Fatalf("a peek after the epoch's first take: %+v, want 13 remaining", d)
	}
}

// TestBucketTrace: bucket.lua's paths against the model, step by step on a
// caller's clock that moves forward and back across epochs: later
// admissions and their refusals, a full bucket, new keys, an earlier
// epoch's TAT carried over, a later epoch's (handed to take.lua), fractions
// of a ns, peeks, costs past the burst, batches
// (take.lua's path) and Gives. After every step the key outlives its state:
// its expiry is at or after its TAT (plus the slack).
func TestBucketTrace(t *testing.T) { bucketTrace(t) }

// TestBucketTraceRedis6: TestBucketTrace where PEXPIRE has no NX, as
// before Redis 7.0, so that bucket.lua's other way to find a new key
// decides.
func TestBucketTraceRedis6(t *testing.T) {
	asRedis6(t)
	bucketTrace(t)
}

func bucketTrace(t *testing.T) {
	c := newClient(t, sluicetest.StartRedis(t))
	t0 := time.Unix(1_700_000_000, 0)
	clock := sluicetest.NewClock(t0)
	s := newStore(t, c, WithClock(clock))
	start := time.Now()
	policies := []sluice.Policy{
		{Name: "b", Algorithm: sluice.TokenBucket, Limit: 5, Period: time.Second},           // T = 200 ms, H = 1001 ms
		{Name: "t", Algorithm: sluice.TokenBucket, Limit: 3, Period: time.Second, Burst: 4}, // thirds of a ns
		{Name: "g", Algorithm: sluice.GCRA, Limit: 7, Period: time.Second, Burst: 2},
	}
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(3, 4))
	state := map[string]model.State{}
	var at time.Duration
	for i := range 4000 {
		p := policies[rng.IntN(len(policies))]
		at = max(at+time.Duration(rng.IntN(700)-150)*time.Millisecond, 0)
		now := t0.Add(at)
		clock.Set(now)
		key := "k" + strconv.Itoa(rng.IntN(3))
		sk := p.Name + "/" + key
		cp, err := s.compile(p)
		if err != nil {
			t.Fatal(err)
		}
		cost := []int64{0, 1, 1, 1, 2, 3, 6}[rng.IntN(7)]
		if rng.IntN(8) == 0 { // a batch of two: take.lua
			reqs := []sluice.Request{{Policy: p, Key: key, Cost: cost}, {Policy: p, Key: key, Cost: 1}}
			got := make([]sluice.Decision, 2)
			if err := s.TakeAll(ctx, reqs, got); err != nil {
				t.Fatal(err)
			}
			st, want1 := cp.model.Take(state[sk], now.UnixNano(), cost)
			st2, want2 := cp.model.Take(st, now.UnixNano(), 1)
			admitted := want1.Allowed && want2.Allowed // all or nothing
			if admitted {
				state[sk] = st2
			}
			if got[0].Allowed && got[1].Allowed != admitted {
				t.Fatalf("step %d: batch %v at %v: got %+v, want admitted %v", i, reqs, at, got, admitted)
			}
		} else {
			got, gs, err := s.TakeStamped(ctx, p, key, cost)
			if err != nil {
				t.Fatal(err)
			}
			ws, want := cp.model.Take(state[sk], now.UnixNano(), cost)
			state[sk] = ws
			wrote := got.Allowed && cost > 0
			_, probe := cp.model.Take(gs, now.UnixNano(), 1)
			_, wantProbe := cp.model.Take(ws, now.UnixNano(), 1)
			if got != want || (wrote && !reflect.DeepEqual(gs, ws)) || probe != wantProbe {
				t.Fatalf("step %d (%v at %v, %s) cost %d:\n got  %+v %+v\n want %+v %+v", i, p, at, key, cost, got, gs, want, ws)
			}
			if wrote && p.Algorithm != sluice.LeakyBucket && rng.IntN(4) == 0 {
				units := 1 + rng.Int64N(cost)
				g, err := s.Give(ctx, p, key, gs, units)
				if err != nil {
					t.Fatal(err)
				}
				next, w := cp.model.Give(state[sk], ws, units)
				state[sk] = next
				if g != w {
					t.Fatalf("step %d: Give(%d) = %v, want %v", i, units, g, w)
				}
			}
		}
		// The key outlives its state: its expiry (the slack, an hour, on
		// this clock, counted from the write that set it) is at or after
		// its TAT.
		rk, _ := stateKey(s.prefix, s.slot, policyTag(p), key)
		h, err := c.Do(ctx, c.B().Hgetall().Key(rk).Build()).AsStrMap()
		if err != nil {
			t.Fatal(err)
		}
		if len(h) == 0 {
			continue
		}
		idle := new(big.Int).Sub(stateExpiry(t, rk, h), big.NewInt(now.UnixNano()))
		// The expiry is read before the time since start, which bounds the
		// time since the write from above: read after, a loaded box's
		// wait between the two would count against the key.
		got := time.Duration(pttl(t, c, rk)) * time.Millisecond
		if need := time.Duration(idle.Int64()) + time.Hour - time.Since(start); got < need {
			t.Fatalf("step %d: %s expires in %v, before its state is idle (%v from now, plus the slack)", i, rk, got, idle)
		}
	}
}

// TestBucketHugeDebt: a TAT far ahead (a charge's debt near 2⁵² ns, and
// one whose HINCRBY would pass 2⁵³, left to take.lua) is refused, and the
// state reported is exact: the model's decision on it.
func TestBucketHugeDebt(t *testing.T) {
	c := newClient(t, sluicetest.StartRedis(t))
	t0 := time.UnixMilli(1_700_000_000_000)
	clock := sluicetest.NewClock(t0)
	s := newStore(t, c, WithClock(clock))
	p := sluice.Policy{Name: "huge", Algorithm: sluice.GCRA, Limit: 10, Period: time.Second} // den 1, H = 1001 ms
	cp, err := s.compile(p)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := stateKey(s.prefix, s.slot, policyTag(p), "k")
	b := t0.UnixMilli() - t0.UnixMilli()%1001
	ctx := t.Context()
	for _, v := range []int64{1<<52 + 5, 1<<53 - 10} {
		f := strconv.FormatInt(b, 10) + ":1:1001"
		if err := c.Do(ctx, c.B().Del().Key(key).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if err := c.Do(ctx, c.B().Hset().Key(key).FieldValue().FieldValue(f, strconv.FormatInt(v, 10)).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if err := c.Do(ctx, c.B().Pexpire().Key(key).Milliseconds(3_600_000).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		stored := model.State{Time: b*1_000_000 + v}
		for _, cost := range []int64{1, 0} {
			d, st, err := s.TakeStamped(ctx, p, "k", cost)
			if err != nil {
				t.Fatal(err)
			}
			_, want := cp.model.Take(stored, t0.UnixNano(), cost)
			if d != want || !reflect.DeepEqual(st, stored) {
				t.Fatalf("v %d, cost %d: %+v, state %+v; want %+v, %+v", v, cost, d, st, want, stored)
			}
		}
	}
}

// TestBucketBurstChange: a named policy whose burst grows (another epoch
// length H, one denominator) does not trust the expiry the old H set: the
// key still outlives its TAT.
func TestBucketBurstChange(t *testing.T) {
	c := newClient(t, sluicetest.StartRedis(t))
	const h2 = 2002 // the new H; the old one, 1001, shares its epochs' starts
	b0 := int64(1_700_000_000_000) - 1_700_000_000_000%h2
	clock := sluicetest.NewClock(time.UnixMilli(b0 + 1000))
	s := newStore(t, c, WithClock(clock), WithExpirySlack(0))
	p1 := sluice.Policy{Name: "x", Algorithm: sluice.GCRA, Limit: 1000, Period: time.Second, Burst: 1000} // H 1001 ms
	p2 := p1
	p2.Burst = 2001 // H 2002 ms
	take(t, s, p1, "k", 1000)
	if d := take(t, s, p2, "k", 1001); !d.Allowed {
		t.Fatalf("the take under the larger burst: %+v, want admitted", d)
	}
	key, _ := stateKey(s.prefix, s.slot, policyTag(p2), "k")
	h, err := c.Do(t.Context(), c.B().Hgetall().Key(key).Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	idle := time.Duration(new(big.Int).Sub(stateExpiry(t, key, h), big.NewInt(clock.Now().UnixNano())).Int64())
	if got := time.Duration(pttl(t, c, key)) * time.Millisecond; got < idle-100*time.Millisecond {
		t.Fatalf("the key expires in %v, before its state is idle (%v)", got, idle)
	}
}

// TestBucketBatchOfTwoRates: a batch holding two rates of one name on one
// key (two denominators) decides and stores as memstore does: the second
// request reads the first's TAT on its own grid.
func TestBucketBatchOfTwoRates(t *testing.T) {
	c := newClient(t, sluicetest.StartRedis(t))
	t0 := time.UnixMilli(1_700_000_000_000)
	clock := sluicetest.NewClock(t0)
	s := newStore(t, c, WithClock(clock))
	ms := memstore.New(memstore.WithClock(clock))
	defer ms.Close()
	p7 := sluice.Policy{Name: "b", Algorithm: sluice.TokenBucket, Limit: 7, Period: 2 * time.Second, Burst: 2}
	p5 := sluice.Policy{Name: "b", Algorithm: sluice.TokenBucket, Limit: 5, Period: time.Second, Burst: 5}
	ctx := t.Context()
	batch := []sluice.Request{{Policy: p7, Key: "k", Cost: 1}, {Policy: p5, Key: "k", Cost: 1}}
	got, want := make([]sluice.Decision, 2), make([]sluice.Decision, 2)
	if err := s.TakeAll(ctx, batch, got); err != nil {
		t.Fatal(err)
	}
	if err := ms.TakeAll(ctx, batch, want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the batch: %+v, want %+v", got, want)
	}
	clock.Advance(482 * time.Millisecond)
	for _, cost := range []int64{2, 0} {
		g := take(t, s, p5, "k", cost)
		w, err := ms.Take(ctx, p5, "k", cost)
		if err != nil {
			t.Fatal(err)
		}
		if g != w {
			t.Fatalf("cost %d after the batch: %+v, want %+v", cost, g, w)
		}
	}
}
