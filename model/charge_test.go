// SPDX-License-Identifier: Apache-2.0

package model

import (
	"encoding/binary"
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// charge records a cost of c at t in the reference, whatever the limit.
func (r *ref) charge(t, c int64) {
	switch r.alg {
	case sluice.FixedWindow, sluice.SlidingWindow:
		pn := r.p.Num().Int64()
		w := floorDiv(t, pn)
		if w < r.win {
			w = r.win
		}
		switch {
		case w == r.win+1:
			r.prev, r.cur = r.cur, 0
		case w > r.win+1:
			r.prev, r.cur = 0, 0
		}
		r.win = w
		r.cur += c
	case sluice.SlidingLog:
		at := t
		if k := len(r.log); k > 0 && r.log[k-1][0] > at {
			at = r.log[k-1][0]
		}
		r.log = append(r.log, [2]int64{at, c})
	default:
		rt := big.NewRat(t, 1)
		if r.tat.Cmp(rt) < 0 {
			r.tat = rt
		}
		r.tat = new(big.Rat).Add(r.tat, new(big.Rat).Mul(big.NewRat(c, 1), new(big.Rat).Quo(r.p, r.n)))
	}
}

// FuzzCharge drives every model with takes and charges at arbitrary times:
// a take decides as the exact reference does on the charged history, a
// charge is always recorded and answers the peek after it, and every
// RetryAfter is exact.
func FuzzCharge(f *testing.F) {
	f.Add(uint8(0), int64(1000), int64(time.Minute), int64(0), int64(0), []byte("\x00\x00\x00\xac\x00\x00\x00\xac\x00\x00\x00\xac\x00\x00\x00\xac\x00\x00"))
	f.Add(uint8(3), int64(10), int64(time.Second), int64(0), int64(0), []byte("\x00\x8f\x00\x01\xc0\x01"))
	f.Add(uint8(5), int64(10), int64(time.Second), int64(0), int64(0), []byte("\x00\x8f\xa0\x01\xc0\x01\xa0\x01"))
	f.Add(uint8(4), int64(7), int64(3), int64(0), int64(5), []byte("\x00\x83\x01\x84\x02\x87\x00\x01"))
	f.Add(uint8(2), int64(3), int64(time.Second), int64(5), int64(0), []byte("\x00\xff\x80\x01\x80\x01"))
	f.Fuzz(checkCharge)
}

func checkCharge(t *testing.T, alg uint8, limit, period, burst, t0 int64, ops []byte) {
	p := sluice.Policy{Algorithm: sluice.Algorithms()[int(alg)%len(sluice.Algorithms())], Limit: limit, Period: time.Duration(period), Burst: burst}
	m, err := New(p)
	if err != nil {
		return
	}
	if len(ops) > 256 {
		ops = ops[:256]
	}
	now := min(max(t0, 0), MaxTime)
	r := newRef(p)
	var s State
	charged := big.NewInt(0)
	for i := 0; i+1 < len(ops); i += 2 {
		switch step := ops[i]; {
		case step < 0x40:
		case step < 0x80:
			now += int64(step & 7)
		case step < 0xc0:
			now += int64(step&0x3f) * period / 64
		default:
			now += int64(step&1+1) * period
		}
		if now > MaxTime {
			return
		}
		force := ops[i+1]&0x80 != 0
		cost := int64(ops[i+1] & 0x7f)
		if force {
			cost *= max(1, p.Capacity()/32)
			// Stay clear of the caps Charge documents, which the
			// reference does not model.
			charged.Add(charged, big.NewInt(cost))
			if charged.Cmp(big.NewInt(1<<61)) > 0 {
				return
			}
			if p.Algorithm.IsBucket() {
				if span, _ := m.ChargeSpan(cost); span >= int64(sluice.MaxPeriod)/4 || now+4*int64(sluice.MaxPeriod) > math.MaxInt64/2 {
					return
				}
			}
		}
		before := s
		if p.Algorithm == sluice.SlidingLog {
			before.Log = append([]LogEntry(nil), s.Log...)
		}
		var d sluice.Decision
		judged := max(cost, 1)
		if force {
			s, d = m.Charge(s, now, cost)
			r.charge(now, cost)
			judged = 1
			if _, peek := m.Take(s, now, 0); d != peek {
				t.Fatalf("%v: charge %d at %d answered %+v, a peek after it %+v", p, cost, now, d, peek)
			}
			before = s
			if p.Algorithm == sluice.SlidingLog {
				before.Log = append([]LogEntry(nil), s.Log...)
			}
			if want := r.clone().admit(now, 1); d.Allowed != want {
				t.Fatalf("%v: after charge %d at %d: peek allowed=%v, reference %v (%+v)", p, cost, now, d.Allowed, want, d)
			}
			if d.Allowed {
				continue
			}
		} else {
			s, d = m.Take(s, now, cost)
			if cost > p.Capacity() {
				continue
			}
			if want := r.clone().admit(now, judged); d.Allowed != want {
				t.Fatalf("%v: at %d cost %d: model allowed=%v, reference %v (%+v)", p, now, cost, d.Allowed, want, d)
			}
			if d.Allowed {
				if cost > 0 {
					r.admit(now, cost)
				}
				if cost > 0 || d.Allowed {
					continue
				}
			}
		}
		if d.Remaining < 0 || d.ResetAfter < 0 || d.RetryAfter <= 0 {
			t.Fatalf("%v: refused at %d (cost %d, charge %v) with %+v", p, now, cost, force, d)
		}
		at := now + int64(d.RetryAfter)
		if at > MaxTime {
			continue
		}
		if !r.clone().admit(at, judged) {
			t.Fatalf("%v: at %d cost %d (charge %v): RetryAfter %v is too early", p, now, judged, force, d.RetryAfter)
		}
		if at-1 > now && r.clone().admit(at-1, judged) {
			t.Fatalf("%v: at %d cost %d (charge %v): RetryAfter %v is not tight", p, now, judged, force, d.RetryAfter)
		}
		if _, d2 := m.Take(before, at, judged); !d2.Allowed {
			t.Fatalf("%v: model rejects at now+RetryAfter (%d): %+v", p, at, d2)
		}
	}
}

// TestChargeAgainstReference runs FuzzCharge's body over a deterministic
// spread of inputs.
func TestChargeAgainstReference(t *testing.T) {
	params := []struct{ limit, period, burst int64 }{
		{5, int64(time.Second), 10}, {3, int64(time.Second), 0}, {7, int64(time.Minute), 2},
		{1000, int64(time.Hour), 1}, {100, int64(time.Minute), 0}, {1, 1, 1}, {9, 10, 4},
	}
	var buf [128]byte
	seed := uint64(7)
	for alg := range sluice.Algorithms() {
		for _, pr := range params {
			for trial := 0; trial < 20; trial++ {
				for i := range buf {
					seed = seed*6364136223846793005 + 1442695040888963407
					buf[i] = byte(seed >> 56)
				}
				burst := pr.burst
				if !sluice.Algorithms()[alg].IsBucket() {
					burst = 0
				}
				t0 := int64(binary.LittleEndian.Uint32(buf[:4])) * 1e6
				checkCharge(t, uint8(alg), pr.limit, pr.period, burst, t0, buf[4:])
			}
		}
	}
}

// TestChargeDebt is the debt of each algorithm at fixed instants: 1000 per
// minute, 1300 charged at 0.
func TestChargeDebt(t *testing.T) {
	const min = int64(time.Minute)
	for _, tc := range []struct {
		alg sluice.Algorithm
		// The first instant (ns) at which one unit is admitted again.
		free int64
	}{
		{sluice.TokenBucket, 301 * min / 1000}, // 301 units refilled
		{sluice.GCRA, 301 * min / 1000},
		{sluice.LeakyBucket, 301 * min / 1000},
		{sluice.FixedWindow, min},                         // the window ends
		{sluice.SlidingWindow, min + (301*min+1299)/1300}, // 1300·(P−e)/P ≤ 999
		{sluice.SlidingLog, min},                          // the entry ages out
	} {
		t.Run(string(tc.alg), func(t *testing.T) {
			m, err := New(sluice.Policy{Algorithm: tc.alg, Limit: 1000, Period: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			s, d := m.Charge(State{}, 0, 1300)
			if d.Allowed || d.Remaining != 0 || d.RetryAfter != time.Duration(tc.free) {
				t.Fatalf("after the charge: %+v, want refused with RetryAfter %v", d, time.Duration(tc.free))
			}
			if _, d := m.Take(s, tc.free-1, 1); d.Allowed {
				t.Fatalf("admitted 1ns before the debt is paid: %+v", d)
			}
			if _, d := m.Take(s, tc.free, 1); !d.Allowed {
				t.Fatalf("refused when the debt is paid: %+v", d)
			}
		})
	}
}

// TestChargeCaps: the largest charges saturate instead of overflowing.
func TestChargeCaps(t *testing.T) {
	for _, a := range sluice.Algorithms() {
		m, err := New(sluice.Policy{Algorithm: a, Limit: sluice.MaxLimit, Period: time.Duration(sluice.MaxPeriod)})
		if err != nil {
			t.Fatal(err)
		}
		var s State
		for range 5 {
			var d sluice.Decision
			s, d = m.Charge(s, MaxTime, math.MaxInt64)
			if d.Allowed || d.Remaining != 0 || d.RetryAfter <= 0 || d.ResetAfter <= 0 {
				t.Fatalf("%s: %+v", a, d)
			}
		}
		if x := m.ExpiresAt(s); x <= MaxTime {
			t.Fatalf("%s: expires at %d", a, x)
		}
	}
}

// TestDebt: a key charged past its capacity reports, on every refusal, the
// whole units it holds beyond it (Decision.Debt), and 0 once it is paid
// back: 10 a minute (T = 6 s), a charge of 25.
func TestDebt(t *testing.T) {
	const t0 = int64(600 * time.Second) // a window's start
	for _, alg := range sluice.Algorithms() {
		if alg == sluice.LeakyBucket {
			continue // a shaper: Charge is refused for it
		}
		t.Run(string(alg), func(t *testing.T) {
			m, err := New(sluice.Policy{Algorithm: alg, Limit: 10, Period: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			s, d := m.Charge(State{}, t0, 25)
			if d.Allowed || d.Debt != 15 {
				t.Fatalf("the charge's decision: %+v, want refused with debt 15", d)
			}
			// Half a period on: a bucket has drained 5 units; a window
			// counts the 25 still.
			want := map[sluice.Algorithm]int64{sluice.TokenBucket: 10, sluice.GCRA: 10}[alg]
			if want == 0 {
				want = 15
			}
			for _, cost := range []int64{0, 1, 11} {
				if _, d := m.Take(s, t0+int64(30*time.Second), cost); d.Allowed || d.Debt != want {
					t.Fatalf("cost %d half a period on: %+v, want refused with debt %d", cost, d, want)
				}
			}
			// Paid back: no debt, and a key under its limit has none.
			if _, d := m.Take(s, t0+int64(10*time.Minute), 0); d.Debt != 0 || !d.Allowed {
				t.Fatalf("ten periods on: %+v, want admitted with no debt", d)
			}
			if _, d := m.Take(State{}, t0, 0); d.Debt != 0 {
				t.Fatalf("a fresh key: %+v, want no debt", d)
			}
		})
	}
}
